"""The postmortem draft (§15): what a postmortem session is asked, and checking its citations.

``@warroom postmortem`` (or ``/agent postmortem``) starts a session with what the person
typed (so the record shows it); the model is asked ``postmortem_request()`` in its place
(``request_for_model``): read ``/incident/timeline.md`` and the notes, write
``/incident/postmortem.md`` in a standard shape, every claim citing timeline entries as
``[T<n>]``. The draft is an ordinary file afterwards: people edit it like any other, and
its revisions are kept. ``citations`` checks a draft against the timeline it cites.

>>> is_postmortem_request("postmortem"), is_postmortem_request(" Post-mortem, please ")
(True, True)
>>> is_postmortem_request("/agent postmortem")
True
>>> is_postmortem_request("what caused the postmortem delay?")
False
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.record.timeline import Timeline

POSTMORTEM_PATH = "/incident/postmortem.md"
NO_EVIDENCE = "(not in the record)"
SECTIONS = ("Summary", "Impact", "Timeline", "Root cause", "Resolution", "Action items")
_REQUEST = re.compile(r"\s*(/agent\s+)?post[- ]?mortem[\s,.!]*(please)?[\s.!]*", re.IGNORECASE)
_CITE = re.compile(r"\[(T\d+(?:\s*,\s*T\d+)*)\]")


def is_postmortem_request(text: str) -> bool:
    """Whether a mention's cleaned ``text`` asks for the postmortem (the word alone)."""
    return _REQUEST.fullmatch(text) is not None


def request_for_model(text: str) -> str:
    """What a person's message ``text`` asks the model: ``postmortem_request()`` for the
    word alone (``is_postmortem_request``), else ``text`` itself."""
    return postmortem_request() if is_postmortem_request(text) else text


def postmortem_request() -> str:
    """The request a postmortem session starts with (its first user text)."""
    sections = "\n".join(f"## {name}" for name in SECTIONS)
    return (
        "Draft the postmortem of this incident.\n\n"
        "1. Read /incident/timeline.md: the incident's timeline, generated from the event log "
        "of every session of this channel (messages, commands with their exit codes, gateway "
        "requests, MCP calls, files written, answers, notices). Its entries are numbered T1, "
        "T2, …\n"
        "2. Read the notes under /incident/ (Glob /incident/** first).\n"
        f"3. Write {POSTMORTEM_PATH} with exactly these sections, in this order:\n\n"
        f"{sections}\n\n"
        "Every claim (each sentence or bullet under those headings) ends with the timeline "
        "entries that support it, in square brackets: `[T4]` or `[T4, T9]`. Cite only entries "
        "that exist in /incident/timeline.md. Where the record holds no evidence for "
        "something a postmortem needs (impact on customers, a detection time), write "
        f"`{NO_EVIDENCE}` on that line for people to fill in; do not guess. Under Timeline, "
        "list the key moments in UTC, each with its entry. Action items are concrete, each "
        "with what it prevents.\n"
        f"4. Answer with a short summary of the draft and where it is ({POSTMORTEM_PATH}); "
        "people will edit it there."
    )


@dataclass(frozen=True)
class Citations:
    """What a draft cites: the entries it names, those the timeline lacks (``missing``), the
    claim lines under the sections that cite nothing and do not say ``NO_EVIDENCE``
    (``uncited``), and the section headings in order."""

    cited: frozenset[str]
    missing: frozenset[str]
    uncited: tuple[str, ...]
    sections: tuple[str, ...]

    @property
    def sound(self) -> bool:
        """Every section present, every citation found, every claim cited."""
        return not self.missing and not self.uncited and self.sections == SECTIONS


def citations(draft: str, timeline: Timeline) -> Citations:
    """Check ``draft`` (Markdown) against ``timeline`` (see ``Citations``).

    A claim line is a non-empty line under one of the sections that is not a heading.
    """
    cited: set[str] = set()
    uncited: list[str] = []
    sections: list[str] = []
    for raw in draft.splitlines():
        line = raw.strip()
        if line.startswith("## "):
            sections.append(line[3:].strip())
            continue
        if not line or line.startswith("#") or not sections:
            continue
        found = [c.strip() for group in _CITE.findall(line) for c in group.split(",")]
        cited.update(found)
        if not found and NO_EVIDENCE not in line:
            uncited.append(line)
    missing = frozenset(c for c in cited if timeline.get(c) is None)
    return Citations(frozenset(cited), missing, tuple(uncited), tuple(sections))
