"""A local fake of the Slack Web API: real HTTP on 127.0.0.1, Slack's wire format.

Tests use it, and so can the product (the drill runs a whole incident against it).

The real ``slack_sdk.web.async_client.AsyncWebClient`` reaches it through ``base_url``
(``FakeSlackApi.base_url``). It implements the methods Warroom uses, keeps what was
posted (so ``conversations.replies`` serves it back, metadata included when asked
for), records every call, and enforces Slack's cheap-to-check limits itself so tests
catch our mistakes:

- ``text`` over 40,000 chars: ``chat.postMessage``/``chat.postEphemeral`` keep the
  first 40,000 (Slack: "truncating really long messages"), ``chat.update`` answers
  ``msg_too_long``.
- more than 50 blocks, a section/header/context text over 3,000 chars, a ``markdown``
  block over 12,000 chars → ``invalid_blocks`` with ``errors`` naming the JSON pointer,
  as Slack answers ("no more than 50 items allowed [json-pointer:/blocks]",
  "must be less than 3001 characters [json-pointer:/blocks/0/text/text]").
- the ``markdown`` text of one message over 12,000 chars in total →
  ``msg_blocks_too_long`` (Slack's cumulative limit; bolt-js issue #2509 measured the
  rejection just above 12,000).
- views: title ≤ 24 chars, ≤ 100 blocks, ``private_metadata`` ≤ 3,000 chars,
  ``plain_text_input`` ``max_length`` ≤ 3,000 and ``initial_value`` within it;
  ``views.update`` replaces the whole view (a field left out is at Slack's default, not
  kept), with a new ``hash``, keeping only what was entered in inputs of the same
  ``block_id`` and ``action_id`` (``replace_view``).

- per-workspace rate limits by tier (``slack_limits``): HTTP 429 + ``Retry-After``.
- ``auth.test`` answers with Grid's ``enterprise_id`` (when installed in an org) and
  ``is_enterprise_install``; ``chat.update`` returns the updated ``message``; cursors
  are opaque strings (``response_metadata.next_cursor``; a bad one → ``invalid_cursor``).
- the bot is a member of the channels it was not removed from (``remove_bot``); a DM
  (``D…``) or a channel it is not in: ``chat.postMessage`` → ``not_in_channel`` (``D…``:
  ``channel_not_found``), ``chat.postEphemeral`` → ``channel_not_found``, and
  ``user_not_in_channel`` for a user outside a channel's known members.

Faults on demand, per method: ``reset_after_next`` (served, then the connection is
reset before the answer), ``rate_limit_next`` (HTTP 429 with ``Retry-After``, body
``{"ok": false, "error": "ratelimited"}``) and ``fail_next`` (``{"ok": false, "error": …}``,
e.g. ``msg_too_long``, ``msg_blocks_too_long``, ``expired_trigger_id``); permanent ones:
``break_channel`` (``is_archived``, ``channel_not_found``, …, for every call naming the
channel) and ``revoke`` (``token_revoked``, ``account_inactive``, ``invalid_auth`` for
every call).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.fakes.slack_agents import AgentSurfaceState
from bot.fakes.slack_limits import RateLimits

__all__ = [
    "BOT_ID",
    "BOT_USER_ID",
    "WORKSPACE_URL",
    "MAX_BLOCKS",
    "MAX_INPUT_CHARS",
    "MAX_MARKDOWN_CHARS",
    "MAX_PRIVATE_METADATA_CHARS",
    "MAX_SECTION_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_VIEW_BLOCKS",
    "MAX_VIEW_TITLE_CHARS",
    "RATELIMITED_BODY",
    "TEAM_ID",
    "FakeSlackApi",
    "Handler",
    "JsonDict",
    "RecordedCall",
    "SlackFailure",
]

JsonDict = dict[str, Any]
Handler = Callable[[JsonDict], JsonDict]

BOT_USER_ID = "U0FAKEBOT"
WORKSPACE_URL = "https://fake-co.example.invalid/"  # auth.test's ``url``: permalinks start here
BOT_ID = "B0FAKEBOT"
TEAM_ID = "T0FAKETEAM"
RATELIMITED_BODY: JsonDict = {"ok": False, "error": "ratelimited"}

MAX_TEXT_CHARS = 40_000
MAX_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_SECTION_CHARS = 3_000
MAX_MARKDOWN_CHARS = 12_000
MAX_PRIVATE_METADATA_CHARS = 3_000
MAX_INPUT_CHARS = 3_000
MAX_VIEW_TITLE_CHARS = 24
_SIGN_IN_PAGE = "<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in</body></html>"
_JSON_ARGS = ("blocks", "metadata", "view", "files", "attachments", "loading_messages", "chunks")


class SlackFailure(Exception):
    """Raised inside a handler to answer ``{"ok": false, "error": error, …extra}``."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass
class RecordedCall:
    """One request the fake answered.

    ``waited_s`` is how long the client waited since this method's previous answer
    when that answer was a 429 (None otherwise): the measured back-off.
    """

    method: str
    args: JsonDict
    status: int
    response: JsonDict
    at_s: float
    waited_s: float | None = None


@dataclass
class _Fault:
    error: str | None  # None = HTTP 429
    retry_after_s: int = 1


@dataclass
class _State:
    messages: dict[str, list[JsonDict]] = field(default_factory=dict)
    ephemerals: list[JsonDict] = field(default_factory=list)
    views: dict[str, JsonDict] = field(default_factory=dict)
    statuses: list[JsonDict] = field(default_factory=list)
    reactions: list[JsonDict] = field(default_factory=list)
    pending_files: dict[str, JsonDict] = field(default_factory=dict)
    files: dict[str, JsonDict] = field(default_factory=dict)
    users: dict[str, JsonDict] = field(default_factory=dict)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    expired_triggers: set[str] = field(default_factory=set)
    bot_absent: set[str] = field(default_factory=set)
    members: dict[str, set[str]] = field(default_factory=dict)
    broken_channels: dict[str, str] = field(default_factory=dict)
    revoked: str | None = None
    shared_files: dict[str, bytes] = field(default_factory=dict)


class FakeSlackApi:
    """The fake server. ``await start()``, use ``base_url`` and ``token``, ``await stop()``."""

    def __init__(
        self,
        *,
        token: str | None = None,
        enterprise_id: str | None = None,
        rate_window_s: float = 60.0,
        rate_limits: bool = True,
    ) -> None:
        """``enterprise_id``: the Enterprise Grid org the app is installed in (None: a
        standalone workspace). ``rate_window_s``: the window of the per-minute limits
        (shorter in tests that measure the budget); ``rate_limits=False`` turns them off
        (benchmarks that measure our code, not Slack's limits). ``token``: the bot token;
        by default a new one per instance, as each real install has its own (what is keyed
        by workspace, such as the shared ``chat.update`` budget, then stays apart)."""
        self.token = token or f"xoxb-fake-{secrets.token_hex(6)}"
        self.enterprise_id = enterprise_id
        self.limits = RateLimits(time.monotonic, window_s=rate_window_s, enabled=rate_limits)
        self.calls: list[RecordedCall] = []
        self.state = _State()
        self._faults: dict[str, list[_Fault]] = {}
        self._resets: dict[str, int] = {}
        self._last_429_at: dict[str, float] = {}
        self._ids = itertools.count(1)
        self._last_ts_us = 0
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._handlers: dict[str, Handler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.delete": self._chat_delete,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "conversations.replies": self._conversations_replies,
            "conversations.history": self._conversations_history,
            "reactions.add": self._reactions_add,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "views.push": self._views_push,
            "assistant.threads.setStatus": self._set_status,
            "files.getUploadURLExternal": self._get_upload_url,
            "files.completeUploadExternal": self._complete_upload,
            "users.info": self._users_info,
            "usergroups.users.list": self._usergroup_users,
        }
        self.agents = AgentSurfaceState(
            new_ts=self._ts,
            store_message=self._store_message,
            bot_in=lambda channel: self._check_bot_in(channel, absent="not_in_channel"),
            check_blocks=_check_blocks,
            check_metadata=_checked_metadata,
            failure=SlackFailure,
        )
        self._handlers.update(self.agents.handlers())

    # ----- lifecycle ---------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The ``base_url`` for ``AsyncWebClient`` (ends with ``/api/``)."""
        return f"http://127.0.0.1:{self._port}/api/"

    async def start(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on ``host:port`` (default: 127.0.0.1, a free port).

        Raises:
            OSError: the port could not be bound.
        """
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._serve_api)
        app.router.add_post("/upload/{file_id}", self._serve_upload)
        app.router.add_post("/commands/{tail:.*}", self._serve_response_url)
        app.router.add_get("/files-pri/{file_id}/{name}", self._serve_private_file)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            await self._runner.cleanup()
            raise
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        """Close the listener and every open connection."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ----- test controls -----------------------------------------------------------

    def rate_limit_next(self, method: str, *, retry_after_s: int = 1, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with HTTP 429 + ``Retry-After``."""
        self._faults.setdefault(method, []).extend([_Fault(None, retry_after_s)] * times)

    def reset_after_next(self, method: str, *, times: int = 1) -> None:
        """Serve the next ``times`` calls of ``method`` (a post is made), then reset the
        connection instead of answering: the client sees a connection error."""
        self._resets[method] = self._resets.get(method, 0) + times

    def fail_next(self, method: str, error: str, *, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with ``{"ok": false, "error": error}``."""
        self._faults.setdefault(method, []).extend([_Fault(error)] * times)

    def break_channel(self, channel: str, error: str = "is_archived") -> None:
        """Answer every later call naming ``channel`` with ``error`` (until restored)."""
        self.state.broken_channels[channel] = error

    def revoke(self, error: str = "token_revoked") -> None:
        """Answer every later call with ``error`` (``token_revoked``, ``account_inactive``,
        ``invalid_auth``): the installation is gone."""
        self.state.revoked = error

    def remove_bot(self, channel: str) -> None:
        """The bot is not (or no longer) a member of ``channel``."""
        self.state.bot_absent.add(channel)

    def set_members(self, channel: str, user_ids: list[str]) -> None:
        """The people in ``channel`` (for ``chat.postEphemeral``'s ``user_not_in_channel``)."""
        self.state.members[channel] = set(user_ids)

    def expire_trigger(self, trigger_id: str) -> None:
        """Make ``views.open``/``views.push`` with this trigger answer ``expired_trigger_id``."""
        self.state.expired_triggers.add(trigger_id)

    def add_user(self, user_id: str, name: str) -> None:
        """Make ``users.info`` know a user."""
        self.state.users[user_id] = {"id": user_id, "name": name, "team_id": TEAM_ID}

    def set_usergroup(self, usergroup_id: str, user_ids: list[str]) -> None:
        """Define a user group's members for ``usergroups.users.list``."""
        self.state.usergroups[usergroup_id] = list(user_ids)

    def add_message(
        self, channel: str, text: str, *, user: str = "U0FAKEALICE", thread_ts: str | None = None
    ) -> str:
        """Seed a human message (e.g. the @mention that starts a thread); returns its ts."""
        message: JsonDict = {"type": "message", "user": user, "text": text, "ts": self._ts()}
        if thread_ts is not None:
            message["thread_ts"] = thread_ts
        self.state.messages.setdefault(channel, []).append(message)
        return str(message["ts"])

    def add_bot_message(self, channel: str, message: JsonDict) -> JsonDict:
        """Seed another app's post (an alerting app's, say); returns it as stored, with
        its new ``ts``.

        As Slack has it (docs.slack.dev, "bot_message" subtype; message payloads): an
        app's post carries its ``bot_id`` (``B…``), and an incoming webhook's also the
        ``bot_message`` subtype and a ``username``; a message needs ``text``,
        ``attachments`` or ``blocks`` (else ``no_text``); attachments and blocks are
        checked as ``chat.postMessage`` checks blocks.

        Raises:
            SlackFailure: ``no_text``, ``invalid_blocks``, ``invalid_attachments``, or
                ``invalid_arguments`` (no ``bot_id``, or this app's own ``bot_id``: its
                posts go through ``chat.postMessage``).
        """
        bot_id = str(message.get("bot_id") or "")
        if not bot_id.startswith("B") or bot_id == BOT_ID:
            raise SlackFailure("invalid_arguments")
        if not (message.get("text") or message.get("attachments") or message.get("blocks")):
            raise SlackFailure("no_text")
        if not isinstance(message.get("attachments", []), list):
            raise SlackFailure("invalid_attachments")
        problems = _block_problems(message.get("blocks") or [], max_blocks=MAX_BLOCKS)
        if problems:
            raise SlackFailure("invalid_blocks", errors=problems)
        stored: JsonDict = {"type": "message", **message, "ts": self._ts()}
        self.state.messages.setdefault(channel, []).append(stored)
        return stored

    def calls_to(self, method: str) -> list[RecordedCall]:
        """The recorded calls of one method, oldest first."""
        return [call for call in self.calls if call.method == method]

    def thread(self, channel: str, thread_ts: str) -> list[JsonDict]:
        """Stored messages of a thread (parent first), as ``conversations.replies`` sees them."""
        return [
            message
            for message in self.state.messages.get(channel, [])
            if message["ts"] == thread_ts or message.get("thread_ts") == thread_ts
        ]

    async def wait_for(
        self, predicate: Callable[[], bool], *, timeout_s: float = 5.0, interval_s: float = 0.01
    ) -> None:
        """Poll ``predicate`` until true; AssertionError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout_s} s")
            await asyncio.sleep(interval_s)

    # ----- HTTP --------------------------------------------------------------------

    async def _serve_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _read_args(request)
        token = _bearer(request) or args.pop("token", None)
        status, headers, body = self._answer(method, args, token)
        if self._resets.get(method):
            self._resets[method] -= 1
            if request.transport is not None:
                request.transport.abort()  # the answer is lost after Slack acted
        return web.json_response(body, status=status, headers=headers)

    def _answer(
        self, method: str, args: JsonDict, token: str | None
    ) -> tuple[int, dict[str, str], JsonDict]:
        now = time.monotonic()
        waited = now - self._last_429_at.pop(method) if method in self._last_429_at else None
        status, headers = 200, {}
        faults = self._faults.get(method)
        retry_after = self._over_limit(method, args, token)
        if token == self.token and faults:
            fault = faults.pop(0)
            body: JsonDict = {"ok": False, "error": fault.error or RATELIMITED_BODY["error"]}
            if fault.error is None:
                status, headers = 429, {"Retry-After": str(fault.retry_after_s)}
                self._last_429_at[method] = now
        elif retry_after is not None:
            body = dict(RATELIMITED_BODY)
            status, headers = 429, {"Retry-After": str(retry_after)}
            self._last_429_at[method] = now
        else:
            body = self._dispatch(method, args, token)
        self.calls.append(RecordedCall(method, args, status, body, now, waited))
        return status, headers, body

    def _over_limit(self, method: str, args: JsonDict, token: str | None) -> int | None:
        if token != self.token or self.state.revoked:
            return None
        channel = args.get("channel") or args.get("channel_id")
        return self.limits.admit(TEAM_ID, method, str(channel) if channel else None)

    def _dispatch(self, method: str, args: JsonDict, token: str | None) -> JsonDict:
        if not token:
            return {"ok": False, "error": "not_authed"}
        if token != self.token:
            return {"ok": False, "error": "invalid_auth"}
        if self.state.revoked:
            return {"ok": False, "error": self.state.revoked}
        broken = self.state.broken_channels.get(str(args.get("channel") or args.get("channel_id")))
        if broken:
            return {"ok": False, "error": broken}
        handler = self._handlers.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        try:
            return {"ok": True, **handler(args)}
        except SlackFailure as failure:
            return {"ok": False, "error": failure.error, **failure.extra}

    def add_file(
        self, name: str, content: bytes, *, filetype: str = "text", mimetype: str = "text/plain"
    ) -> JsonDict:
        """A file someone shared, as Slack's file object (``url_private_download`` served
        here, to the bot token only); put it in a message's ``files``."""
        file_id = f"F0FAKE{next(self._ids):04d}"
        self.state.shared_files[file_id] = content
        base = f"http://127.0.0.1:{self._port}/files-pri/{file_id}/{name}"
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": filetype,
            "size": len(content),
            "url_private": base,
            "url_private_download": base + "?download=1",
        }

    async def _serve_private_file(self, request: web.Request) -> web.Response:
        """A file's ``url_private``: its bytes for the bot token; for anyone else Slack's
        sign-in page (HTML, status 200), as Slack answers."""
        content = self.state.shared_files.get(request.match_info["file_id"])
        self.calls.append(
            RecordedCall("files-pri", dict(request.match_info), 200, {}, time.monotonic(), None)
        )
        if _bearer(request) != self.token or self.state.revoked:
            return web.Response(text=_SIGN_IN_PAGE, content_type="text/html")
        if content is None:
            return web.Response(status=404, text="file_not_found")
        return web.Response(body=content, content_type="text/plain")

    def response_url(self, command_id: str = "1") -> str:
        """A slash command's ``response_url`` served by this fake (Slack's look:
        ``https://hooks.slack.com/commands/<team>/<id>/<secret>``)."""
        return f"http://127.0.0.1:{self._port}/commands/{TEAM_ID}/{command_id}/fakesecret"

    async def _serve_response_url(self, request: web.Request) -> web.Response:
        """A reply to a slash command: kept in ``state.ephemerals`` (``response_url`` set)
        unless it says ``"response_type": "in_channel"``. Slack answers ``ok``."""
        body = await request.json()
        if body.get("response_type") == "in_channel":
            raise web.HTTPBadRequest(text="in_channel replies are not faked")
        if not body.get("text") and not body.get("blocks"):
            return web.Response(status=400, text="no_text")
        self.state.ephemerals.append({**body, "response_url": request.path})
        self.calls.append(RecordedCall("response_url", body, 200, {}, time.monotonic(), None))
        return web.Response(text="ok")

    async def _serve_upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        pending = self.state.pending_files.get(file_id)
        if pending is None:
            return web.Response(status=404, text="file not found")
        data = await _read_upload(request)
        pending["content"] = data
        self.calls.append(
            RecordedCall("upload", {"file_id": file_id}, 200, {}, time.monotonic(), None)
        )
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    # ----- helpers -----------------------------------------------------------------

    def _ts(self) -> str:
        """A new message ts as Slack makes one: the time it was posted (Unix seconds, six
        decimals), unique and increasing in this fake (a microsecond after the last at
        least), so the elapsed times shown from a ts are the clock's."""
        now_us = max(time.time_ns() // 1000, self._last_ts_us + 1)
        self._last_ts_us = now_us
        return f"{now_us // 1_000_000}.{now_us % 1_000_000:06d}"

    def _check_bot_in(self, channel: str, *, absent: str) -> None:
        """Slack refuses writes where the bot is not a member (no ``chat:write.public``)."""
        if channel.startswith("D"):
            raise SlackFailure("channel_not_found")
        if channel in self.state.bot_absent:
            raise SlackFailure(absent)

    def _find(self, channel: str, ts: str) -> JsonDict:
        for message in self.state.messages.get(channel, []):
            if message["ts"] == ts:
                return message
        raise SlackFailure("message_not_found")

    def _store_message(self, args: JsonDict, *, extra: JsonDict | None = None) -> JsonDict:
        channel = _required(args, "channel")
        message: JsonDict = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "text": args.get("text", ""),
            "ts": self._ts(),
            **(extra or {}),
        }
        if args.get("blocks"):
            message["blocks"] = args["blocks"]
        if args.get("thread_ts"):
            message["thread_ts"] = args["thread_ts"]
        if args.get("metadata"):
            message["metadata"] = _checked_metadata(args["metadata"])
        self.state.messages.setdefault(channel, []).append(message)
        return message

    # ----- methods -----------------------------------------------------------------

    def _auth_test(self, args: JsonDict) -> JsonDict:
        answer: JsonDict = {
            "url": WORKSPACE_URL,
            "team": "Fake Co",
            "user": "warroom",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }
        if self.enterprise_id is not None:
            answer["enterprise_id"] = self.enterprise_id
        return answer

    def _chat_post_message(self, args: JsonDict) -> JsonDict:
        _check_message(args)
        self._check_bot_in(_required(args, "channel"), absent="not_in_channel")
        message = self._store_message(_truncated(args))
        return {"channel": args["channel"], "ts": message["ts"], "message": _public(message)}

    def _chat_update(self, args: JsonDict) -> JsonDict:
        if len(str(args.get("text", ""))) > MAX_TEXT_CHARS:
            raise SlackFailure("msg_too_long")
        _check_message(args)
        self.agents.refuses_update(_required(args, "channel"), _required(args, "ts"))
        message = self._find(_required(args, "channel"), _required(args, "ts"))
        for key in ("text", "blocks"):
            if key in args:
                message[key] = args[key]
        if args.get("metadata"):
            message["metadata"] = _checked_metadata(args["metadata"])
        message["edited"] = {"user": BOT_USER_ID, "ts": self._ts()}
        return {
            "channel": args["channel"],
            "ts": message["ts"],
            "text": message["text"],
            "message": _public(message, with_metadata=False),
        }

    def _chat_delete(self, args: JsonDict) -> JsonDict:
        channel, ts = _required(args, "channel"), _required(args, "ts")
        message = self._find(channel, ts)
        self.state.messages[channel].remove(message)
        return {"channel": channel, "ts": ts}

    def _chat_post_ephemeral(self, args: JsonDict) -> JsonDict:
        _check_message(args)
        channel, user = _required(args, "channel"), _required(args, "user")
        self._check_bot_in(channel, absent="channel_not_found")
        members = self.state.members.get(channel)
        if members is not None and user not in members:
            raise SlackFailure("user_not_in_channel")
        ephemeral = {**_truncated(args), "message_ts": self._ts()}
        self.state.ephemerals.append(ephemeral)
        return {"message_ts": ephemeral["message_ts"]}

    def _conversations_replies(self, args: JsonDict) -> JsonDict:
        channel, ts = _required(args, "channel"), _required(args, "ts")
        thread = self.thread(channel, ts)
        if not thread:
            raise SlackFailure("thread_not_found")
        with_metadata = _truthy(args.get("include_all_metadata"))
        start = _cursor_start(args.get("cursor"), thread)
        limit = min(int(args.get("limit") or 1000), 1000)
        page = thread[start : start + limit]
        more = start + limit < len(thread)
        return {
            "messages": [_public(m, with_metadata=with_metadata) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": _cursor(thread[start + limit]) if more else ""},
        }

    def _conversations_history(self, args: JsonDict) -> JsonDict:
        channel = _required(args, "channel")
        top = [
            m for m in self.state.messages.get(channel, []) if m.get("thread_ts") in (None, m["ts"])
        ]
        with_metadata = _truthy(args.get("include_all_metadata"))
        messages = [_public(m, with_metadata=with_metadata) for m in reversed(top)]
        return {"messages": messages, "has_more": False}

    def _reactions_add(self, args: JsonDict) -> JsonDict:
        reaction = {k: args.get(k) for k in ("channel", "timestamp", "name")}
        self._find(_required(args, "channel"), _required(args, "timestamp"))
        if reaction in self.state.reactions:
            raise SlackFailure("already_reacted")
        self.state.reactions.append(reaction)
        return {}

    def _views_open(self, args: JsonDict) -> JsonDict:
        self._check_trigger(args)
        view = self._new_view(args)
        return {"view": view}

    def _views_push(self, args: JsonDict) -> JsonDict:
        self._check_trigger(args)
        return {"view": self._new_view(args)}

    def _views_update(self, args: JsonDict) -> JsonDict:
        view_id = _required(args, "view_id")
        stored = self.state.views.get(view_id)
        if stored is None:
            raise SlackFailure("not_found")
        if args.get("hash") and args["hash"] != stored["hash"]:
            raise SlackFailure("hash_conflict")
        self.replace_view(view_id, _checked_view(args.get("view")))
        return {"view": stored}

    def replace_view(self, view_id: str, spec: JsonDict) -> JsonDict:
        """Replace open view ``view_id`` with ``spec`` as Slack does (``views.update``, or a
        ``view_submission`` answered ``response_action: update``): the whole definition
        is the new one (what it leaves out is at Slack's default, not the old value), the
        hash changes, and what was entered in an input kept with the same ``block_id`` and
        ``action_id`` is kept ("Preserving input entry", views.update's usage info)."""
        stored = self.state.views[view_id]
        kept = _kept_state(stored, spec)
        identity = {k: stored[k] for k in ("id", "team_id", "root_view_id", "previous_view_id")}
        stored.clear()
        stored.update(
            {**VIEW_DEFAULTS, **spec, **identity},
            state={"values": kept},
            hash=f"{time.time():.6f}.fake{next(self._ids)}",
        )
        return stored

    def _check_trigger(self, args: JsonDict) -> None:
        trigger = _required(args, "trigger_id")
        if trigger in self.state.expired_triggers:
            raise SlackFailure("expired_trigger_id")

    def _new_view(self, args: JsonDict) -> JsonDict:
        spec = _checked_view(args.get("view"))
        view_id = f"V0FAKE{next(self._ids):04d}"
        view = {
            **VIEW_DEFAULTS,
            **spec,
            "id": view_id,
            "team_id": TEAM_ID,
            "state": {"values": {}},
            "hash": f"{time.time():.6f}.fake{view_id}",
            "root_view_id": view_id,
            "previous_view_id": None,
        }
        self.state.views[view_id] = view
        return view

    def _set_status(self, args: JsonDict) -> JsonDict:
        for name in ("channel_id", "thread_ts"):
            _required(args, name)
        if "status" not in args:
            raise SlackFailure("invalid_arguments")
        self.state.statuses.append(dict(args))
        return {}

    def _get_upload_url(self, args: JsonDict) -> JsonDict:
        filename = _required(args, "filename")
        length = int(_required(args, "length"))
        file_id = f"F0FAKE{next(self._ids):04d}"
        self.state.pending_files[file_id] = {"id": file_id, "name": filename, "length": length}
        upload_url = f"http://127.0.0.1:{self._port}/upload/{file_id}"
        return {"upload_url": upload_url, "file_id": file_id}

    def _complete_upload(self, args: JsonDict) -> JsonDict:
        entries = args.get("files")
        if not isinstance(entries, list) or not entries:
            raise SlackFailure("invalid_arguments")
        done = [self._finish_file(entry) for entry in entries]
        if args.get("channel_id"):
            share = {"channel": args["channel_id"], "text": args.get("initial_comment", "")}
            if args.get("thread_ts"):
                share["thread_ts"] = args["thread_ts"]
            self._store_message(share, extra={"files": done, "upload": True})
        return {"files": [{"id": f["id"], "title": f["title"]} for f in done]}

    def _finish_file(self, entry: JsonDict) -> JsonDict:
        pending = self.state.pending_files.pop(str(entry.get("id")), None)
        if pending is None or "content" not in pending:
            raise SlackFailure("file_not_found")
        if len(pending["content"]) != pending["length"]:
            raise SlackFailure("file_upload_size_mismatch")
        done = {**pending, "title": entry.get("title") or pending["name"]}
        self.state.files[done["id"]] = done
        return {
            "id": done["id"],
            "name": done["name"],
            "title": done["title"],
            "size": done["length"],
        }

    def _users_info(self, args: JsonDict) -> JsonDict:
        user = self.state.users.get(_required(args, "user"))
        if user is None:
            raise SlackFailure("user_not_found")
        return {"user": user}

    def _usergroup_users(self, args: JsonDict) -> JsonDict:
        users = self.state.usergroups.get(_required(args, "usergroup"))
        if users is None:
            raise SlackFailure("no_such_subteam")
        return {"users": users}


# ----- request parsing -------------------------------------------------------------


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        return None
    return header.removeprefix("Bearer ").strip() or None


async def _read_args(request: web.Request) -> JsonDict:
    args: JsonDict = dict(request.query)
    if request.method == "POST" and request.can_read_body:
        if request.content_type == "application/json":
            args.update(await request.json())
        else:
            form = await request.post()
            args.update({k: v for k, v in form.items() if isinstance(v, str)})
    for name in _JSON_ARGS:
        if isinstance(args.get(name), str):
            with contextlib.suppress(ValueError):
                args[name] = json.loads(args[name])
    return args


async def _read_upload(request: web.Request) -> bytes:
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        part = await reader.next()
        return bytes(await part.read()) if part is not None else b""  # type: ignore[union-attr]
    return await request.read()


def _required(args: JsonDict, name: str) -> str:
    value = args.get(name)
    if value in (None, ""):
        raise SlackFailure("invalid_arguments", response_metadata={"messages": [f"missing {name}"]})
    return str(value)


def _truncated(args: JsonDict) -> JsonDict:
    """``args`` with ``text`` cut to Slack's 40,000 chars (what Slack keeps of a longer one)."""
    text = args.get("text")
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        return {**args, "text": text[:MAX_TEXT_CHARS]}
    return args


def _cursor(message: JsonDict) -> str:
    """An opaque cursor naming the next page's first message, like Slack's
    (base64 of ``next_ts:<ts>``)."""
    return base64.b64encode(f"next_ts:{message['ts']}".encode()).decode()


def _cursor_start(cursor: Any, messages: list[JsonDict]) -> int:
    """The index a cursor points at; 0 without one. Raises ``invalid_cursor``."""
    if cursor in (None, ""):
        return 0
    try:
        decoded = base64.b64decode(str(cursor), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise SlackFailure("invalid_cursor") from None
    ts = decoded.removeprefix("next_ts:")
    for i, message in enumerate(messages):
        if message["ts"] == ts and decoded.startswith("next_ts:"):
            return i
    raise SlackFailure("invalid_cursor")


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("1", "true")


def _public(message: JsonDict, *, with_metadata: bool = True) -> JsonDict:
    shown = {k: v for k, v in message.items() if k != "upload"}
    if not with_metadata:
        shown.pop("metadata", None)
    return shown


# ----- limits ----------------------------------------------------------------------


def _check_message(args: JsonDict) -> None:
    blocks = args.get("blocks") or []
    if not args.get("text") and not blocks:
        raise SlackFailure("no_text")
    problems = _block_problems(blocks, max_blocks=MAX_BLOCKS)
    if problems:
        raise SlackFailure("invalid_blocks", errors=problems)
    markdown_total = sum(len(b.get("text", "")) for b in blocks if b.get("type") == "markdown")
    if markdown_total > MAX_MARKDOWN_CHARS:
        raise SlackFailure("msg_blocks_too_long")


def _check_blocks(blocks: list[JsonDict]) -> None:
    """Raise ``invalid_blocks`` (with ``errors``) for blocks Slack would refuse."""
    problems = _block_problems(blocks, max_blocks=MAX_BLOCKS)
    if problems:
        raise SlackFailure("invalid_blocks", errors=problems)


def _block_problems(blocks: list[JsonDict], *, max_blocks: int) -> list[str]:
    problems = []
    if len(blocks) > max_blocks:
        problems.append(f"no more than {max_blocks} items allowed [json-pointer:/blocks]")
    for i, block in enumerate(blocks):
        problems.extend(_one_block_problems(i, block))
    return problems


def _one_block_problems(i: int, block: JsonDict) -> list[str]:
    kind = block.get("type")
    texts: list[tuple[str, Any]] = []
    if kind == "markdown":
        texts.append((f"/blocks/{i}/text", block.get("text", "")))
        limit = MAX_MARKDOWN_CHARS
    else:
        limit = MAX_SECTION_CHARS
        if isinstance(block.get("text"), dict):
            texts.append((f"/blocks/{i}/text/text", block["text"].get("text", "")))
        for j, element in enumerate(block.get("elements") or []):
            if kind == "context" and isinstance(element, dict) and "text" in element:
                texts.append((f"/blocks/{i}/elements/{j}/text", element["text"]))
        for j, item in enumerate(block.get("fields") or []):
            texts.append((f"/blocks/{i}/fields/{j}/text", item.get("text", "")))
    problems = [
        f"must be less than {limit + 1} characters [json-pointer:{pointer}]"
        for pointer, text in texts
        if len(str(text)) > limit
    ]
    if kind == "header" and len(str(block.get("text", {}).get("text", ""))) > 150:
        problems.append(f"must be less than 151 characters [json-pointer:/blocks/{i}/text/text]")
    element = block.get("element")
    if kind == "input" and isinstance(element, dict):
        problems.extend(_input_problems(i, element))
    if kind == "actions":
        problems.extend(_actions_problems(i, block.get("elements") or []))
    return problems


def _actions_problems(i: int, elements: list[Any]) -> list[str]:
    """An actions block: at most 25 elements; each button's text plain_text ≤ 75
    characters, ``action_id`` ≤ 255, ``value`` ≤ 2,000, ``style`` primary or danger (Block
    Kit reference, "Button element" and "Actions block")."""
    problems = []
    if len(elements) > 25:
        problems.append(f"must have at most 25 items [json-pointer:/blocks/{i}/elements]")
    for j, button in enumerate(elements):
        if not isinstance(button, dict) or button.get("type") != "button":
            continue
        at = f"/blocks/{i}/elements/{j}"
        raw = button.get("text")
        text: JsonDict = raw if isinstance(raw, dict) else {}
        if text.get("type") != "plain_text":
            problems.append(f"must be plain_text [json-pointer:{at}/text/type]")
        limits = (("text", str(text.get("text", "")), 75), ("action_id", "", 255))
        for name, value, most in (*limits, ("value", "", 2000)):
            value = value or str(button.get(name, ""))
            if len(value) > most:
                pointer = f"{at}/text/text" if name == "text" else f"{at}/{name}"
                problems.append(f"must be less than {most + 1} characters [json-pointer:{pointer}]")
        if button.get("style") not in (None, "primary", "danger"):
            problems.append(f"must be one of primary, danger [json-pointer:{at}/style]")
    return problems


def _input_problems(i: int, element: JsonDict) -> list[str]:
    if element.get("type") != "plain_text_input":
        return []
    problems = []
    max_length = int(element.get("max_length", MAX_INPUT_CHARS))
    if max_length > MAX_INPUT_CHARS:
        problems.append(f"must be at most 3000 [json-pointer:/blocks/{i}/element/max_length]")
    if len(str(element.get("initial_value", ""))) > max_length:
        problems.append(
            f"must be less than {max_length + 1} characters "
            f"[json-pointer:/blocks/{i}/element/initial_value]"
        )
    return problems


VIEW_DEFAULTS: JsonDict = {
    "private_metadata": "",
    "callback_id": "",
    "external_id": "",
    "clear_on_close": False,
    "notify_on_close": False,
    "close": None,
    "submit": None,
}
"""What Slack's view object holds for a field the app's view left out (views.open's and
views.update's response)."""


def _kept_state(view: JsonDict, spec: JsonDict) -> JsonDict:
    """The entered values of ``view`` that ``spec`` keeps: same ``block_id`` and
    ``action_id`` of an input."""
    actions = {
        str(b.get("block_id")): str((b.get("element") or {}).get("action_id"))
        for b in spec.get("blocks") or ()
        if isinstance(b, dict) and b.get("type") == "input"
    }
    values = (view.get("state") or {}).get("values") or {}
    return {
        block: {action: value for action, value in entered.items() if actions[block] == action}
        for block, entered in values.items()
        if block in actions and actions[block] in entered
    }


def _checked_view(view: Any) -> JsonDict:
    if not isinstance(view, dict) or view.get("type") != "modal":
        raise SlackFailure("invalid_arguments")
    problems = _block_problems(view.get("blocks") or [], max_blocks=MAX_VIEW_BLOCKS)
    if len(str(view.get("title", {}).get("text", ""))) > MAX_VIEW_TITLE_CHARS:
        problems.append("must be less than 25 characters [json-pointer:/view/title/text]")
    if len(str(view.get("private_metadata", ""))) > MAX_PRIVATE_METADATA_CHARS:
        problems.append("must be less than 3001 characters [json-pointer:/view/private_metadata]")
    if problems:
        raise SlackFailure(
            "invalid_arguments", response_metadata={"messages": [f"[ERROR] {p}" for p in problems]}
        )
    return dict(view)


def _checked_metadata(metadata: Any) -> JsonDict:
    if (
        not isinstance(metadata, dict)
        or not isinstance(metadata.get("event_type"), str)
        or not isinstance(metadata.get("event_payload"), dict)
    ):
        raise SlackFailure("invalid_metadata_format")
    return {"event_type": metadata["event_type"], "event_payload": metadata["event_payload"]}
