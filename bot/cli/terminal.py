"""A ``ThreadPoster`` for the terminal: ``warroom chat`` prints progress and answers.

Progress lines come from each committed step's events: a tool call that ran
(``→ Running `kubectl get pods```; ``✗`` and the start of its output when it
failed, ``?`` when a crash lost its outcome), the todo list when it changes (``☐``
pending, ``▸`` in progress, ``☑`` done) and notices (``!``). The answer is printed
once per key, as the Slack poster posts it once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TextIO

from harness import (
    Checkpoint,
    Event,
    ModelResponded,
    Notice,
    TodosChanged,
    ToolFinished,
    ToolUnknown,
)

__all__ = ["TerminalReporter"]

ANSWER_PREFIX = "warroom> "
_TODO_MARKS = {"pending": "☐", "in_progress": "▸", "completed": "☑"}


class TerminalReporter:
    """Prints a session's progress and answers to ``out`` (safe from any thread)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._answered: set[str] = set()

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        """Print the answer once per ``key``; returns ``key`` (the terminal has no ts)."""
        with self._lock:
            if key not in self._answered:
                self._answered.add(key)
                self._write(f"\n{ANSWER_PREFIX}{markdown.strip()}\n\n")
        return key

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        """Print a line per tool call, todo list change and notice of a committed step."""
        lines = [line for event in events for line in _lines(event)]
        if lines:
            with self._lock:
                self._write("".join(f"  {line}\n" for line in lines))

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()


def _lines(event: Event) -> list[str]:
    if isinstance(event, ModelResponded) and event.tool_calls and event.thinking.strip():
        return [f"… {' '.join(event.thinking.split())[:300]}"]  # thinking summary as progress
    if isinstance(event, ToolFinished):
        what = f"Running `{event.summary}`" if event.name == "Bash" else event.summary
        if event.is_error:
            return [f"✗ {what}: {event.output_head.strip()[:200]}"]
        return [f"→ {what}"]
    if isinstance(event, ToolUnknown):
        return [f"? {event.summary}: the outcome was lost in a crash"]
    if isinstance(event, TodosChanged):
        return [f"{_TODO_MARKS.get(status, '·')} {content}" for status, content, _ in event.todos]
    if isinstance(event, Notice):
        return [f"! {event.text.strip()}"]
    return []
