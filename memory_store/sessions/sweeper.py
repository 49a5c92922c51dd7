"""The recovery sweep: re-enqueue lost steps, fail crash loops, end expired waits, fire
timed wake-ups and cron jobs (§5).

On PostgreSQL a lease whose owner's process died (``liveness``) ends at the sweep's start,
so its step is recovered by that sweep rather than after ``lease_s``.

One sweep at a time: on PostgreSQL through ``pg_try_advisory_xact_lock`` (a sweep that
finds it taken does nothing), on SQLite through the database write lock. Each part is
one ``UPDATE … RETURNING`` over every matching session, so a sweep is a handful of
statements however many sessions it touches. Wake-ups are the exception (each needs its
own token and inbox row): at most ``WAKE_BATCH`` per sweep, oldest first; the rest are
fired by the next sweep.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, null, or_, select, text, true
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.sessions import cron_firing, event_log, inbox, liveness
from memory_store.sessions.lease_time import LeaseTime
from memory_store.sessions.records import (
    EventKind,
    NewEvent,
    SessionOrigin,
    SessionStatus,
    SweepResult,
    Wakeup,
)
from memory_store.sessions.tables import at, sessions

SWEEPER_LOCK_KEY = 7220417212
"""The PostgreSQL advisory lock key sweeps take (transaction-scoped)."""

WAKE_BATCH = 500
"""Timed wake-ups one sweep fires at most (each is an UPDATE and an INSERT)."""

_S = sessions.c


async def sweep(
    conn: AsyncConnection,
    *,
    now: datetime,
    lease_time: LeaseTime,
    max_crashes: int,
    stale_after_s: float,
    is_postgres: bool,
    new_token: Callable[[], str],
    scope: ColumnElement[bool] | None = None,
    sent_before: datetime | None = None,
) -> SweepResult:
    """Run one sweep inside the caller's write transaction (see ``SessionStore.sweep``);
    ``scope`` (``scope()``) limits the sessions re-enqueued, failed and woken."""
    if is_postgres and not await _try_lock(conn):
        return SweepResult()
    if is_postgres:  # a dead worker's lease ends now: recovered by this sweep
        await liveness.expire_dead(conn)
    mine = true() if scope is None else scope
    failed = await _fail_crash_loops(
        conn, now=now, lease_time=lease_time, max_crashes=max_crashes, mine=mine
    )
    requeue = await _requeue(
        conn, lease_time=lease_time, stale_after_s=stale_after_s, sent_before=sent_before, mine=mine
    )
    woken = await _fire_wakes(
        conn,
        now=now,
        lease_time=lease_time,
        mine=mine,
        new_token=new_token,
        is_postgres=is_postgres,
    )
    woken += await cron_firing.fire_due(
        conn, now=now, lease=lease_time, mine=mine, new_token=new_token, is_postgres=is_postgres
    )
    expired = await _end_waits(conn, now=now)
    await cron_firing.delete_ended(conn)
    return SweepResult(requeue=requeue, failed=failed, expired_waits=expired, woken=woken)


def scope(
    origin: SessionOrigin | None, session_ids: Collection[str] | None
) -> ColumnElement[bool] | None:
    """The sessions of ``origin`` among ``session_ids`` (None: no limit of that kind)."""
    parts = []
    if origin is not None:
        parts.append(_S.origin == origin.value)
    if session_ids is not None:
        parts.append(_S.id.in_(list(session_ids)))
    return and_(*parts) if parts else None


async def _try_lock(conn: AsyncConnection) -> bool:
    locked = await conn.scalar(
        text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": SWEEPER_LOCK_KEY}
    )
    return bool(locked)


def _lease_expired(lease_time: LeaseTime) -> Any:
    return and_(_S.lease_until.is_not(None), _S.lease_until < lease_time.now())


async def _fail_crash_loops(
    conn: AsyncConnection,
    *,
    now: datetime,
    lease_time: LeaseTime,
    max_crashes: int,
    mine: ColumnElement[bool],
) -> tuple[str, ...]:
    """Fail running sessions whose lease expired for the ``max_crashes``-th time.

    An expired lease is one more crash on top of ``crash_count`` (counted at re-claims).
    The epoch is bumped so a late write of the last holder is fenced off.
    """
    result = await conn.execute(
        sessions.update()
        .where(
            _S.status == SessionStatus.RUNNING.value,
            mine,
            _lease_expired(lease_time),
            _S.crash_count + 1 >= max_crashes,
        )
        .values(
            status=SessionStatus.FAILED.value,
            epoch=_S.epoch + 1,
            **_RELEASED,
            last_seq=_S.last_seq + 1,
            updated_at=now,
        )
        .returning(_S.id, _S.epoch, _S.last_seq)
    )
    rows = result.all()
    notice = NewEvent(
        EventKind.NOTICE.value, json.dumps({"notice": "crash_loop", "max_crashes": max_crashes})
    )
    await event_log.append_to_each(conn, _reserved(rows), notice, now=now)
    return tuple(sorted(row.id for row in rows))


_RELEASED: dict[str, Any] = {
    "pending_token": null(),
    "claimed_token": null(),
    "lease_owner": null(),
    "lease_until": null(),
    "enqueued_at": null(),
    "wait_until": null(),
}


async def _requeue(
    conn: AsyncConnection,
    *,
    lease_time: LeaseTime,
    stale_after_s: float,
    mine: ColumnElement[bool],
    sent_before: datetime | None = None,
) -> tuple[Wakeup, ...]:
    """Hand out again the tokens of running sessions nobody holds.

    A session qualifies when no live lease holds it and either its lease expired after
    its last enqueue (the holder died) or its last enqueue is older than ``stale_after``
    or before ``sent_before`` (the message was lost, or the re-enqueue was). Marks
    ``enqueued_at = now``.
    """
    now = lease_time.now()
    unheld = or_(_S.lease_until.is_(None), _S.lease_until < now)
    lost = [_S.enqueued_at < lease_time.now(-stale_after_s)]
    if sent_before is not None:
        lost.append(_S.enqueued_at < at(sent_before))
    due = or_(
        _S.enqueued_at.is_(None),
        and_(_S.lease_until.is_not(None), _S.enqueued_at < _S.lease_until),
        *lost,
    )
    result = await conn.execute(
        sessions.update()
        .where(mine, _S.status == SessionStatus.RUNNING.value, unheld, due)
        .values(enqueued_at=now)
        .returning(_S.id, _S.pending_token)
    )
    wakeups = (Wakeup(row.id, row.pending_token) for row in result.all())
    return tuple(sorted(wakeups, key=lambda w: w.session_id))


async def _fire_wakes(
    conn: AsyncConnection,
    *,
    now: datetime,
    lease_time: LeaseTime,
    mine: ColumnElement[bool],
    new_token: Callable[[], str],
    is_postgres: bool,
) -> tuple[Wakeup, ...]:
    """Wake waiting sessions whose ``wake_at`` passed: each gets its ``wake_note`` as an
    inbox item of kind ``wake`` and a new pending token (returned, to enqueue).

    Runs before ``_end_waits``: a wake-up due before the wait's deadline is not lost to
    it. A session a concurrent reply already woke is left alone (the row's status is
    checked again in its UPDATE).
    """
    due = (
        select(_S.id, _S.wake_note)
        .where(
            mine,
            _S.status == SessionStatus.WAITING.value,
            _S.wake_at.is_not(None),
            _S.wake_at <= now,
        )
        .order_by(_S.wake_at)
        .limit(WAKE_BATCH)
    )
    if is_postgres:
        due = due.with_for_update(skip_locked=True)
    woken = []
    for row in (await conn.execute(due)).all():
        token = new_token()
        seq = await inbox.wake_waiting(conn, row.id, now, token, lease=lease_time)
        if seq is None:
            continue
        text = str(row.wake_note or "")
        note = inbox.Message("", text, f"wake:{seq}", kind="wake")
        await inbox.insert_item(conn, row.id, seq, note, now=now, is_postgres=is_postgres)
        woken.append(Wakeup(row.id, token))
    return tuple(woken)


async def _end_waits(conn: AsyncConnection, *, now: datetime) -> tuple[str, ...]:
    """Move waiting sessions past ``wait_until`` to done, each with a notice event."""
    result = await conn.execute(
        sessions.update()
        .where(
            _S.status == SessionStatus.WAITING.value,
            _S.wait_until.is_not(None),
            _S.wait_until < now,
        )
        .values(
            status=SessionStatus.DONE.value,
            wait_until=null(),
            last_seq=_S.last_seq + 1,
            updated_at=now,
        )
        .returning(_S.id, _S.epoch, _S.last_seq)
    )
    rows = result.all()
    notice = NewEvent(EventKind.NOTICE.value, json.dumps({"notice": "wait_expired"}))
    await event_log.append_to_each(conn, _reserved(rows), notice, now=now)
    return tuple(sorted(row.id for row in rows))


def _reserved(rows: Sequence[Row[Any]]) -> list[event_log.Reserved]:
    return [event_log.Reserved(row.id, row.last_seq, row.epoch) for row in rows]
