"""The pieces of the scripted model's plans: a planned tool call and the calls it makes.

A plan is an ordered list of ``Step``s; ``first_due`` picks the first step that is
wanted and not yet done often enough, by the tool calls the transcript already holds
(a call whose outcome was lost does not count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.drill.transcript import Call, Transcript
from bot.fakes.anthropic_api import Reply, ToolCall


@dataclass(frozen=True)
class Step:
    """One planned tool call: made while ``wanted`` and done fewer than ``times`` times."""

    say: str
    call: Call
    wanted: bool = True
    times: int = 1


def bash(command: str) -> Call:
    """A Bash call (no description: the thread's status line shows the command)."""
    return Call("", "Bash", {"command": command})


def read(path: str) -> Call:
    """A Read call of a whole file."""
    return Call("", "Read", {"file_path": path})


def write(path: str, content: str) -> Call:
    """A Write call."""
    return Call("", "Write", {"file_path": path, "content": content})


def todos(*items: tuple[str, str, str]) -> Call:
    """A TodoWrite call from ``(content, status, activeForm)`` items."""
    listed = [{"content": c, "status": st, "activeForm": a} for c, st, a in items]
    return Call("", "TodoWrite", {"todos": listed})


def first_due(t: Transcript, plan: Sequence[Step]) -> Reply | None:
    """The reply making the first due step's call (its ``say`` text first), or None."""
    for step in plan:
        if step.wanted and t.ran(step.call) < step.times:
            call = ToolCall(step.call.name, step.call.input)
            return Reply((step.say, call)) if step.say else Reply((call,))
    return None


def output_of(t: Transcript, call: Call) -> str:
    """The latest settled output of ``call`` ("(not run)" when there is none)."""
    found = t.last(call)
    return found.output if found is not None else "(not run)"


def line_with(text: str, needle: str) -> str:
    """The first line of ``text`` containing ``needle``, without a trailing ``#`` comment."""
    found = next((line for line in text.splitlines() if needle in line), "")
    return found.split(" #", 1)[0].strip()
