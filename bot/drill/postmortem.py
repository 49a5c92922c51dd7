"""The drill's postmortem: frank's ``@warroom postmortem`` session drafts it from the timeline.

Its request is ``harness.postmortem_request()``. The scripted model reads
``/incident/timeline.md`` (generated from the event log on each read), then writes
``/incident/postmortem.md`` in the standard sections, each claim citing the entries of the
timeline it just read (``[T<n>]``): alice's report, the commands that found the cause, the
findings she wrote, her answer. A claim whose entry the timeline lacks says
``NO_EVIDENCE`` instead of citing. The checklist line (``record_check.postmortem_cited``)
checks the draft with ``harness.citations`` against the timeline the drill gathers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.drill import scenario as s
from bot.drill.steps import Step, output_of, read, write
from bot.drill.transcript import Transcript
from harness import NO_EVIDENCE, POSTMORTEM_PATH, TIMELINE_PATH

TIMELINE = f"/incident{TIMELINE_PATH}"
_ENTRY = re.compile(r"^- \*\*(?P<cite>T\d+)\*\* (?P<at>\S+) · .*? · (?P<kind>\w+): (?P<text>.*)$")


@dataclass(frozen=True)
class Line:
    """One entry of the timeline as read: ``T<n>``, its time (UTC, ``HH:MM:SS``), kind, text."""

    cite: str
    at: str
    kind: str
    text: str


def entries(timeline_md: str) -> list[Line]:
    """The entries of a timeline in ``harness.timeline_markdown``'s format, in order.

    >>> entries("# Incident timeline\\n\\n- **T1** 14:02:07 · <@U1> · message: it broke [↗](x)")
    [Line(cite='T1', at='14:02:07', kind='message', text='it broke [↗](x)')]
    """
    found = (_ENTRY.match(line.strip()) for line in timeline_md.splitlines())
    return [Line(m["cite"], m["at"], m["kind"], m["text"]) for m in found if m]


def plan(t: Transcript) -> list[Step]:
    """Read the timeline, then write the draft citing it."""
    return [
        Step("Reading the incident's timeline.", read(TIMELINE)),
        Step(
            "Writing the draft, every claim citing the timeline.",
            write(POSTMORTEM_PATH, draft(t)),
            wanted=t.ran(read(TIMELINE)) > 0,
        ),
    ]


def draft(t: Transcript) -> str:
    """The postmortem in ``harness``'s standard sections, from the timeline ``t`` read."""
    e = evidence(t)
    moments = (
        ("the 500s were reported in the channel", e["report"]),
        ("the failing requests were counted in the service log", e["count"]),
        ("the last deploys were read: v2.14.0 lowered pool_size", e["deploys"]),
        ("the pool was sampled: every connection busy, requests waiting", e["pool"]),
        (f"the findings were written to {s.FINDINGS_PATH}", e["notes"]),
        ("the cause was posted in the incident thread", e["answer"]),
    )
    return "\n".join(
        [
            "# Postmortem: checkout-api 500s",
            "",
            "## Summary",
            claim("checkout-api returned HTTP 500s after a deploy", e["report"], e["count"]),
            claim("its database connection pool was exhausted", e["pool"], e["notes"]),
            "## Impact",
            claim("checkout requests failed with HTTP 500 from 14:02", e["count"]),
            f"Customers affected: {NO_EVIDENCE}",
            "## Timeline",
            *(claim(f"- {at.at + ' UTC: ' if at else ''}{what}", at) for what, at in moments),
            "## Root cause",
            claim("deploy v2.14.0 lowered pool_size from 20 to 5 in config/db.yaml", e["deploys"]),
            "## Resolution",
            claim("the cause and the fix (roll back, or raise pool_size) were posted", e["answer"]),
            f"Time of the rollback: {NO_EVIDENCE}",
            "## Action items",
            claim("- Alert on pool saturation (in_use == size): it catches this early", e["pool"]),
            claim("- Review DB settings in deploys: they can shrink the pool", e["deploys"]),
            "",
        ]
    )


def evidence(t: Transcript) -> dict[str, Line | None]:
    """The entries the draft cites, from the timeline ``t`` read (None: not listed)."""
    lines = entries(output_of(t, read(TIMELINE)))

    def first(kind: str, needle: str = "") -> Line | None:
        return next((e for e in lines if e.kind == kind and needle in e.text), None)

    return {
        "report": first("message"),
        "count": first("command", "grep -c"),
        "deploys": first("command", "deploy.log"),
        "pool": first("command", "pool-stats"),
        "notes": first("file", s.FINDINGS_PATH),
        "answer": first("answer"),
    }


def claim(text: str, *found: Line | None) -> str:
    """``text`` citing the entries ``found`` (``NO_EVIDENCE`` when there are none).

    >>> claim("It broke", Line("T1", "14:02:07", "message", "x"), None)
    'It broke [T1].'
    >>> claim("It broke", None)
    'It broke (not in the record).'
    """
    cites = [e.cite for e in found if e is not None]
    return f"{text} [{', '.join(cites)}]." if cites else f"{text} {NO_EVIDENCE}."


def answer(t: Transcript) -> str:
    """The session's answer: where the draft is and what it cites."""
    if not t.ran(write(POSTMORTEM_PATH, "")):
        return f"I could not write {POSTMORTEM_PATH}."
    found = {e.cite for e in evidence(t).values() if e is not None}
    cited = sorted(found, key=lambda c: int(c[1:]))
    return (
        f"*Postmortem drafted in `{POSTMORTEM_PATH}`* from the incident's timeline: summary, "
        f"impact, timeline, root cause, resolution and action items, every claim citing "
        f"its entries ({', '.join(cited) or 'none'}). Edit it there; its revisions are kept."
    )
