"""A session's inbox: user messages recorded once each, and the wake-up they cause.

Recording bumps ``sessions.inbox_seq`` first (locking the row, so inputs of one session
queue and get consecutive positions) and makes a non-running session runnable with a
new pending token. A repeated ``(session_id, source_ts)`` undoes both (the transaction
rolls back): a duplicate Slack message is a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Row, String, bindparam, case, null, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.db import Database
from memory_store.errors import SessionNotFound
from memory_store.sessions.lease_time import BOUND_NOW, LeaseTime
from memory_store.sessions.records import InboxItem, SessionKey, SessionStatus
from memory_store.sessions.tables import UtcDateTime, session_inbox, sessions
from memory_store.upsert import insert

_S = sessions.c


class DuplicateInput(Exception):
    """Internal: this Slack message is already in the inbox (roll back, report a no-op).

    ``session_id``: the session whose inbox has it, when the raiser knows it.
    """

    def __init__(self, source_ts: str, session_id: str | None = None) -> None:
        super().__init__(source_ts)
        self.session_id = session_id


@dataclass(frozen=True)
class Message:
    """One inbound input: a user's message (``kind`` ``user``), or one the system
    records (``user_id`` empty, ``source_ts`` its de-duplication key)."""

    user_id: str
    text: str
    source_ts: str
    kind: str = "user"


async def record(
    conn: AsyncConnection,
    session_id: str,
    message: Message,
    *,
    new_token: str,
    now: datetime,
    lease: LeaseTime,
    is_postgres: bool,
) -> str | None:
    """Append ``message`` and make the session runnable if nothing is pending (its
    wake-up sent at ``lease``'s time, the clock the sweeps judge it by).

    Returns:
        ``new_token`` when this call made the session runnable (the caller enqueues it);
        None when a step was already pending.

    Raises:
        SessionNotFound: no such session.
        DuplicateInput: ``(session_id, source_ts)`` is already recorded; the caller must
            roll the transaction back.
    """
    idle = _S.pending_token.is_(None)
    bumped = await conn.execute(
        sessions.update()
        .where(_S.id == session_id)
        .values(
            inbox_seq=_S.inbox_seq + 1,
            status=SessionStatus.RUNNING.value,
            pending_token=case((idle, new_token), else_=_S.pending_token),
            enqueued_at=case((idle, lease.now()), else_=_S.enqueued_at),
            crash_count=case((idle, 0), else_=_S.crash_count),
            wait_until=null(),
            updated_at=now,
        )
        .returning(_S.inbox_seq, _S.pending_token)
    )
    row = bumped.one_or_none()
    if row is None:
        raise SessionNotFound(session_id)
    await insert_item(conn, session_id, row.inbox_seq, message, now=now, is_postgres=is_postgres)
    return new_token if row.pending_token == new_token else None


async def record_on_driver(
    db: Database,
    session_id: str,
    message: Message,
    *,
    new_token: str,
    now: datetime,
    lease_now: datetime | None,
) -> str | None:
    """PostgreSQL only: ``record``, in one transaction on the driver's connection
    (``Database.driver``: a steering reply is recorded before Slack's ack). Returns and
    raises as ``record`` (a ``DuplicateInput`` has rolled its transaction back).
    ``lease_now``: ``LeaseTime.bound``."""
    async with db.driver() as conn:
        return await _record_on(
            db, conn, session_id, message, new_token=new_token, now=now, lease_now=lease_now
        )


async def join_on_driver(
    db: Database,
    key: SessionKey,
    message: Message,
    *,
    new_token: str,
    now: datetime,
    lease_now: datetime | None,
) -> tuple[str, str | None] | None:
    """PostgreSQL only: ``record`` ``message`` in the existing session of ``key``, on the
    driver's connection (the ack path of a mention whose thread already has a session,
    e.g. the ``message`` twin of an ``app_mention``).

    One statement finds the session and whether ``message.source_ts`` is already in its
    inbox; a repeat ends there (no transaction to open and roll back), anything else is
    recorded as ``record`` does, in one transaction.

    Returns:
        ``(session_id, token)`` as ``record`` gives it (token None: a step was pending),
        or None when ``key`` has no session (the caller decides what that means).

    Raises:
        DuplicateInput: already recorded; ``session_id`` is on the exception.
        DatabaseUnavailable: the database could not be reached or timed out.
    """
    find = db.precompiled(_session_and_repeat())
    params = {
        "org_id": key.org_id,
        "channel_id": key.channel_id,
        "thread_ts": key.thread_ts,
        "source_ts": message.source_ts,
    }
    async with db.driver() as conn:
        found = await conn.fetchrow(find.sql, *find.args(params))
        if found is None:
            return None
        session_id: str = found["id"]
        if found["recorded"]:
            raise DuplicateInput(message.source_ts, session_id)
        try:
            token = await _record_on(
                db, conn, session_id, message, new_token=new_token, now=now, lease_now=lease_now
            )
        except DuplicateInput as repeat:  # recorded meanwhile: the unique index said so
            raise DuplicateInput(message.source_ts, session_id) from repeat
    return session_id, token


async def _record_on(
    db: Database,
    conn: Any,
    session_id: str,
    message: Message,
    *,
    new_token: str,
    now: datetime,
    lease_now: datetime | None,
) -> str | None:
    """``record`` on the driver's connection ``conn``, in one transaction of its own."""
    bump, add = db.precompiled(_bump()), db.precompiled(_add())
    bumping = {"session_id": session_id, "new_token": new_token, "now": now, "lease_now": lease_now}
    async with conn.transaction():
        row = await conn.fetchrow(bump.sql, *bump.args(bumping))
        if row is None:
            raise SessionNotFound(session_id)
        item = {
            "session_id": session_id,
            "position": row["inbox_seq"],
            "user_id": message.user_id,
            "text": message.text,
            "source_ts": message.source_ts,
            "now": now,
            "kind": message.kind,
        }
        if await conn.fetchrow(add.sql, *add.args(item)) is None:
            raise DuplicateInput(message.source_ts)
    return new_token if row["pending_token"] == new_token else None


@cache
def _session_and_repeat() -> Any:
    """``join_on_driver``'s lookup, built once: the session of a key, and whether a
    ``source_ts`` is already in its inbox."""
    repeat = (
        select(session_inbox.c.position)
        .where(
            session_inbox.c.session_id == _S.id,
            session_inbox.c.source_ts == bindparam("source_ts", type_=String()),
        )
        .exists()
    )
    return select(_S.id, repeat.label("recorded")).where(
        _S.org_id == bindparam("org_id"),
        _S.channel_id == bindparam("channel_id"),
        _S.thread_ts == bindparam("thread_ts"),
    )


@cache
def _bump() -> Any:
    """``record``'s UPDATE, built once (bound parameters only)."""
    idle = _S.pending_token.is_(None)
    now = bindparam("now", type_=UtcDateTime())
    new_token = bindparam("new_token", type_=String())
    return (
        sessions.update()
        .where(_S.id == bindparam("session_id"))
        .values(
            inbox_seq=_S.inbox_seq + 1,
            status=SessionStatus.RUNNING.value,
            pending_token=case((idle, new_token), else_=_S.pending_token),
            enqueued_at=case((idle, BOUND_NOW), else_=_S.enqueued_at),
            crash_count=case((idle, 0), else_=_S.crash_count),
            wait_until=null(),
            updated_at=now,
        )
        .returning(_S.inbox_seq, _S.pending_token)
    )


@cache
def _add() -> Any:
    """``insert_item``'s INSERT on PostgreSQL, built once (bound parameters only)."""
    columns = ("session_id", "position", "user_id", "text", "source_ts", "kind")
    return (
        insert(session_inbox, is_postgres=True)
        .values(
            {name: bindparam(name) for name in columns}
            | {"created_at": bindparam("now", type_=UtcDateTime())}
        )
        .on_conflict_do_nothing(index_elements=["session_id", "source_ts"])
        .returning(session_inbox.c.position)
    )


async def insert_item(
    conn: AsyncConnection,
    session_id: str,
    position: int,
    message: Message,
    *,
    now: datetime,
    is_postgres: bool,
) -> None:
    """Insert one inbox row at ``position``. Raises DuplicateInput on a repeated source_ts."""
    stmt = (
        insert(session_inbox, is_postgres=is_postgres)
        .values(
            session_id=session_id,
            position=position,
            user_id=message.user_id,
            text=message.text,
            source_ts=message.source_ts,
            created_at=now,
            kind=message.kind,
        )
        .on_conflict_do_nothing(index_elements=["session_id", "source_ts"])
        .returning(session_inbox.c.position)
    )
    if (await conn.execute(stmt)).one_or_none() is None:
        raise DuplicateInput(message.source_ts)


async def read(
    conn: AsyncConnection, session_id: str, *, after_position: int, upto: int | None = None
) -> tuple[InboxItem, ...]:
    """Inbox items with ``after_position < position <= upto`` (None: no upper bound),
    oldest first. A claim reads up to the ``inbox_seq`` it saw, so an item recorded
    after it (read in a later snapshot) waits for the next step."""
    query = (
        select(session_inbox)
        .where(session_inbox.c.session_id == session_id)
        .where(session_inbox.c.position > after_position)
        .order_by(session_inbox.c.position)
    )
    if upto is not None:
        query = query.where(session_inbox.c.position <= upto)
    return tuple(_item(row) for row in await conn.execute(query))


def _item(row: Row[Any]) -> InboxItem:
    m = row._mapping
    return InboxItem(
        position=m["position"],
        user_id=m["user_id"],
        text=m["text"],
        source_ts=m["source_ts"],
        created_at=m["created_at"],
        kind=m["kind"],
    )


async def wake_waiting(
    conn: AsyncConnection, session_id: str, now: datetime, token: str, *, lease: LeaseTime
) -> int | None:
    """Make a *waiting* session runnable under ``token`` for one new inbox item (the sweeper's
    wake-ups and cron firings): its wait and wake-up cleared, its crash count reset, its
    ``inbox_seq`` bumped, its wake-up sent at ``lease``'s time. Returns the new
    ``inbox_seq``, or None when the session was not waiting (a reply, another wake-up or
    another sweeper woke it first)."""
    bumped = await conn.execute(
        sessions.update()
        .where(_S.id == session_id, _S.status == SessionStatus.WAITING.value)
        .values(
            status=SessionStatus.RUNNING.value,
            pending_token=token,
            enqueued_at=lease.now(),
            crash_count=0,
            wait_until=null(),
            wake_at=null(),
            wake_note=null(),
            inbox_seq=_S.inbox_seq + 1,
            updated_at=now,
        )
        .returning(_S.inbox_seq)
    )
    row = bumped.one_or_none()
    return None if row is None else int(row[0])
