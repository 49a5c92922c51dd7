"""What each row of an incident's record becomes in its timeline: who did what, when, and
how it ended (§15).

One ``Reader`` per session reads that session's rows in time order and returns the
entries each makes (none, one, or several for a ``stop``). It remembers what the
session had under way: the tool call begun (``tool_intent``) and not yet ended, the
approvals asked for and not yet decided. A ``stop`` ends those at the moment it is
written, so the stop's entries say what it cut short then; the outcome the session
logs for them when a later reply revives it (an unknown one, a rejection) is left out,
as it would be timed at that reply.

Rows and what they make (``memory_store.IncidentRow``):

- a person's message (an inbox item of kind ``user``): a ``message`` entry; system
  inputs (an approval click, a timed wake-up) are not messages: the click is the
  ``approval`` entry its decision makes; a background command's end notification is a
  ``command`` entry saying how it ended;
- a Bash result: ``command`` with its exit code, timeout, refusal or background start;
  an MCP result: ``mcp``; a Write or Edit under ``/incident/`` or ``/memory/``: ``file``;
- an outcome a crash lost: the same kinds, saying the outcome is unknown; one recovered
  from the sandbox after its worker died is dated when it was logged, as every entry is
  (the entries' numbers are their order in time, which postmortems cite; the sandbox's
  record of the command's end has whole seconds only);
- the approval's request, decision (by the person who decided, or its expiry) and a
  call the policy blocked: ``approval``;
- the stop (``notice`` ``cancelled``): a ``stop`` entry by the person who wrote it,
  then each command or approval it cut short; a session failed by repeated crashes, or
  because its worker could not set itself up (no sandbox would start): a ``notice``;
  the notices worth knowing (``NOTICE_TOPICS``);
- an answer: ``answer``, linked to its message once posted; one Slack refused: ``notice``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.record.kinds import Actor, ActorKind, EntryKind
from harness.record.links import permalink
from memory_store import IncidentRow, IncidentSession

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
LOST = "unknown (its worker died before recording it)"
_EXIT = re.compile(r"^Exit code (\S+)")
_TIMED_OUT = re.compile(r"^Command timed out after (\d+(?:\.\d+)?)\s?(s|m)\b", re.M)
_MOVED = re.compile(
    r"^Command did not complete within its (\d+)(s|m) timeout and was moved to the "
    r"background \(ID: (\w+)\)",
    re.M,
)
_BACKGROUND = re.compile(r"^Command running in background with ID: ([^.\s]+)")
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
_TAGS = re.compile(r"</?tool_use_error>")
_STATUS = re.compile(r"<status>(\w+)</status>")


@dataclass
class Draft:
    """An entry before it is numbered (``timeline.Entry`` without ``n``)."""

    at: datetime
    actor: Actor
    kind: EntryKind
    summary: str
    link: str | None
    session_id: str
    ref: str


@dataclass
class Reader:
    """Reads one session's rows in time order; see the module docstring."""

    session: IncidentSession
    workspace_url: str | None
    channel_id: str
    status_ts: str | None = None
    unposted: list[Draft] = field(default_factory=list)
    under_way: IncidentRow | None = None  # the tool call begun and not ended (unparsed)
    approvals: dict[str, str] = field(default_factory=dict)  # tool_use_id → action
    stopped: set[str] = field(default_factory=set)  # ids whose end the stop recorded

    @property
    def agent(self) -> Actor:
        """The session's agent, labelled by whose thread it is."""
        return Actor(
            ActorKind.AGENT, self.session.id, f"agent (<@{self.session.requester_id}>'s thread)"
        )

    def link(self, ts: str | None) -> str | None:
        """The permalink of message ``ts`` of this thread (None: the thread's root)."""
        if self.workspace_url is None:
            return None
        root = self.session.thread_ts
        return permalink(self.workspace_url, self.channel_id, ts or root, root)

    def read(self, row: IncidentRow) -> list[Draft]:
        """The entries ``row`` makes (often none)."""
        if row.source == "status":
            self.status_ts = row.ref
            return []
        if row.source == "input":
            return self._input(row)
        if row.source == "egress":
            summary = line(f"{row.text} → {row.extra} ({row.kind})")
            return [self._by_agent(row, EntryKind.EGRESS, summary, f"egress:{row.seq}")]
        if row.kind == "tool_intent":  # a session runs one call at a time: parsed if stopped
            self.under_way = row
            return []
        return self._event(row, payload_of(row.text))

    def _input(self, row: IncidentRow) -> list[Draft]:
        if row.kind == "user":
            human = Actor(ActorKind.HUMAN, row.extra or "", f"<@{row.extra}>")
            ref = row.ref or ""
            return [
                Draft(
                    row.at,
                    human,
                    EntryKind.MESSAGE,
                    line(row.text),
                    self.link(row.ref),
                    row.session_id,
                    ref,
                )
            ]
        status = _STATUS.search(row.text)
        summary = _SUMMARY.search(row.text)
        if row.kind != "notification" or status is None or summary is None:
            return []  # an approval click (its decision is the entry), a wake-up, a monitor's lines
        text = line(summary.group(1))
        return [self._by_agent(row, EntryKind.COMMAND, text, f"notification:{row.seq}")]

    def _event(self, row: IncidentRow, payload: dict[str, Any]) -> list[Draft]:
        tool_use_id = str(payload.get("tool_use_id", ""))
        if row.kind in ("tool_result", "tool_unknown"):
            self.under_way = None
            return [] if tool_use_id in self.stopped else _listed(self._tool(row, payload))
        if row.kind in ("approval_requested", "approval_decided", "tool_blocked"):
            return _listed(self._approval(row, payload))
        if row.kind == "post_done":
            ts = str(payload.get("ts", ""))
            if ":answer:" in str(payload.get("key", "")) and self.unposted and ts:
                self.unposted.pop(0).link = self.link(ts)
            return []
        if row.kind == "answer":
            text = str(payload.get("text", ""))
            if payload.get("best_effort"):
                text = f"(best effort, at a limit) {text}"
            draft = self._by_agent(row, EntryKind.ANSWER, line(text), f"answer:{row.seq}")
            draft.link = self.link(None)
            self.unposted.append(draft)
            return [draft]
        if row.kind == "post_failed":
            text = f"Slack refused the answer for good ({payload.get('error', 'error')})"
            return [self._by_agent(row, EntryKind.NOTICE, text, f"event:{row.seq}")]
        if row.kind == "notice":
            return self._notice(row, payload)
        return []

    def _notice(self, row: IncidentRow, payload: dict[str, Any]) -> list[Draft]:
        said = payload.get("notice")
        if said == "cancelled":
            return self._stop(row, str(payload.get("by") or ""))
        if said == "crash_loop":
            text = (
                f"the session failed: its step failed {payload.get('max_crashes')} times in a row"
            )
            return [self._by_agent(row, EntryKind.NOTICE, text, f"event:{row.seq}")]
        if said == "setup_failed":  # the call under way needed what failed: it never ran
            self.under_way = None
            reason = payload.get("reason") or "no reason given"
            text = line(f"the session failed: its worker could not set itself up ({reason})")
            return [self._by_agent(row, EntryKind.NOTICE, text, f"event:{row.seq}")]
        if str(payload.get("topic", "")) not in NOTICE_TOPICS:
            return []
        text = line(str(payload.get("text", "")))
        return [self._by_agent(row, EntryKind.NOTICE, text, f"event:{row.seq}")]

    def _stop(self, row: IncidentRow, by: str) -> list[Draft]:
        """The stop, by ``by``, and what it cut short (see the module docstring)."""
        who = f"<@{by}>" if by else "someone"
        person = Actor(ActorKind.HUMAN, by, who)
        link = self.link(self.status_ts)
        drafts = [
            Draft(
                row.at,
                person,
                EntryKind.STOP,
                "stopped the session",
                link,
                row.session_id,
                f"event:{row.seq}",
            )
        ]
        call = payload_of(self.under_way.text) if self.under_way is not None else {}
        name, tool_use_id = str(call.get("name", "")), str(call.get("tool_use_id", ""))
        detail = str(call.get("detail") or call.get("summary") or "")
        if name == "Bash" or name.startswith("mcp__"):
            kind = EntryKind.COMMAND if name == "Bash" else EntryKind.MCP
            what = f"`{detail}`" if name == "Bash" else f"{name} {detail}"
            summary = line(f"{what} → stopped by {who} before it ended (killed)")
            drafts.append(self._by_agent(row, kind, summary, tool_use_id))
            self.stopped.add(tool_use_id)
        for tool_use_id, action in self.approvals.items():
            summary = line(f"stopped `{action}` while it awaited approval (not run)")
            drafts.append(
                Draft(
                    row.at,
                    person,
                    EntryKind.APPROVAL,
                    summary,
                    link,
                    row.session_id,
                    f"approval:{tool_use_id}",
                )
            )
        self.stopped.update(self.approvals)
        self.under_way = None
        self.approvals.clear()
        return drafts

    def _tool(self, row: IncidentRow, payload: dict[str, Any]) -> Draft | None:
        name = str(payload.get("name", ""))
        detail = str(payload.get("detail") or payload.get("summary") or "")
        tool_use_id = str(payload.get("tool_use_id", ""))
        unknown = row.kind == "tool_unknown"
        draft: Draft | None = None
        if name == "Bash":
            outcome = LOST if unknown else bash_outcome(payload)
            summary = line(f"`{detail}` → {outcome}")
            draft = self._by_agent(row, EntryKind.COMMAND, summary, tool_use_id)
        elif name.startswith("mcp__"):
            outcome = LOST if unknown else ("error" if payload.get("is_error") else "ok")
            summary = line(f"{name} {detail} → {outcome}")
            draft = self._by_agent(row, EntryKind.MCP, summary, tool_use_id)
        elif name in ("Write", "Edit") and _written(payload, detail, unknown):
            verb = "wrote" if name == "Write" else "edited"
            draft = self._by_agent(row, EntryKind.FILE, f"{verb} {detail}", tool_use_id)
        return draft

    def _approval(self, row: IncidentRow, payload: dict[str, Any]) -> Draft | None:
        """Asked for (the agent), decided (the person who decided; an expiry is the
        agent's), or blocked by the policy (the agent's call, not run)."""
        action = str(payload.get("action") or payload.get("detail") or payload.get("name") or "")
        tool_use_id = str(payload.get("tool_use_id", ""))
        ref = f"approval:{tool_use_id}"
        if row.kind == "tool_blocked":
            summary = line(f"the policy blocked `{action}` (not run): {payload.get('reason', '')}")
            return self._by_agent(row, EntryKind.APPROVAL, summary, ref)
        if row.kind == "approval_requested":
            self.approvals[tool_use_id] = action
            summary = line(f"asked approval to run `{action}`: {payload.get('reason', '')}")
            return self._by_agent(row, EntryKind.APPROVAL, summary, ref)
        self.approvals.pop(tool_use_id, None)
        if tool_use_id in self.stopped:
            return None
        status = str(payload.get("status", ""))
        decided_by = str(payload.get("decided_by", ""))
        if not decided_by:
            summary = line(f"approval of `{action}` expired unanswered")
            return self._by_agent(row, EntryKind.APPROVAL, summary, ref)
        human = Actor(ActorKind.HUMAN, decided_by, f"<@{decided_by}>")
        summary = line(f"{status} `{action}`")
        return Draft(
            row.at,
            human,
            EntryKind.APPROVAL,
            summary,
            self.link(self.status_ts),
            row.session_id,
            ref,
        )

    def _by_agent(self, row: IncidentRow, kind: EntryKind, summary: str, ref: str) -> Draft:
        return Draft(
            row.at, self.agent, kind, summary, self.link(self.status_ts), row.session_id, ref
        )


def bash_outcome(payload: dict[str, Any]) -> str:
    """How a Bash call ended, from its logged result: ``exit 0``, ``exit 2``, ``timed out
    after 120 s (killed)``, ``started in the background (task b1)``, ``refused: …``.

    >>> bash_outcome({"is_error": True, "output_head": "Exit code 2\\nno such file"})
    'exit 2'
    >>> bash_outcome({"is_error": True,
    ...     "output_head": "Exit code 143\\nCommand timed out after 5s"})
    'timed out after 5 s (killed)'
    >>> bash_outcome({"output_head": "Command running in background with ID: b1. Output…"})
    'started in the background (task b1)'
    >>> bash_outcome({"output_head": "x\\nCommand did not complete within its 2m timeout and "
    ...     "was moved to the background (ID: b2). Output…"})
    'moved to the background at its 2 min timeout (task b2)'
    """
    head = str(payload.get("output_head", ""))
    if not payload.get("is_error"):
        if background := _BACKGROUND.match(head):
            return f"started in the background (task {background.group(1)})"
        if moved := _MOVED.search(head):
            unit = "min" if moved.group(2) == "m" else "s"
            at = f"{moved.group(1)} {unit}"
            return f"moved to the background at its {at} timeout (task {moved.group(3)})"
        return "exit 0"
    if found := _TIMED_OUT.search(head):
        unit = "min" if found.group(2) == "m" else "s"
        return f"timed out after {found.group(1)} {unit} (killed)"
    if found := _EXIT.match(head):
        return f"exit {found.group(1)}"
    reason = _TAGS.sub("", head).strip()
    first = reason.splitlines()[0] if reason else "no reason given"
    return f"refused: {first}"


def _written(payload: dict[str, Any], path: str, unknown: bool) -> bool:
    """Whether a Write or Edit succeeded under a root the timeline shows."""
    return not payload.get("is_error") and not unknown and path.startswith(WRITTEN_ROOTS)


def payload_of(text: str) -> dict[str, Any]:
    """A logged event's JSON payload as a dict ({} when it is not one)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def line(text: str) -> str:
    """``text`` on one line, at most ``MAX_SUMMARY_CHARS`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_SUMMARY_CHARS else flat[: MAX_SUMMARY_CHARS - 1] + "…"


def _listed(draft: Draft | None) -> list[Draft]:
    return [] if draft is None else [draft]
