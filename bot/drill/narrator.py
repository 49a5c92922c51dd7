"""The drill's live log: who said what, what the agent did, what reached Slack.

``Narrator`` prints lines through ``say`` with the seconds since the drill began.
The driver tells it what people said and what it did itself; a follower task reads
each session's event log (tool calls and their results, notices) from the database
and the answers the fake Slack Web API received (``chat.postMessage``, or on Slack's
agent surface the ``chat.stopStream`` that ends the turn's stream with the answer, whose
metadata carries an ``:answer:`` key), as they happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable
from typing import Any

from bot.fakes.slack_api import FakeSlackApi
from memory_store import Event, SessionStore

FOLLOW_INTERVAL_S = 0.1
_WIDTH = 110
_NUMBERED = re.compile(r"^\s*\d+\t", re.M)  # Read's line numbers
ANSWER_METHODS = frozenset({"chat.postMessage", "chat.stopStream"})
"""The calls that post an answer: a message, or the end of the turn's streamed message."""


def post_key(args: dict[str, Any]) -> str:
    """The outbox key a post (``ANSWER_METHODS``) carried in its metadata ("" when none)."""
    metadata = args.get("metadata") or {}
    return str((metadata.get("event_payload") or {}).get("key") or "")


class Narrator:
    """Prints the live log (see the module docstring)."""

    def __init__(
        self, sessions: SessionStore, slack: FakeSlackApi, say: Callable[[str], None]
    ) -> None:
        self._sessions = sessions
        self._slack = slack
        self._say = say
        self._started = time.monotonic()
        self._labels: dict[str, str] = {}
        self._seen_seq: dict[str, int] = {}
        self._seen_calls = 0
        self._lock = asyncio.Lock()

    def line(self, text: str) -> None:
        """Print one line (or several) with the elapsed time."""
        stamp = f"[{time.monotonic() - self._started:5.1f}s] "
        pad = " " * len(stamp)
        lines = text.splitlines() or [""]
        self._say(stamp + lines[0])
        for more in lines[1:]:
            self._say(pad + more)

    def follow(self, session_id: str, label: str) -> None:
        """Narrate this session's events from now on, as ``label`` ("alice's thread")."""
        self._labels[session_id] = label
        self._seen_seq.setdefault(session_id, 0)

    async def run(self) -> None:
        """Follow until cancelled."""
        while True:
            await self.catch_up()
            await asyncio.sleep(FOLLOW_INTERVAL_S)

    async def catch_up(self) -> None:
        """Print what happened since the last call (database errors are skipped)."""
        async with self._lock:
            await self._catch_up()

    async def _catch_up(self) -> None:
        for session_id, label in list(self._labels.items()):
            with contextlib.suppress(Exception):
                events = await self._sessions.events(session_id, self._seen_seq[session_id])
                for event in events:
                    self._seen_seq[session_id] = event.seq
                    if text := describe(event):
                        self.line(f"  warroom ({label}) {text}")
        calls = self._slack.calls[self._seen_calls :]
        self._seen_calls += len(calls)
        for call in calls:
            key = post_key(call.args)
            if call.method in ANSWER_METHODS and ":answer:" in key and call.response.get("ok"):
                label = self._labels.get(key.split(":", 1)[0], "a thread")
                answer = _answer_text(call.args)
                self.line(f"warroom → {label} ({call.method}):\n{answer}")


def describe(event: Event) -> str:
    """One line for an event of a session's log, or "" for those not shown."""
    try:
        payload = json.loads(event.payload_json)
    except ValueError:
        return ""
    if event.kind == "model_response" and payload.get("tool_calls") and payload.get("text"):
        return f"says: {_cut(' '.join(str(payload['text']).split()))}"
    if event.kind == "tool_intent":
        return f"→ {payload.get('summary', '')}"
    if event.kind == "tool_result":
        mark = "✗" if payload.get("is_error") else "✓"
        head = _NUMBERED.sub("", str(payload.get("output_head", "")))
        return f"  {mark} {_cut(' '.join(head.split()))}"
    if event.kind == "tool_unknown":
        return f"  ? {payload.get('summary', '')}: the outcome was lost"
    if event.kind == "notice":
        text = str(payload.get("text") or payload.get("notice") or "")
        text = " ".join(text.replace("<system-reminder>", "").split())
        return f"! {_cut(text.replace('</system-reminder>', ''))}"
    return ""


def _answer_text(args: dict[str, Any]) -> str:
    blocks = args.get("blocks") or []
    texts = [str(b.get("text", "")) for b in blocks if isinstance(b, dict)]
    return "\n".join(
        f"    {line}" for line in "\n".join(texts or [args.get("text", "")]).split("\n")
    )


def _cut(text: str) -> str:
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"
