"""A Messages API request, read the way the drill's scripted model reads it.

The request's ``messages`` (Anthropic wire format) become a ``Transcript``: the text
of the first user message (the session's frozen context and the request), the text
blocks of later user messages (reminders, teammates' messages), and every tool call
paired with its result; and its ``system`` text. Formats read here are the harness's
own: the first message's indexes (``prompt.frozen_context``), ``<system-reminder>``
notices, "Message from <user> in the incident thread:" (``prompt.steering_text``) and
the systems the sandbox can reach (``services.services_section``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.fakes.anthropic_api import RecordedRequest

LOST_OUTCOME = "the outcome could not be recovered"
SANDBOX_REPLACED = "The sandbox was replaced"
NEW_SHARED_FILES = "New shared files were added by others"
RELATED_INDEX = "Related past incidents"
_STEER = re.compile(r"Message from (?P<user>.+?) in the incident thread:\n(?P<text>.*)", re.S)
_NUMBERED = re.compile(r"^\s*\d+\t", re.M)


@dataclass(frozen=True)
class Call:
    """One tool call and its result (``result`` None: not answered yet)."""

    id: str
    name: str
    input: Mapping[str, Any]
    result: str | None = None
    is_error: bool = False

    @property
    def signature(self) -> str:
        """What makes two calls "the same call": the tool and its identifying input."""
        keys = {"Bash": ("command",), "Read": ("file_path",), "Write": ("file_path",)}
        chosen = keys.get(self.name, ("file_path", "old_string", "todos", "pattern"))
        shown = {k: self.input[k] for k in chosen if k in self.input}
        return f"{self.name} {json.dumps(shown, sort_keys=True)}"

    @property
    def settled(self) -> bool:
        """Answered with an outcome (a lost outcome after a crash does not count)."""
        return self.result is not None and LOST_OUTCOME not in self.result

    @property
    def output(self) -> str:
        """The result without ``Read``'s line numbers, stripped."""
        text = self.result or ""
        return (_NUMBERED.sub("", text) if self.name == "Read" else text).strip()


@dataclass(frozen=True)
class Steering:
    """A teammate's message given to the model mid-session."""

    user: str
    text: str


@dataclass(frozen=True)
class Transcript:
    """What one request shows the model (see the module docstring)."""

    opening: str
    later: tuple[str, ...]
    calls: tuple[Call, ...]
    tools: tuple[str, ...] = ()
    system: str = ""

    @classmethod
    def of(cls, request: RecordedRequest) -> Transcript:
        """Parse a recorded request (blocks of unknown types are ignored); ``tools`` are
        the tools whose definitions the model sees, ``system`` the system prompt's text."""
        system = request.body.get("system") or ""
        if not isinstance(system, str):
            system = "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
        parsed = cls.from_messages(request.messages)
        return replace(parsed, tools=tuple(request.visible_tools), system=system)

    @classmethod
    def from_messages(cls, messages: Sequence[Mapping[str, Any]]) -> Transcript:
        """Parse wire-format ``messages`` (no system text)."""
        users = [m for m in messages if m.get("role") == "user"]
        opening = "\n".join(_texts(users[0])) if users else ""
        later = tuple(text for m in users[1:] for text in _texts(m))
        results = {
            b.get("tool_use_id"): b for m in users for b in _blocks(m) if b["type"] == "tool_result"
        }
        calls = []
        for message in messages:
            if message.get("role") != "assistant":
                continue
            for block in _blocks(message):
                if block["type"] == "tool_use":
                    answer = results.get(block.get("id"))
                    calls.append(_call(block, answer))
        return cls(opening, later, tuple(calls))

    @property
    def request(self) -> str:
        """The request of the first message: its text after the context block (the
        notes index may quote other sessions' requests, e.g. a drafted summary's title).

        >>> Transcript("<system-reminder>\\nctx\\n</system-reminder>\\nhelp", (), ()).request
        'help'
        """
        return self.opening.rsplit("</system-reminder>", 1)[-1].strip()

    def ran(self, call: Call) -> int:
        """How many settled calls had ``call``'s signature."""
        return sum(c.settled and c.signature == call.signature for c in self.calls)

    def last(self, call: Call) -> Call | None:
        """The latest settled call with ``call``'s signature."""
        found = [c for c in self.calls if c.settled and c.signature == call.signature]
        return found[-1] if found else None

    def steering(self) -> tuple[Steering, ...]:
        """Teammates' messages that reached the model after its first message."""
        found = (_STEER.search(text) for text in self.later)
        return tuple(Steering(m["user"], m["text"].strip()) for m in found if m)

    def told(self, phrase: str) -> bool:
        """Whether a later user message contains ``phrase``."""
        return any(phrase in text for text in self.later)

    def listed(self, section: str, path: str) -> bool:
        """Whether the first message's index ``section`` (e.g. ``Org memory``) lists ``path``."""
        return f"- {path}" in index_section(self.opening, section)

    def related(self, path: str) -> bool:
        """Whether the first message lists the past incident at ``path`` (``/incidents/…/``)
        among the related ones it was given.

        >>> Transcript("Related past incidents …:\\n- 2026-10-12 in <#C>, t (/incidents/x/)", (),
        ...            ()).related("/incidents/x/")
        True
        """
        return f"({path})" in index_section(self.opening, RELATED_INDEX)

    def service_url(self, name: str) -> str | None:
        """The base URL the system prompt gives for reachable system ``name``, or None.

        >>> listed = "- prom: https://prom.internal (GET): metrics"
        >>> Transcript("", (), (), system=listed).service_url("prom")
        'https://prom.internal'
        """
        found = re.search(rf"^- {re.escape(name)}: (\S+) \(", self.system, re.M)
        return found[1] if found else None

    def announced(self, path: str) -> bool:
        """Whether a later reminder announced ``path`` as a new shared file."""
        return any(NEW_SHARED_FILES in t and f"- {path}:" in t for t in self.later)


def index_section(opening: str, section: str) -> str:
    """The lines of one index of the first message (up to the blank line ending it)."""
    start = opening.find(section)
    if start < 0:
        return ""
    end = opening.find("\n\n", start)
    return opening[start : end if end >= 0 else len(opening)]


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or () if isinstance(b, dict) and "type" in b]


def _texts(message: Mapping[str, Any]) -> list[str]:
    return [str(b.get("text", "")) for b in _blocks(message) if b["type"] == "text"]


def _call(block: Mapping[str, Any], answer: Mapping[str, Any] | None) -> Call:
    result = None
    if answer is not None:
        content = answer.get("content")
        if isinstance(content, list):
            content = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        result = str(content or "")
    return Call(
        id=str(block.get("id", "")),
        name=str(block.get("name", "")),
        input=dict(block.get("input") or {}),
        result=result,
        is_error=bool(answer and answer.get("is_error")),
    )
