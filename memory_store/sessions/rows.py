"""The ``sessions`` row: create it once per Slack thread, look it up, cancel it, read it.

Statements for a connection the caller opened (``Database.write()``/``read()``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, String, Text, bindparam, literal, null, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.cron import store as cron_store
from memory_store.db import Database
from memory_store.sessions import event_log
from memory_store.sessions.inbox import Message
from memory_store.sessions.lease_time import BOUND_NOW
from memory_store.sessions.records import (
    Cancelled,
    EventKind,
    NewEvent,
    Session,
    SessionKey,
    SessionOrigin,
    SessionStatus,
    TokenUsage,
)
from memory_store.sessions.tables import UtcDateTime, session_inbox, sessions
from memory_store.upsert import insert

_S = sessions.c
_LIVE = (SessionStatus.RUNNING.value, SessionStatus.WAITING.value)


def key_is(key: SessionKey) -> tuple[ColumnElement[bool], ...]:
    """WHERE criteria selecting the session of ``key``."""
    return (
        _S.org_id == key.org_id,
        _S.channel_id == key.channel_id,
        _S.thread_ts == key.thread_ts,
    )


@dataclass(frozen=True)
class NewSession:
    """A session to create: its id, requester, initial checkpoint, first pending token."""

    session_id: str
    requester_id: str
    checkpoint: str
    token: str
    now: datetime
    origin: SessionOrigin = SessionOrigin.SLACK
    lease_now: datetime | None = None
    """The lease clock's time (``LeaseTime.bound``; None: the database's ``now()``): the
    session's first wake-up is sent at it (``enqueued_at``)."""


async def create(
    conn: AsyncConnection, key: SessionKey, new: NewSession, *, is_postgres: bool
) -> bool:
    """Insert a runnable session (pending ``token``, inbox position 1 reserved).

    Returns False, changing nothing, when ``key`` already has a session (on PostgreSQL
    after waiting for a concurrent creator to commit).
    """
    stmt = _creating(key, new, is_postgres=is_postgres)
    return (await conn.execute(stmt)).one_or_none() is not None


async def create_with_input(
    db: Database, key: SessionKey, new: NewSession, message: Message
) -> bool:
    """PostgreSQL only: ``create`` and the first inbox row in ONE statement (a
    data-modifying CTE) on the driver's connection (``Database.driver``: the ack path),
    so a new thread is recorded in one round trip. Returns False, changing nothing,
    when ``key`` already has a session.

    Raises:
        DatabaseUnavailable: the database could not be reached or timed out.
    """
    statement = db.precompiled(_session_with_input())
    params = {
        "id": new.session_id,
        "origin": new.origin.value,
        "org_id": key.org_id,
        "channel_id": key.channel_id,
        "thread_ts": key.thread_ts,
        "requester_id": new.requester_id,
        "pending_token": new.token,
        "checkpoint": new.checkpoint,
        "now": new.now,
        "lease_now": new.lease_now,
        "user_id": message.user_id,
        "text": message.text,
        "source_ts": message.source_ts,
    }
    async with db.driver() as conn:
        return await conn.fetchrow(statement.sql, *statement.args(params)) is not None


@cache
def _session_with_input() -> Any:
    """The statement of ``create_with_input``, built once (bound parameters only)."""
    now = bindparam("now", type_=UtcDateTime())
    created = (
        postgresql.insert(sessions)
        .values(
            {
                **{name: bindparam(name) for name in _NEW_SESSION_PARAMS},
                **_NEW_SESSION_ZEROS,
                "status": SessionStatus.RUNNING.value,
                "enqueued_at": BOUND_NOW,
                "created_at": now,
                "updated_at": now,
            }
        )
        .on_conflict_do_nothing(index_elements=["org_id", "channel_id", "thread_ts"])
        .returning(_S.id)
        .cte("created")
    )
    columns = ["session_id", "position", "user_id", "text", "source_ts", "created_at"]
    first = select(
        created.c.id,
        literal(1),
        bindparam("user_id", type_=String()),
        bindparam("text", type_=Text()),
        bindparam("source_ts", type_=String()),
        now,
    )
    return session_inbox.insert().from_select(columns, first).returning(session_inbox.c.session_id)


_NEW_SESSION_PARAMS = (
    "id",
    "origin",
    "org_id",
    "channel_id",
    "thread_ts",
    "requester_id",
    "pending_token",
    "checkpoint",
)
_NEW_SESSION_ZEROS = {
    name: 0
    for name in (
        "epoch",
        "crash_count",
        "last_seq",
        "transcript_generation",
        "transcript_length",
        "inbox_consumed",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    )
} | {"inbox_seq": 1}


def _creating(key: SessionKey, new: NewSession, *, is_postgres: bool) -> Any:
    """The ``INSERT … ON CONFLICT DO NOTHING RETURNING id`` of a new runnable session."""
    return (
        insert(sessions, is_postgres=is_postgres)
        .values(
            id=new.session_id,
            org_id=key.org_id,
            channel_id=key.channel_id,
            thread_ts=key.thread_ts,
            requester_id=new.requester_id,
            status=SessionStatus.RUNNING.value,
            origin=new.origin.value,
            epoch=0,
            pending_token=new.token,
            enqueued_at=new.lease_now or new.now,
            crash_count=0,
            checkpoint=new.checkpoint,
            last_seq=0,
            transcript_generation=0,
            transcript_length=0,
            inbox_seq=1,
            inbox_consumed=0,
            input_tokens=0,
            output_tokens=0,
            cache_read_tokens=0,
            cache_write_tokens=0,
            created_at=new.now,
            updated_at=new.now,
        )
        .on_conflict_do_nothing(index_elements=["org_id", "channel_id", "thread_ts"])
        .returning(_S.id)
    )


async def id_of(conn: AsyncConnection, key: SessionKey) -> str:
    """The id of the (existing) session of ``key``."""
    session_id: str = (await conn.execute(select(_S.id).where(*key_is(key)))).scalar_one()
    return session_id


async def cancel(
    conn: AsyncConnection, session_id: str, *, actor: str | None, now: datetime
) -> Cancelled | None:
    """Cancel a running or waiting session: fence (epoch + 1), release, log a notice."""
    current = await conn.execute(select(_S.status).where(_S.id == session_id).with_for_update())
    was = current.scalar_one_or_none()
    if was not in _LIVE:
        return None
    result = await conn.execute(
        sessions.update()
        .where(_S.id == session_id)
        .values(
            status=SessionStatus.CANCELLED.value,
            epoch=_S.epoch + 1,
            pending_token=null(),
            claimed_token=null(),
            lease_owner=null(),
            lease_until=null(),
            enqueued_at=null(),
            wait_until=null(),
            last_seq=_S.last_seq + 1,
            updated_at=now,
        )
        .returning(_S.epoch, _S.last_seq, _S.checkpoint, _S.sandbox)
    )
    row = result.one()
    await cron_store.delete_all(conn, session_id)  # stop ends the session's cron jobs too
    notice = NewEvent(EventKind.NOTICE.value, json.dumps({"notice": "cancelled", "by": actor}))
    await event_log.append(
        conn, session_id, last_seq=row.last_seq, epoch=row.epoch, events=[notice], now=now
    )
    return Cancelled(session_id, row.epoch, SessionStatus(was), row.checkpoint, row.sandbox)


async def read(conn: AsyncConnection, *where: ColumnElement[bool]) -> Session | None:
    """The one session matching ``where``, or None."""
    row = (await conn.execute(select(sessions).where(*where))).one_or_none()
    return None if row is None else _session(row._mapping)


async def find(db: Database, key: SessionKey) -> Session | None:
    """PostgreSQL only: the session of ``key`` (``read`` by ``key_is``), or None, on the
    driver's connection (``Database.driver``: the ack path looks a thread up first).

    Raises:
        DatabaseUnavailable: the database could not be reached or timed out.
    """
    statement = db.precompiled(_by_key())
    params = {"org_id": key.org_id, "channel_id": key.channel_id, "thread_ts": key.thread_ts}
    async with db.driver() as conn:
        row = await conn.fetchrow(statement.sql, *statement.args(params))
    return None if row is None else _session(row)


@cache
def _by_key() -> Any:
    """The statement of ``find``, built once."""
    return select(sessions).where(
        _S.org_id == bindparam("org_id"),
        _S.channel_id == bindparam("channel_id"),
        _S.thread_ts == bindparam("thread_ts"),
    )


async def latest(conn: AsyncConnection, org_id: str, channel_id: str) -> Session | None:
    """The channel's session updated last (ties: the higher id), or None."""
    stmt = (
        select(sessions)
        .where(_S.org_id == org_id, _S.channel_id == channel_id)
        .order_by(_S.updated_at.desc(), _S.id.desc())
        .limit(1)
    )
    row = (await conn.execute(stmt)).first()
    return None if row is None else _session(row._mapping)


def _session(m: Mapping[Any, Any]) -> Session:
    """The session of a row (SQLAlchemy's ``Row._mapping`` or the driver's record)."""
    return Session(
        id=m["id"],
        key=SessionKey(m["org_id"], m["channel_id"], m["thread_ts"]),
        requester_id=m["requester_id"],
        status=SessionStatus(m["status"]),
        epoch=m["epoch"],
        lease_owner=m["lease_owner"],
        lease_until=m["lease_until"],
        pending_token=m["pending_token"],
        crash_count=m["crash_count"],
        wait_until=m["wait_until"],
        checkpoint=m["checkpoint"],
        sandbox=m["sandbox"],
        last_seq=m["last_seq"],
        inbox_seq=m["inbox_seq"],
        inbox_consumed=m["inbox_consumed"],
        usage=TokenUsage(
            m["input_tokens"], m["output_tokens"], m["cache_read_tokens"], m["cache_write_tokens"]
        ),
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        transcript_generation=m["transcript_generation"],
        transcript_length=m["transcript_length"],
        origin=SessionOrigin(m["origin"]),
    )
