"""The ``sessions`` row: create it once per Slack thread, look it up, cancel it, read it.

Statements for a connection the caller opened (``Database.write()``/``read()``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, null, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.sessions import event_log
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
from memory_store.sessions.tables import sessions
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


async def create(
    conn: AsyncConnection,
    key: SessionKey,
    *,
    session_id: str,
    requester_id: str,
    checkpoint: str,
    token: str,
    now: datetime,
    is_postgres: bool,
    origin: SessionOrigin = SessionOrigin.SLACK,
) -> bool:
    """Insert a runnable session (pending ``token``, inbox position 1 reserved).

    Returns False, changing nothing, when ``key`` already has a session (on PostgreSQL
    after waiting for a concurrent creator to commit).
    """
    stmt = (
        insert(sessions, is_postgres=is_postgres)
        .values(
            id=session_id,
            org_id=key.org_id,
            channel_id=key.channel_id,
            thread_ts=key.thread_ts,
            requester_id=requester_id,
            status=SessionStatus.RUNNING.value,
            origin=origin.value,
            epoch=0,
            pending_token=token,
            enqueued_at=now,
            crash_count=0,
            checkpoint=checkpoint,
            last_seq=0,
            inbox_seq=1,
            inbox_consumed=0,
            input_tokens=0,
            output_tokens=0,
            cache_read_tokens=0,
            cache_write_tokens=0,
            created_at=now,
            updated_at=now,
        )
        .on_conflict_do_nothing(index_elements=["org_id", "channel_id", "thread_ts"])
        .returning(_S.id)
    )
    return (await conn.execute(stmt)).one_or_none() is not None


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
    notice = NewEvent(EventKind.NOTICE.value, json.dumps({"notice": "cancelled", "by": actor}))
    await event_log.append(
        conn, session_id, last_seq=row.last_seq, epoch=row.epoch, events=[notice], now=now
    )
    return Cancelled(session_id, row.epoch, SessionStatus(was), row.checkpoint, row.sandbox)


async def read(conn: AsyncConnection, *where: ColumnElement[bool]) -> Session | None:
    """The one session matching ``where``, or None."""
    row = (await conn.execute(select(sessions).where(*where))).one_or_none()
    return None if row is None else _session(row)


def _session(row: Row[Any]) -> Session:
    m = row._mapping
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
        origin=SessionOrigin(m["origin"]),
    )
