"""A ``ThreadPoster`` for the terminal: ``warroom chat`` prints progress and answers.

While a step runs: ``… thinking`` when a model call starts, ``→ Running `cmd```
when a tool call starts (its intent is committed), then ``… still running (N s)``
every ``TICK_S``. After each committed step: the
model's interim text (``│``), each tool call's outcome with how long it ran (``✓``,
or ``✗`` when it failed) and the head of its output (``│``), ``⛔`` for a call the
approval policy blocked, ``?`` when a crash lost an outcome, a subagent started (``→``)
and, once its answer is in, ended (``✓``), the todo list when it changes (``☐`` pending,
``▸`` in progress, ``☑`` done) and notices (``!``), but not one the step's answer
already says (``shown_events``: a rejected request or a refusal ends the turn with it).
The answer is printed once per key, as the Slack poster posts it once.

Everything printed passes through ``printable``: tool output and model text may hold
terminal control sequences (an OSC title or clipboard write, a cursor move), so C0
and C1 control characters other than newline and tab are removed.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Sequence
from typing import TextIO

from harness import (
    Checkpoint,
    Event,
    ModelResponded,
    Notice,
    PendingApproval,
    TodosChanged,
    ToolBlocked,
    ToolFinished,
    ToolIntent,
    ToolUnknown,
    shown_events,
)

__all__ = ["TerminalReporter", "printable"]

ANSWER_PREFIX = "warroom> "
HEAD_LINES = 5
HEAD_CHARS = 400
AGENT_WORKS_ON = "started; it works on, its answer follows when it is done"
"""An ``Agent`` call whose subagent still works: not done, so no ``✓`` yet."""
TICK_S = 10.0  # how often a long step's elapsed time is shown
_TODO_MARKS = {"pending": "☐", "in_progress": "▸", "completed": "☑"}
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without C0/C1 control characters, except ``\\n`` and ``\\t``.

    >>> printable("ok\\x1b]0;pwned\\x07 \\x9b2J\\tdone\\r\\n")
    'ok]0;pwned 2J\\tdone\\n'
    """
    return _CONTROLS.sub("", text)


class TerminalReporter:
    """Prints a session's progress and answers to ``out`` (safe from any thread)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out  # where it prints (the chat puts its prompt's proxy here)
        self._lock = threading.Lock()
        self._answered: set[str] = set()
        self._started: dict[str, float] = {}  # session id → monotonic start of its step
        self._agents: dict[tuple[str, str], float] = {}  # (session, call) → when first seen

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        """Print the answer once per ``key``; returns ``key`` (the terminal has no ts)."""
        with self._lock:
            if key not in self._answered:
                self._answered.add(key)
                self._write(f"\n{ANSWER_PREFIX}{markdown.strip()}\n\n")
        return key

    async def ask_approval(
        self,
        *,
        key: str,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        approval: PendingApproval,
        requester_id: str,
    ) -> str:
        """Print the approval request once per ``key`` and how to answer it; returns ``key``
        (the chat's ``approve`` / ``deny`` lines decide it: ``Conversation.say``)."""
        with self._lock:
            if key not in self._answered:
                self._answered.add(key)
                expires = approval.expires_at.strftime("%H:%M UTC")
                self._write(
                    f"\n  ✋ Approval needed to run:\n      {approval.action}\n"
                    f"    why: {approval.reason}\n"
                    f"    Type `approve` to run it or `deny` (unanswered, it is denied at "
                    f"{expires}).\n\n"
                )
        return key

    async def show_decision(
        self, *, session_id: str, channel_id: str, approval: PendingApproval, requester_id: str
    ) -> None:
        """Print how the approval was settled."""
        self._lines([f"✋ {approval.status.value}: {approval.action}"])

    def step_started(self, *, session_id: str, kind: str) -> None:
        """Note when the step began; say that the model is asked."""
        self._started[session_id] = time.monotonic()
        if kind == "model":
            self._lines(["… thinking"])

    def events_saved(self, *, session_id: str, events: Sequence[Event]) -> None:
        """Print each tool call as it starts, then its elapsed time every ``TICK_S``."""
        calls = [e for e in events if isinstance(e, ToolIntent)]
        self._lines([f"→ {_what(e.name, e.summary)}" for e in calls])
        if calls:
            self._tick(session_id, self._started.get(session_id))

    def _tick(self, session_id: str, started: float | None) -> None:
        """Say every ``TICK_S`` that the step begun at ``started`` still runs (on the
        worker's loop, until the step's progress arrives)."""
        if started is None or self._started.get(session_id) != started:
            return
        elapsed_s = time.monotonic() - started
        if elapsed_s >= TICK_S:
            self._lines([f"… still running ({elapsed_s:.0f} s)"])
        asyncio.get_running_loop().call_later(TICK_S, self._tick, session_id, started)

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        """Print interim text, outcomes, todo changes and notices of a committed step."""
        self._started.pop(session_id, None)
        working = {a.tool_use_id: a.description for a in checkpoint.agents if a.running}
        lines = [
            line
            for event in shown_events(events)
            for line in (
                [f"→ Agent: {working[event.tool_use_id]}: {AGENT_WORKS_ON}"]
                if isinstance(event, ToolFinished) and event.tool_use_id in working
                else _lines(event)
            )
        ]
        self._lines([*lines, *self._agents_ended(checkpoint)])

    def _agents_ended(self, checkpoint: Checkpoint) -> list[str]:
        """A line for each subagent whose answer reached the session since the last
        progress (``✓``, or ``✗`` when it failed), with how long it worked."""
        ended = []
        for agent in checkpoint.agents:
            key = (checkpoint.session_id, agent.tool_use_id)
            if agent.running:
                self._agents.setdefault(key, time.monotonic())
            elif (started := self._agents.pop(key, None)) is not None:
                mark = "✗" if agent.status == "failed" else "✓"
                took = time.monotonic() - started
                ended.append(f"{mark} Agent: {agent.description} ({took:.1f} s)")
        return ended

    def _lines(self, lines: list[str]) -> None:
        if lines:
            with self._lock:
                self._write("".join(f"  {line}\n" for line in lines))

    def _write(self, text: str) -> None:
        self.out.write(printable(text))
        self.out.flush()


def _what(name: str, summary: str) -> str:
    return f"Running `{summary}`" if name == "Bash" else summary


def _lines(event: Event) -> list[str]:
    if isinstance(event, ModelResponded):
        if not event.tool_calls:
            return []
        thought = " ".join(event.thinking.split())[:300]
        summary = [f"… {thought}"] if thought else []  # the thinking summary, as progress
        return [*summary, *_quoted(event.text.strip())]
    if isinstance(event, ToolFinished):
        mark = "✗" if event.is_error else "✓"
        took = f" ({event.elapsed_ms / 1000:.1f} s)" if event.elapsed_ms else ""
        return [f"{mark} {_what(event.name, event.summary)}{took}", *_quoted(event.output_head)]
    if isinstance(event, ToolBlocked):
        return [f"⛔ Blocked (not run): {event.detail}", f"│ {event.reason}"]
    if isinstance(event, ToolUnknown):
        return [f"? {event.summary}: the outcome was lost in a crash"]
    if isinstance(event, TodosChanged):
        return [f"{_TODO_MARKS.get(status, '·')} {content}" for status, content, _ in event.todos]
    if isinstance(event, Notice):
        return [f"! {event.text.strip()}"]
    return []


def _quoted(text: str) -> list[str]:
    """The head of ``text`` (≤ ``HEAD_LINES`` lines, ``HEAD_CHARS`` chars), each ``│ ``."""
    head = text.strip()[:HEAD_CHARS]
    lines = head.splitlines()
    shown = [f"│ {line}" for line in lines[:HEAD_LINES]]
    if len(lines) > HEAD_LINES or len(text.strip()) > len(head):
        shown.append("│ …")
    return shown
