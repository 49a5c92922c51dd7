"""The incident channel as its people use it: Slack Events API requests, signed.

Each message is first stored in the fake Slack Web API (so the thread exists there
for ``conversations.replies``), then delivered to the app as Slack delivers it: an
@mention as both an ``app_mention`` and a ``message`` event (same ``ts``, different
``event_id``), a thread reply as a ``message`` event. Requests are signed as Slack
signs them (docs.slack.dev, "Verifying requests from Slack"):
``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:{timestamp}:{body}">``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from bot.drill.errors import DrillError
from bot.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlackApi


@dataclass(frozen=True)
class Person:
    """Someone in the incident channel: Slack user id, name, and what they write."""

    user_id: str
    name: str
    text: str


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """Slack's request signature of ``body`` sent at ``timestamp`` (Unix seconds).

    >>> signature("s", 1, b"{}")[:10]
    'v0=65072e0'
    """
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class IncidentChannel:
    """One channel of one org; ``mention`` and ``reply`` return the message's ``ts``."""

    def __init__(
        self,
        *,
        http: httpx.AsyncClient,
        url: str,
        secret: str,
        slack: FakeSlackApi,
        org_id: str,
        channel_id: str,
    ) -> None:
        self._http = http
        self._url = url
        self._secret = secret
        self._slack = slack
        self.org_id = org_id
        self.channel_id = channel_id
        self._ids = itertools.count(1)

    async def mention(self, person: Person) -> str:
        """``person`` @mentions the bot at the top of the channel: a new thread.

        Raises:
            DrillError: the app refused an event.
        """
        text = f"<@{BOT_USER_ID}> {person.text}"
        ts = self._slack.add_message(self.channel_id, text, user=person.user_id)
        for kind in ("app_mention", "message"):
            await self._deliver(self._event(kind, person.user_id, text, ts, None))
        return ts

    async def reply(self, person: Person, thread_ts: str) -> str:
        """``person`` replies in the thread ``thread_ts`` (no mention).

        Raises:
            DrillError: the app refused the event.
        """
        ts = self._slack.add_message(
            self.channel_id, person.text, user=person.user_id, thread_ts=thread_ts
        )
        await self._deliver(self._event("message", person.user_id, person.text, ts, thread_ts))
        return ts

    async def click(
        self, person: Person, *, action_id: str, value: str, message_ts: str, thread_ts: str
    ) -> None:
        """``person`` clicks a button of the bot's message ``message_ts`` in ``thread_ts``:
        a signed ``block_actions`` interaction, as Slack sends it (form field ``payload``).

        Raises:
            DrillError: the app refused the request.
        """
        payload = {
            "type": "block_actions",
            # a member of the installing workspace (the team auth.test names)
            "user": {"id": person.user_id, "name": person.name, "team_id": TEAM_ID},
            "api_app_id": "A0DRILL",
            "team": {"id": self.org_id},
            "channel": {"id": self.channel_id},
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": self.channel_id,
                "thread_ts": thread_ts,
            },
            "message": {"ts": message_ts, "thread_ts": thread_ts},
            "actions": [
                {"action_id": action_id, "type": "button", "value": value,
                 "action_ts": f"{time.time():.6f}"}
            ],
        }  # fmt: skip
        raw = urlencode({"payload": json.dumps(payload)}).encode()
        await self._post(raw, "application/x-www-form-urlencoded", "an interaction")

    async def event(self, event: dict[str, Any]) -> None:
        """Deliver ``event`` (e.g. Slack's ``agent_session_stopped``) as a signed Events
        API request, in the envelope Slack wraps each event in.

        Raises:
            DrillError: the app refused the request.
        """
        body = self._event("message", "", "", "", None)
        body["event"] = event
        await self._deliver(body)

    async def post(self, person: Person) -> str:
        """``person`` posts at the top of the channel without mentioning the bot: a
        ``message`` event the app sees (and, as Slack has it, need not answer)."""
        ts = self._slack.add_message(self.channel_id, person.text, user=person.user_id)
        await self._deliver(self._event("message", person.user_id, person.text, ts, None))
        return ts

    async def app_post(self, message: dict[str, Any]) -> str:
        """An alerting app posts ``message`` (``bot.fakes.slack_alerts``) at the top of
        the channel: stored in the fake Slack (which gives its ``ts``), then delivered
        as Slack delivers another app's post, a ``message`` event. Returns the ``ts``.

        Raises:
            DrillError: the app refused the event.
            SlackFailure: the fake Slack refused the post (as Slack would).
        """
        stored = self._slack.add_bot_message(self.channel_id, message)
        event = {
            **stored,
            "channel": self.channel_id,
            "event_ts": stored["ts"],
            "channel_type": "channel",
        }
        await self._deliver(self._callback(event))
        return str(stored["ts"])

    async def command(self, person: Person, command: str, text: str) -> str:
        """``person`` runs the slash command ``command`` with ``text`` in the channel: a
        signed form as Slack sends it (docs.slack.dev, "Implementing slash commands"), its
        ``response_url`` pointed at the fake. Returns what the app answered at once (its
        acknowledgement's text; "" for an empty one).

        Raises:
            DrillError: the app refused the request.
        """
        n = next(self._ids)
        fields = {
            "token": "fake-verification-token",
            "team_id": self.org_id,
            "team_domain": "fake",
            "channel_id": self.channel_id,
            "channel_name": "incident",
            "user_id": person.user_id,
            "user_name": person.name,
            "command": command,
            "text": text,
            "api_app_id": "A0DRILL",
            "is_enterprise_install": "false",
            "response_url": self._slack.response_url(str(n)),
            "trigger_id": f"{n}.{int(time.time())}.fake{n:04d}",
        }
        raw = urlencode(fields).encode()
        response = await self._post(raw, "application/x-www-form-urlencoded", "a command")
        return _ack_text(response)

    async def submit(
        self, person: Person, view: dict[str, Any], values: dict[str, str | None]
    ) -> dict[str, Any]:
        """``person`` submits the modal ``view`` with ``values`` (block id → the text of its
        one input): a signed ``view_submission`` interaction. Returns the app's answer
        (``{}``, or ``{"response_action": "errors", "errors": {…}}``).

        Raises:
            DrillError: the app refused the request.
        """
        state = {
            block_id: {_input_action(view, block_id): {"type": "plain_text_input", "value": v}}
            for block_id, v in values.items()
        }
        payload = {
            "type": "view_submission",
            "team": {"id": self.org_id, "domain": "fake"},
            "user": {"id": person.user_id, "name": person.name, "team_id": TEAM_ID},
            "api_app_id": "A0DRILL",
            "trigger_id": f"{next(self._ids)}.{int(time.time())}.fakesubmit",
            "view": {**view, "state": {"values": state}},
        }
        raw = urlencode({"payload": json.dumps(payload)}).encode()
        response = await self._post(raw, "application/x-www-form-urlencoded", "a submission")
        if not response.content:
            return {}
        answer = response.json()
        return answer if isinstance(answer, dict) else {}

    def _event(
        self, kind: str, user: str, text: str, ts: str, thread_ts: str | None
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": kind,
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "channel": self.channel_id,
            "channel_type": "channel",
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        return self._callback(event)

    def _callback(self, event: dict[str, Any]) -> dict[str, Any]:
        """The Events API body around ``event``, as Slack wraps it."""
        return {
            "type": "event_callback",
            "team_id": self.org_id,
            "api_app_id": "A0DRILL",
            "event_id": f"Ev0{self.org_id}{next(self._ids):05d}",
            "event_time": int(time.time()),
            "authorizations": [
                {"enterprise_id": None, "team_id": self.org_id, "user_id": BOT_USER_ID}
            ],
            "event": event,
        }

    async def _deliver(self, body: dict[str, Any]) -> None:
        await self._post(json.dumps(body).encode(), "application/json", "an event")

    async def _post(self, raw: bytes, content_type: str, what: str) -> httpx.Response:
        now = int(time.time())
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": str(now),
            "X-Slack-Signature": signature(self._secret, now, raw),
        }
        try:
            response = await self._http.post(self._url, content=raw, headers=headers)
        except httpx.HTTPError as exc:
            raise DrillError(f"the Slack app did not answer {what}: {exc}") from exc
        if response.status_code != 200:
            raise DrillError(f"the Slack app refused {what}: HTTP {response.status_code}")
        return response


def _ack_text(response: httpx.Response) -> str:
    """The text of an app's immediate answer to a slash command (JSON or plain)."""
    if not response.content:
        return ""
    try:
        body = response.json()
    except ValueError:
        return response.text
    return str(body.get("text", "")) if isinstance(body, dict) else ""


def _input_action(view: dict[str, Any], block_id: str) -> str:
    """The ``action_id`` of the input element of ``view``'s block ``block_id``."""
    for block in view.get("blocks") or ():
        if isinstance(block, dict) and block.get("block_id") == block_id:
            return str((block.get("element") or {}).get("action_id", "input"))
    return "input"
