"""Citations of timeline entries in an answer: which exist, and each as a link to its Slack
message (§15).

An answer or a postmortem cites entries as ``[T4]`` or ``[T4, T9]``. ``unknown`` lists the
ids cited that the timeline does not hold (a citation that points nowhere); ``linked``
turns each cited id into a Markdown link to the entry's Slack message (answers are posted
in Slack's ``markdown`` block, which renders standard Markdown links), and marks an id the
timeline lacks, so nobody follows a citation to nothing. Code spans and fences are left
as written.

>>> from harness.record.timeline import Timeline
>>> unknown("Pool exhausted [T1, T7].", Timeline("T", "C", None, (), 0))
('T1', 'T7')
"""

from __future__ import annotations

import re

from harness.record.timeline import Timeline

CITATION = re.compile(r"\[(T\d+(?:\s*,\s*T\d+)*)\]")
"""A citation group: ``[T4]``, ``[T4, T9]`` (its ids in group 1)."""
NOT_FOUND = "no such entry"
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def cited(text: str) -> tuple[str, ...]:
    """The ids ``text`` cites, in order, each once (code left out).

    >>> cited("a [T2] b [T2, T10] `[T3]`")
    ('T2', 'T10')
    """
    found: dict[str, None] = {}
    for prose in _CODE.split(text):
        for group in CITATION.findall(prose):
            found.update((c.strip(), None) for c in group.split(","))
    return tuple(found)


def unknown(text: str, timeline: Timeline) -> tuple[str, ...]:
    """The ids ``text`` cites that ``timeline`` does not hold, in order."""
    return tuple(c for c in cited(text) if timeline.get(c) is None)


def linked(text: str, timeline: Timeline) -> str:
    """``text`` with each cited id a Markdown link to its entry's Slack message (an entry
    without a permalink stays as it is) and each unknown id marked ``NOT_FOUND``.

    >>> from datetime import UTC, datetime
    >>> from harness.record.kinds import Actor, ActorKind, EntryKind
    >>> from harness.record.timeline import Entry
    >>> who = Actor(ActorKind.HUMAN, "U1", "<@U1>")
    >>> t1 = Entry(1, datetime.now(UTC), who, EntryKind.MESSAGE, "hi", "https://x/p1", "s", "")
    >>> linked("Reported [T1, T5].", Timeline("T", "C", None, (t1,), 1))
    'Reported [[T1](https://x/p1), T5 (no such entry)].'
    """
    parts = _CODE.split(text)
    codes = _CODE.findall(text)
    out = [CITATION.sub(lambda m: _group(m.group(1), timeline), parts[0])]
    for code, prose in zip(codes, parts[1:], strict=True):
        out += [code, CITATION.sub(lambda m: _group(m.group(1), timeline), prose)]
    return "".join(out)


def _group(ids: str, timeline: Timeline) -> str:
    shown = []
    for cite in (c.strip() for c in ids.split(",")):
        entry = timeline.get(cite)
        if entry is None:
            shown.append(f"{cite} ({NOT_FOUND})")
        elif entry.permalink:
            shown.append(f"[{cite}]({entry.permalink})")
        else:
            shown.append(cite)
    return f"[{', '.join(shown)}]"
