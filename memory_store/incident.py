"""The incident record's rows (§15): everything an incident's sessions did, in one query.

An incident is a channel (``org_id``, ``channel_id``) or one thread of it. Its rows come
from four tables in one ``UNION ALL``, oldest first: the sessions' logged events (their
payloads are the harness's JSON, returned as stored), the people's messages (the inbox,
with each message's Slack ``ts``), the egress gateway's audit rows and the status
messages posted (their Slack ``ts``, to link what happened during a turn). Turning rows
into timeline entries is the harness's job; this module only reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, and_, cast, literal, null, select, union_all

from memory_store.db import Database
from memory_store.egress import egress_requests
from memory_store.sessions.tables import session_events, session_inbox, sessions, slack_outbox

EVENT_KINDS = (
    "tool_intent",
    "tool_result",
    "tool_unknown",
    "notice",
    "answer",
    "post_done",
    "post_failed",
    "approval_requested",
    "approval_decided",
    "tool_blocked",
)
"""The logged event kinds an incident record reads (the rest is the step's machinery)."""


@dataclass(frozen=True)
class IncidentSession:
    """One session of the incident: its id, thread, who started it and when."""

    id: str
    thread_ts: str
    requester_id: str
    created_at: datetime


@dataclass(frozen=True)
class IncidentRow:
    """One thing a session of the incident did or was told, as stored.

    ``source`` says where it comes from, and so what the other fields hold:

    - ``event``: ``kind`` is the event kind, ``text`` its JSON payload, ``seq`` its seq;
    - ``input``: an inbox item: ``kind`` ``user`` for a person's message (else what
      the system recorded: ``approval``, ``notification``, ``wake``…), ``text``,
      ``extra`` the user id (empty for the system's), ``ref`` the message's Slack ``ts``
      (or the system's source key), ``seq`` its inbox position;
    - ``egress``: ``kind`` the outcome, ``text`` ``"METHOD host/path"``, ``extra`` the
      HTTP status, ``ref`` the ``tool_use`` id, ``seq`` the audit row id;
    - ``status``: a status message: ``text`` its outbox key, ``ref`` its Slack ``ts``.
    """

    source: str
    at: datetime
    session_id: str
    seq: int
    kind: str
    text: str
    extra: str | None
    ref: str | None


@dataclass(frozen=True)
class IncidentRows:
    """The incident's sessions (oldest first) and its rows (oldest first)."""

    sessions: tuple[IncidentSession, ...]
    rows: tuple[IncidentRow, ...]


class IncidentLog:
    """Reads an incident's rows over ``Database``."""

    def __init__(self, db: Database) -> None:
        """Use ``db`` (migrated)."""
        self._db = db

    async def rows(
        self,
        org_id: str,
        channel_id: str,
        *,
        thread_ts: str | None = None,
    ) -> IncidentRows:
        """The sessions and rows of a channel's incident, or of one thread of it.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        s = sessions.c
        where = [s.org_id == org_id, s.channel_id == channel_id]
        if thread_ts is not None:
            where.append(s.thread_ts == thread_ts)
        found = select(s.id, s.thread_ts, s.requester_id, s.created_at).where(*where)
        async with self._db.read() as conn:
            listed = (await conn.execute(found.order_by(s.created_at, s.id))).all()
            ids = [row.id for row in listed]
            rows = (await conn.execute(_union(ids))).all() if ids else []
        return IncidentRows(
            tuple(IncidentSession(*row) for row in listed),
            tuple(IncidentRow(*row) for row in rows),
        )


def _union(ids: list[str]) -> Any:
    e, i, g, o = session_events.c, session_inbox.c, egress_requests.c, slack_outbox.c
    text = String()
    events = select(
        literal("event", text).label("source"),
        e.created_at.label("at"),
        e.session_id,
        e.seq.label("seq"),
        e.kind,
        e.payload.label("text"),
        cast(null(), text).label("extra"),
        cast(null(), text).label("ref"),
    ).where(e.session_id.in_(ids), e.kind.in_(EVENT_KINDS))
    inputs = select(
        literal("input", text),
        i.created_at,
        i.session_id,
        i.position,
        i.kind,
        i.text,
        cast(i.user_id, text),
        cast(i.source_ts, text),
    ).where(i.session_id.in_(ids))
    egress = select(
        literal("egress", text),
        g.at,
        g.session_id,
        g.id,
        g.outcome,
        g.method + literal(" ", text) + g.host + g.path,
        cast(g.status, text),
        cast(g.tool_use_id, text),
    ).where(g.session_id.in_(ids))
    statuses = select(
        literal("status", text),
        o.created_at,
        o.session_id,
        o.id,
        o.kind,
        o.key,
        cast(null(), text),
        cast(o.ts, text),
    ).where(and_(o.session_id.in_(ids), o.kind == "status", o.ts.is_not(None)))
    union = union_all(events, inputs, egress, statuses).subquery()
    return select(union).order_by(union.c.at, union.c.session_id, union.c.source, union.c.seq)
