"""A session's cron jobs (``CronCreate``/``CronList``/``CronDelete``) over ``cron_jobs``.

The sweeper fires them (``memory_store.sessions.sweeper``); this module makes, lists and
deletes them, and deletes a session's jobs when it is stopped or ends.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.clock import Clock, utc_now
from memory_store.cron.schedule import next_due
from memory_store.cron.tables import cron_jobs
from memory_store.db import Database
from memory_store.sessions.tables import sessions
from memory_store.upsert import insert

_C = cron_jobs.c


class CronLimitReached(Exception):
    """The session already has the most jobs allowed (``max_jobs``)."""


@dataclass(frozen=True)
class CronJob:
    """One recurring (or one-shot) wake-up of a session.

    Attributes:
        session_id: the session it wakes.
        job_id: the short id the model uses (``CronDelete``), unique in the session.
        cron: the checked expression (``memory_store.cron.schedule.check``).
        prompt: the input the session is woken with each time.
        recurring: False: deleted after it fires once.
        next_due_at, created_at: aware UTC times.
    """

    session_id: str
    job_id: str
    cron: str
    prompt: str
    recurring: bool
    next_due_at: datetime
    created_at: datetime


def job_id_for(tool_use_id: str) -> str:
    """The job id a ``CronCreate`` call makes: 8 hex digits derived from its
    ``tool_use_id``, so a retried call finds its job instead of making a second."""
    return hashlib.sha256(tool_use_id.encode()).hexdigest()[:8]


class CronJobs:
    """The ``cron_jobs`` rows over ``Database`` (migrated); times from ``clock``."""

    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        self._db = db
        self._clock = clock

    async def create(
        self,
        session_id: str,
        job_id: str,
        *,
        cron: str,
        prompt: str,
        recurring: bool,
        max_jobs: int,
    ) -> CronJob:
        """Record a job first due at ``cron``'s next time after now (a job already
        recorded under ``job_id`` is returned as it is).

        Raises:
            CronLimitReached: the session has ``max_jobs`` jobs already.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        async with self._db.write() as conn:
            if self._db.is_postgres:  # concurrent creates of one session count in turn
                await conn.execute(
                    select(sessions.c.id).where(sessions.c.id == session_id).with_for_update()
                )
            existing = await _one(conn, session_id, job_id)
            if existing is not None:
                return existing
            count = await conn.scalar(
                select(func.count()).select_from(cron_jobs).where(_C.session_id == session_id)
            )
            if (count or 0) >= max_jobs:
                raise CronLimitReached(f"{session_id} has {count} cron jobs")
            job = CronJob(session_id, job_id, cron, prompt, recurring, next_due(cron, now), now)
            await conn.execute(
                insert(cron_jobs, is_postgres=self._db.is_postgres).values(
                    session_id=session_id,
                    job_id=job_id,
                    cron=cron,
                    prompt=prompt,
                    recurring=recurring,
                    next_due_at=job.next_due_at,
                    created_at=now,
                )
            )
            return job

    async def list(self, session_id: str) -> list[CronJob]:
        """The session's jobs, oldest first. Raises DatabaseUnavailable."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(cron_jobs)
                .where(_C.session_id == session_id)
                .order_by(_C.created_at, _C.job_id)
            )
            return [CronJob(**row._mapping) for row in rows]

    async def delete(self, session_id: str, job_id: str) -> bool:
        """Delete one job; False when the session has no such job.

        Raises DatabaseUnavailable."""
        async with self._db.write() as conn:
            result = await conn.execute(
                delete(cron_jobs).where(_C.session_id == session_id, _C.job_id == job_id)
            )
            return bool(result.rowcount)


async def delete_all(conn: AsyncConnection, session_id: str) -> int:
    """Delete every job of the session (``stop``) in the caller's transaction; how many."""
    result = await conn.execute(delete(cron_jobs).where(_C.session_id == session_id))
    return int(result.rowcount or 0)


async def _one(conn: AsyncConnection, session_id: str, job_id: str) -> CronJob | None:
    row = (
        await conn.execute(
            select(cron_jobs).where(_C.session_id == session_id, _C.job_id == job_id)
        )
    ).one_or_none()
    return None if row is None else CronJob(**row._mapping)
