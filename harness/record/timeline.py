"""The incident timeline (§15): the record's rows as numbered entries, each linked to Slack.

Built from the agent's own evidence, not from chat: every person's message, each command
with how it ended, each gateway request and MCP call, each file written under
``/incident/`` or ``/memory/``, each approval, each stop, each answer and each notice
worth knowing (a sandbox replaced, a limit reached, a refusal). Reads, searches and
todo updates are left out. What each row becomes is ``evidence``'s.

Each entry links to its Slack message: a person's message and an answer to themselves;
what an agent did to the status message of the turn it happened in (the last one posted
before it), else to the thread. Entries are numbered ``T1, T2, …`` in time order, so a
postmortem can cite them; an incident's later entries only add numbers at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from harness.record.evidence import Draft, Reader
from harness.record.kinds import Actor, EntryKind
from memory_store import IncidentRow, IncidentRows


@dataclass(frozen=True)
class Entry:
    """One line of the timeline. ``n`` is its number (cited as ``T<n>``); ``at`` is UTC;
    ``permalink`` is None when no workspace URL is known; ``ref`` names the evidence
    (a ``tool_use`` id, a message ``ts``, an audit row)."""

    n: int
    at: datetime
    actor: Actor
    kind: EntryKind
    summary: str
    permalink: str | None
    session_id: str
    ref: str

    @property
    def cite(self) -> str:
        """How a document cites it: ``T<n>``."""
        return f"T{self.n}"

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-able values (``at`` in ISO 8601, UTC)."""
        return {
            "id": self.cite,
            "at": self.at.isoformat(),
            "actor": {"kind": self.actor.kind.value, "id": self.actor.id},
            "kind": self.kind.value,
            "summary": self.summary,
            "permalink": self.permalink,
            "session_id": self.session_id,
            "ref": self.ref,
        }


@dataclass(frozen=True)
class Timeline:
    """An incident's entries in time order, and which channel (and thread) it covers."""

    org_id: str
    channel_id: str
    thread_ts: str | None
    entries: tuple[Entry, ...]
    sessions: int

    def get(self, cite: str) -> Entry | None:
        """The entry cited as ``cite`` (``T7``), or None."""
        if not cite.startswith("T") or not cite[1:].isdigit():
            return None
        n = int(cite[1:])
        return self.entries[n - 1] if 0 < n <= len(self.entries) else None


def build_timeline(
    org_id: str,
    channel_id: str,
    found: IncidentRows,
    *,
    workspace_url: str | None,
    thread_ts: str | None = None,
) -> Timeline:
    """The timeline of the incident whose rows are ``found`` (see the module docstring)."""
    readers = {s.id: Reader(s, workspace_url, channel_id) for s in found.sessions}
    drafts: list[Draft] = []
    for row in found.rows:
        reader = readers.get(row.session_id)
        if reader is not None and (row.source != "event" or _worth_parsing(row)):
            drafts.extend(reader.read(row))
    entries = tuple(
        Entry(n, d.at, d.actor, d.kind, d.summary, d.link, d.session_id, d.ref)
        for n, d in enumerate(drafts, start=1)
    )
    return Timeline(org_id, channel_id, thread_ts, entries, len(found.sessions))


_NAME_KEYS = ('"name":"', '"name": "')  # compact JSON (``Event.to_json``), or PostgreSQL's
_SHOWN_TOOLS = ('Bash"', "mcp__", 'Write"', 'Edit"')


def _worth_parsing(row: IncidentRow) -> bool:
    """Whether a logged event can make an entry, judged without parsing its JSON (tool
    calls of other tools, most of a busy log, are dropped here). Events are compact JSON
    with sorted keys (``Event.to_json``); anything else is parsed."""
    if row.kind not in ("tool_intent", "tool_result", "tool_unknown"):
        return True
    for key in _NAME_KEYS:
        at = row.text.find(key)
        if at >= 0:
            return row.text.startswith(_SHOWN_TOOLS, at + len(key))
    return True
