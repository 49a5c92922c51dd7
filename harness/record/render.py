"""The timeline as Markdown (for Slack, ``/incident/timeline.md`` and exports) and JSON.

Markdown is one line per entry under a heading per UTC day::

    - **T3** 14:05:07 · agent (<@U1>'s thread) · command: `grep -c ' 500 ' app.log` → exit 0 [↗](…)

Lists, not tables, so Slack's ``markdown`` block and any Markdown viewer show it alike.
"""

from __future__ import annotations

import json
from datetime import datetime

from harness.record.timeline import Timeline

HEADER = "# Incident timeline"
CITING = "Cite an entry by its number in square brackets, e.g. [T3]."


def timeline_markdown(timeline: Timeline, *, generated_at: datetime | None = None) -> str:
    """The timeline as Markdown (see the module docstring)."""
    where = f"<#{timeline.channel_id}>"
    if timeline.thread_ts:
        where += f", thread {timeline.thread_ts}"
    lines = [f"{HEADER}: {where} (UTC)", ""]
    made = f" at {generated_at:%Y-%m-%d %H:%M:%S} UTC" if generated_at else ""
    lines.append(
        f"Generated from the event log{made}: {len(timeline.entries)} entries from "
        f"{timeline.sessions} session(s). {CITING}"
    )
    day = ""
    for entry in timeline.entries:
        stamp = entry.at.isoformat()  # UTC: "2026-12-01T14:05:07.123456+00:00"
        if stamp[:10] != day:
            day = stamp[:10]
            lines += ["", f"## {day}", ""]
        link = f" [↗]({entry.permalink})" if entry.permalink else ""
        lines.append(
            f"- **T{entry.n}** {stamp[11:19]} · {entry.actor.label} · "
            f"{entry.kind.value}: {entry.summary}{link}"
        )
    if not timeline.entries:
        lines += ["", "(Nothing recorded yet.)"]
    return "\n".join(lines) + "\n"


def timeline_json(timeline: Timeline) -> str:
    """The timeline as JSON: ``{org_id, channel_id, thread_ts, sessions, entries: […]}``."""
    return json.dumps(
        {
            "org_id": timeline.org_id,
            "channel_id": timeline.channel_id,
            "thread_ts": timeline.thread_ts,
            "sessions": timeline.sessions,
            "entries": [e.to_dict() for e in timeline.entries],
        },
        indent=2,
        ensure_ascii=False,
    )
