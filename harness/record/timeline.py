"""The incident timeline (§15): the record's rows as numbered entries, each linked to Slack.

Built from the agent's own evidence, not from chat: every person's message, each command
with its exit code, each gateway request and MCP call, each file written under
``/incident/`` or ``/memory/``, each answer and each notice worth knowing (a sandbox
replaced, a limit reached, a refusal). Reads, searches and todo updates are left out.

Each entry links to its Slack message: a person's message and an answer to themselves;
what an agent did to the status message of the turn it happened in (the last one posted
before it), else to the thread. Entries are numbered ``T1, T2, …`` in time order, so a
postmortem can cite them; an incident's later entries only add numbers at the end.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from harness.record.links import permalink
from memory_store import IncidentRow, IncidentRows, IncidentSession

MAX_SUMMARY_CHARS = 200
NOTICE_TOPICS = frozenset(
    {
        "sandbox_replaced",
        "limit",
        "refusal",
        "model_context_window_exceeded",
        "model_rejected",
        "mcp",
        "compaction",
    }
)
WRITTEN_ROOTS = ("/incident/", "/memory/")
_EXIT = re.compile(r"^Exit code (\S+)")


class EntryKind(StrEnum):
    """What a timeline entry records."""

    MESSAGE = "message"  # a person wrote in a thread
    ANSWER = "answer"  # an agent's answer, as posted
    COMMAND = "command"  # a Bash command and its exit code
    EGRESS = "egress"  # a request through the egress gateway
    MCP = "mcp"  # an MCP tool call
    FILE = "file"  # a file written under /incident/ or /memory/
    NOTICE = "notice"  # something the session was told (sandbox replaced, a limit, …)
    APPROVAL = "approval"  # an approval asked for, or decided (who, when, what; §13)


class ActorKind(StrEnum):
    """Who acted: a person, an agent session, or a subagent of one."""

    HUMAN = "human"
    AGENT = "agent"
    SUBAGENT = "subagent"


@dataclass(frozen=True)
class Actor:
    """``kind`` and ``id`` (a Slack user id, or a session id); ``label`` is what is shown."""

    kind: ActorKind
    id: str
    label: str


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


@dataclass
class _Draft:
    at: datetime
    actor: Actor
    kind: EntryKind
    summary: str
    link: str | None
    session_id: str
    ref: str


@dataclass
class _Thread:
    """What building one session's entries remembers."""

    session: IncidentSession
    agent: Actor
    status_ts: str | None = None
    unposted: list[_Draft] = field(default_factory=list)


def build_timeline(
    org_id: str,
    channel_id: str,
    found: IncidentRows,
    *,
    workspace_url: str | None,
    thread_ts: str | None = None,
) -> Timeline:
    """The timeline of the incident whose rows are ``found`` (see the module docstring)."""
    linkers = {
        s.id: _Linker(workspace_url, channel_id, _Thread(s, _agent(s))) for s in found.sessions
    }
    drafts: list[_Draft] = []
    for row in found.rows:
        link = linkers.get(row.session_id)
        if link is None or (row.source == "event" and not _worth_parsing(row)):
            continue
        draft = _draft(row, link.thread, link)
        if draft is not None:
            drafts.append(draft)
    entries = tuple(
        Entry(n, d.at, d.actor, d.kind, d.summary, d.link, d.session_id, d.ref)
        for n, d in enumerate(drafts, start=1)
    )
    return Timeline(org_id, channel_id, thread_ts, entries, len(found.sessions))


@dataclass(frozen=True)
class _Linker:
    workspace_url: str | None
    channel_id: str
    thread: _Thread

    def to(self, ts: str | None) -> str | None:
        """The permalink of message ``ts`` of this thread (None: the thread's root)."""
        if self.workspace_url is None:
            return None
        root = self.thread.session.thread_ts
        return permalink(self.workspace_url, self.channel_id, ts or root, root)


def _draft(row: IncidentRow, thread: _Thread, link: _Linker) -> _Draft | None:
    if row.source == "status":
        thread.status_ts = row.ref
        return None
    if row.source == "input":
        human = Actor(ActorKind.HUMAN, row.extra or "", f"<@{row.extra}>")
        text = _line(row.text)
        return _Draft(
            row.at, human, EntryKind.MESSAGE, text, link.to(row.ref), row.session_id, row.ref or ""
        )
    if row.source == "egress":
        summary = _line(f"{row.text} → {row.extra} ({row.kind})")
        return _agent_draft(row, thread, link, EntryKind.EGRESS, summary, f"egress:{row.seq}")
    return _event_draft(row, thread, link)


def _event_draft(row: IncidentRow, thread: _Thread, link: _Linker) -> _Draft | None:
    payload = _payload(row.text)
    if row.kind == "post_done":
        ts = str(payload.get("ts", ""))
        if ":answer:" in str(payload.get("key", "")) and thread.unposted and ts:
            thread.unposted.pop(0).link = link.to(ts)
        return None
    if row.kind == "answer":
        draft = _agent_draft(
            row,
            thread,
            link,
            EntryKind.ANSWER,
            _line(str(payload.get("text", ""))),
            f"answer:{row.seq}",
        )
        draft.link = link.to(None)
        thread.unposted.append(draft)
        return draft
    if row.kind == "post_failed":
        text = f"Slack refused the answer for good ({payload.get('error', 'error')})"
        return _agent_draft(row, thread, link, EntryKind.NOTICE, text, f"event:{row.seq}")
    if row.kind in ("approval_requested", "approval_decided", "tool_blocked"):
        return _approval_draft(row, payload, thread, link)
    if row.kind == "notice":
        if str(payload.get("topic", "")) not in NOTICE_TOPICS:
            return None
        text = _line(str(payload.get("text", "")))
        return _agent_draft(row, thread, link, EntryKind.NOTICE, text, f"event:{row.seq}")
    return _tool_draft(row, payload, thread, link)


def _tool_draft(
    row: IncidentRow, payload: dict[str, Any], thread: _Thread, link: _Linker
) -> _Draft | None:
    name = str(payload.get("name", ""))
    detail = str(payload.get("detail") or payload.get("summary") or "")
    tool_use_id = str(payload.get("tool_use_id", ""))
    unknown = row.kind == "tool_unknown"
    is_error = bool(payload.get("is_error"))
    if name == "Bash":
        exit_code = "unknown (its worker died)" if unknown else _exit_code(payload)
        summary = _line(f"`{detail}` → exit {exit_code}")
        return _agent_draft(row, thread, link, EntryKind.COMMAND, summary, tool_use_id)
    if name.startswith("mcp__"):
        outcome = "unknown (its worker died)" if unknown else ("error" if is_error else "ok")
        summary = _line(f"{name} {detail} → {outcome}")
        return _agent_draft(row, thread, link, EntryKind.MCP, summary, tool_use_id)
    if (
        name in ("Write", "Edit")
        and not is_error
        and not unknown
        and detail.startswith(WRITTEN_ROOTS)
    ):
        verb = "wrote" if name == "Write" else "edited"
        return _agent_draft(row, thread, link, EntryKind.FILE, f"{verb} {detail}", tool_use_id)
    return None


def _approval_draft(
    row: IncidentRow, payload: dict[str, Any], thread: _Thread, link: _Linker
) -> _Draft:
    """An approval asked for (the agent), decided (the person who decided; an expiry is the
    agent's), or a call the policy blocked."""
    action = str(payload.get("action") or payload.get("detail") or payload.get("name") or "")
    ref = f"approval:{payload.get('tool_use_id', '')}"
    if row.kind == "tool_blocked":
        summary = _line(f"blocked `{action}`: {payload.get('reason', '')}")
        return _agent_draft(row, thread, link, EntryKind.APPROVAL, summary, ref)
    if row.kind == "approval_requested":
        summary = _line(f"asked approval to run `{action}`: {payload.get('reason', '')}")
        return _agent_draft(row, thread, link, EntryKind.APPROVAL, summary, ref)
    status = str(payload.get("status", ""))
    decided_by = str(payload.get("decided_by", ""))
    if not decided_by:
        summary = _line(f"approval of `{action}` expired unanswered")
        return _agent_draft(row, thread, link, EntryKind.APPROVAL, summary, ref)
    human = Actor(ActorKind.HUMAN, decided_by, f"<@{decided_by}>")
    summary = _line(f"{status} `{action}`")
    return _Draft(
        row.at, human, EntryKind.APPROVAL, summary, link.to(thread.status_ts), row.session_id, ref
    )


def _agent_draft(
    row: IncidentRow, thread: _Thread, link: _Linker, kind: EntryKind, summary: str, ref: str
) -> _Draft:
    return _Draft(
        row.at, thread.agent, kind, summary, link.to(thread.status_ts), row.session_id, ref
    )


_NAME_KEYS = ('"name":"', '"name": "')  # compact JSON (``Event.to_json``), or PostgreSQL's
_SHOWN_TOOLS = ('Bash"', "mcp__", 'Write"', 'Edit"')


def _worth_parsing(row: IncidentRow) -> bool:
    """Whether a logged event can make an entry, judged without parsing its JSON (tool
    results of other tools, most of a busy log, are dropped here). Events are compact JSON
    with sorted keys (``Event.to_json``); anything else is parsed."""
    if row.kind not in ("tool_result", "tool_unknown"):
        return True
    for key in _NAME_KEYS:
        at = row.text.find(key)
        if at >= 0:
            return row.text.startswith(_SHOWN_TOOLS, at + len(key))
    return True


def _agent(session: IncidentSession) -> Actor:
    return Actor(ActorKind.AGENT, session.id, f"agent (<@{session.requester_id}>'s thread)")


def _exit_code(payload: dict[str, Any]) -> str:
    if not payload.get("is_error"):
        return "0"
    found = _EXIT.match(str(payload.get("output_head", "")))
    return found.group(1) if found else "refused"


def _payload(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _line(text: str) -> str:
    """``text`` on one line, at most ``MAX_SUMMARY_CHARS`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_SUMMARY_CHARS else flat[: MAX_SUMMARY_CHARS - 1] + "…"
