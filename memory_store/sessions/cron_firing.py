"""The sweep's part for cron jobs: fire the due ones, forget those of ended sessions.

A due job of a waiting session wakes it as a ``ScheduleWakeup`` does (an inbox item of
kind ``wake`` holding the job's prompt, a new pending token) and, in the same
transaction, gets its next due time (the first after ``now``: missed times are not
caught up) or, a one-shot job, is deleted. Sweeps are serialised (the advisory lock on
PostgreSQL, the write lock on SQLite) and the job row is locked too, so a due time
fires once however many sweepers race; a sweeper that dies mid-way commits nothing.
A job of a running session waits for the session to wait.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.cron.schedule import next_due
from memory_store.cron.tables import cron_jobs
from memory_store.sessions import inbox
from memory_store.sessions.lease_time import LeaseTime
from memory_store.sessions.records import SessionStatus, Wakeup
from memory_store.sessions.tables import sessions

CRON_BATCH = 500
"""Cron jobs one sweep fires at most (the rest are fired by the next sweep)."""

_S = sessions.c
_C = cron_jobs.c
_LIVE = (SessionStatus.RUNNING.value, SessionStatus.WAITING.value)


async def fire_due(
    conn: AsyncConnection,
    *,
    now: datetime,
    lease: LeaseTime,
    mine: ColumnElement[bool],
    new_token: Callable[[], str],
    is_postgres: bool,
) -> tuple[Wakeup, ...]:
    """Fire the jobs due at ``now`` of waiting sessions in ``mine``, oldest due first;
    returns the wake-ups to enqueue (one per session: a session two jobs are due for
    gets the second at the next sweep after this firing's turn), sent at ``lease``'s
    time."""
    due = (
        select(_C.session_id, _C.job_id, _C.cron, _C.prompt, _C.recurring)
        .join(sessions, _S.id == _C.session_id)
        .where(mine, _S.status == SessionStatus.WAITING.value, _C.next_due_at <= now)
        .order_by(_C.next_due_at)
        .limit(CRON_BATCH)
    )
    if is_postgres:
        due = due.with_for_update(of=cron_jobs, skip_locked=True)
    woken: list[Wakeup] = []
    for job in (await conn.execute(due)).all():
        token = new_token()
        seq = await inbox.wake_waiting(conn, job.session_id, now, token, lease=lease)
        if seq is None:  # woken already (a reply, a wake-up, another of its jobs)
            continue
        mine_job = (_C.session_id == job.session_id, _C.job_id == job.job_id)
        if job.recurring:
            await conn.execute(
                cron_jobs.update().where(*mine_job).values(next_due_at=next_due(job.cron, now))
            )
        else:
            await conn.execute(delete(cron_jobs).where(*mine_job))
        note = inbox.Message("", job.prompt, f"cron:{job.job_id}:{seq}", kind="wake")
        await inbox.insert_item(conn, job.session_id, seq, note, now=now, is_postgres=is_postgres)
        woken.append(Wakeup(job.session_id, token))
    return tuple(woken)


async def delete_ended(conn: AsyncConnection) -> int:
    """Delete the jobs of sessions that ended (done, failed, cancelled) or are gone (a
    look-up of each job's session by its key: the cost follows the jobs, not the sessions)."""
    live = select(_S.id).where(_S.id == _C.session_id, _S.status.in_(_LIVE))
    result = await conn.execute(delete(cron_jobs).where(~live.exists()))
    return int(result.rowcount or 0)
