"""The drill's checks of the incident record (§15): the timeline of the drill's channel, and
the postmortem drafted from it.

The timeline lists every person's message (as the fake Slack API stored it) with that
message's permalink, every command the sessions ran, the files they wrote under
``/incident/`` and ``/memory/``, and each answer linked to the message Slack got, all
numbered in time order. The postmortem draft has the standard sections, and every claim in
it cites entries that timeline holds (``harness.citations``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness import POSTMORTEM_PATH, EntryKind, IncidentRecord, Timeline, citations, permalink
from memory_store import Database, Event, FileVersion, IncidentLog

NAME = "the incident timeline lists messages, commands and writes, linked"
POSTMORTEM = "the postmortem draft cites timeline entries that exist"
WRITES = ("/incident/findings.md", "/memory/checkout-api.md")


@dataclass(frozen=True)
class RecordEvidence:
    """The channel's timeline; the people's messages Slack holds (``user``, ``ts``,
    ``thread_ts``); the ``ts`` of every answer posted; the workspace URL links start with."""

    timeline: Timeline
    humans: tuple[tuple[str, str, str | None], ...]
    answer_ts: frozenset[str]
    workspace_url: str


async def gather_record(
    db: Database,
    org_id: str,
    channel_id: str,
    *,
    workspace_url: str,
    messages: Sequence[Mapping[str, Any]],
    bot_user_id: str,
    answer_ts: frozenset[str],
) -> RecordEvidence:
    """Build the channel's timeline as ``/agent timeline`` does, and keep what Slack holds."""
    record = IncidentRecord(IncidentLog(db), workspace_url)
    timeline = await record.timeline(org_id, channel_id)
    humans = tuple(
        (str(m["user"]), str(m["ts"]), m.get("thread_ts"))
        for m in messages
        if m.get("user") not in (None, bot_user_id) and not m.get("bot_id")
    )
    return RecordEvidence(timeline, humans, answer_ts, workspace_url)


def timeline_listed(
    found: RecordEvidence | None, events: Mapping[str, Sequence[Event]]
) -> tuple[bool, str]:
    """Whether the timeline holds (see the module docstring), and what it found or missed."""
    if found is None:
        return False, "no timeline was built"
    t, channel = found.timeline, found.timeline.channel_id
    problems = []
    if [e.n for e in t.entries] != list(range(1, len(t.entries) + 1)) or any(
        a.at > b.at for a, b in zip(t.entries, t.entries[1:], strict=False)
    ):
        problems.append("entries not numbered in time order")
    messages = {(e.actor.id, e.permalink) for e in t.entries if e.kind is EntryKind.MESSAGE}
    for user, ts, thread_ts in found.humans:
        if (user, permalink(found.workspace_url, channel, ts, thread_ts or ts)) not in messages:
            problems.append(f"{user}'s message {ts} missing or mislinked")
    commands = sum(1 for e in t.entries if e.kind is EntryKind.COMMAND)
    ran = sum(1 for log in events.values() for ev in log if _is_bash(ev))
    if commands != ran:
        problems.append(f"{commands} commands listed, {ran} ran")
    written = {e.summary.split(" ", 1)[-1] for e in t.entries if e.kind is EntryKind.FILE}
    problems += [f"no write of {path}" for path in WRITES if path not in written]
    answers = [e for e in t.entries if e.kind is EntryKind.ANSWER]
    linked = [e for e in answers if e.permalink and _ts_of(e.permalink) in found.answer_ts]
    if not answers or len(linked) != len(answers):
        problems.append(f"{len(linked)} of {len(answers)} answers linked to their post")
    detail = (
        f"{len(t.entries)} entries: {len(found.humans)} messages, {commands} commands, "
        f"{len(written)} files written, {len(answers)} answers; each linked"
    )
    return not problems, "; ".join(problems) or detail


def postmortem_cited(
    found: RecordEvidence | None, draft: FileVersion | None, session_id: str
) -> tuple[bool, str]:
    """Whether ``draft``, written by session ``session_id``, is sound against the channel's
    timeline (see the module docstring), and what it cites or what is wrong."""
    if found is None:
        return False, "no timeline was built"
    if draft is None:
        return False, f"{POSTMORTEM_PATH} was not written"
    checked = citations(draft.content, found.timeline)
    problems = [f"cites {c}, which the timeline lacks" for c in sorted(checked.missing)]
    problems += [f"claim cites nothing: {line!r}" for line in checked.uncited]
    if not checked.sound and not problems:
        problems.append(f"sections {', '.join(checked.sections) or 'none'}")
    if draft.session_id != session_id:
        problems.append("not written by frank's postmortem session")
    if not checked.cited:
        problems.append("cites nothing")
    entries = (found.timeline.get(c) for c in checked.cited)
    kinds = sorted({e.kind.value for e in entries if e is not None})
    detail = (
        f"{POSTMORTEM_PATH} v{draft.version}: {len(checked.sections)} sections; "
        f"{len(checked.cited)} entries cited ({', '.join(kinds)}), each among the "
        f"timeline's {len(found.timeline.entries)}"
    )
    return not problems, "; ".join(problems) or detail


def _is_bash(event: Event) -> bool:
    return event.kind in ("tool_result", "tool_unknown") and '"name":"Bash"' in event.payload_json


def _ts_of(link: str) -> str:
    """The message ``ts`` a permalink names (``…/p1358546517000023?…`` → ``1358546517.000023``)."""
    digits = link.rsplit("/p", 1)[-1].split("?", 1)[0]
    return f"{digits[:-6]}.{digits[-6:]}"
