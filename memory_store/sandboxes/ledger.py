"""``SandboxLedgerStore``: sandboxes' uses and claims in the database, shared by every
worker (``sandbox_client.SandboxLedger``'s contract, checked by its conformance tests).

Every call is one short transaction; a claim is one ``UPDATE … WHERE <no use in
flight, unclaimed, idle> RETURNING``, so two processes never both claim a sandbox and
a claim never lands while a use is counted (PostgreSQL row locks; SQLite's single
writer).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, delete, exists, not_, null, or_, select
from sqlalchemy.sql.elements import ColumnElement

from memory_store.clock import Clock, utc_now
from memory_store.db import Database
from memory_store.sandboxes.tables import sandboxes
from memory_store.sessions.tables import at, sessions
from memory_store.tasks.store import live_in
from memory_store.upsert import insert

_X = sandboxes.c
_LIVE_STATUSES = ("running", "waiting")


class SandboxLedgerStore:
    """The shared sandbox ledger over ``Database`` (migrated); times from ``clock``."""

    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        self._db = db
        self._clock = clock

    async def record(
        self, sandbox_id: str, *, handle_json: str, scope: str, session_id: str | None
    ) -> None:
        """Note a new sandbox, used now (a second call replaces the row's values).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        values: dict[str, Any] = {
            "scope": scope,
            "session_id": session_id,
            "handle": handle_json,
            "in_flight": 0,
            "busy_until": None,
            "last_used": now,
            "held_until": None,
        }
        stmt = (
            insert(sandboxes, is_postgres=self._db.is_postgres)
            .values(sandbox_id=sandbox_id, created_at=now, **values)
            .on_conflict_do_update(index_elements=["sandbox_id"], set_=values)
        )
        async with self._db.write() as conn:
            await conn.execute(stmt)

    async def begin_use(self, sandbox_id: str, *, busy_s: float) -> float:
        """Count one use in flight; the seconds a live claim may still last."""
        now = self._clock()
        until = now + timedelta(seconds=busy_s)
        stale = or_(_X.busy_until.is_(None), _X.busy_until < at(now))
        async with self._db.write() as conn:
            row = (
                await conn.execute(
                    sandboxes.update()
                    .where(_X.sandbox_id == sandbox_id)
                    .values(
                        in_flight=case((stale, 1), else_=_X.in_flight + 1),
                        busy_until=case(
                            (or_(stale, _X.busy_until < at(until)), at(until)),
                            else_=_X.busy_until,
                        ),
                        last_used=now,
                    )
                    .returning(_X.held_until)
                )
            ).one_or_none()
        return 0.0 if row is None else _remaining_s(row.held_until, now)

    async def end_use(self, sandbox_id: str) -> None:
        """End one use (the sandbox was used now)."""
        now = self._clock()
        async with self._db.write() as conn:
            await conn.execute(
                sandboxes.update()
                .where(_X.sandbox_id == sandbox_id)
                .values(
                    in_flight=case((_X.in_flight > 0, _X.in_flight - 1), else_=0),
                    busy_until=case((_X.in_flight <= 1, null()), else_=_X.busy_until),
                    last_used=now,
                )
            )

    async def hold_remaining_s(self, sandbox_id: str) -> float:
        """Seconds the live claim on the sandbox may still last (0: none)."""
        async with self._db.read() as conn:
            held = await conn.scalar(select(_X.held_until).where(_X.sandbox_id == sandbox_id))
        return _remaining_s(held, self._clock())

    async def claim_idle(self, sandbox_id: str, *, idle_s: float, hold_s: float) -> bool:
        """Claim to suspend: True when unused ``idle_s``, unclaimed, no use in flight."""
        now = self._clock()
        async with self._db.write() as conn:
            row = (
                await conn.execute(
                    sandboxes.update()
                    .where(
                        _X.sandbox_id == sandbox_id,
                        _claimable(now),
                        _X.last_used <= at(now - timedelta(seconds=idle_s)),
                    )
                    .values(held_until=now + timedelta(seconds=hold_s))
                    .returning(_X.sandbox_id)
                )
            ).one_or_none()
        return row is not None

    async def release(self, sandbox_id: str) -> None:
        """End a claim."""
        async with self._db.write() as conn:
            await conn.execute(
                sandboxes.update().where(_X.sandbox_id == sandbox_id).values(held_until=null())
            )

    async def claim_expired(
        self, *, scope: str, idle_s: float, hold_s: float, limit: int
    ) -> tuple[tuple[str, str], ...]:
        """Claim up to ``limit`` sandboxes of ``scope`` to destroy: unused for ``idle_s``,
        or whose session is gone or over (done, failed, cancelled); never one in use."""
        now = self._clock()
        live_session = exists().where(
            sessions.c.id == _X.session_id, sessions.c.status.in_(_LIVE_STATUSES)
        )
        ended = and_(_X.session_id.is_not(None), not_(live_session))
        due = (
            select(_X.sandbox_id)
            .where(
                _X.scope == scope,
                _claimable(now),
                or_(_X.last_used <= at(now - timedelta(seconds=idle_s)), ended),
            )
            .order_by(_X.last_used)
            .limit(limit)
        )
        async with self._db.write() as conn:
            rows = (
                await conn.execute(
                    sandboxes.update()
                    .where(_X.sandbox_id.in_(due.scalar_subquery()), _claimable(now))
                    .values(held_until=now + timedelta(seconds=hold_s))
                    .returning(_X.sandbox_id, _X.handle)
                )
            ).all()
        return tuple(sorted((row.sandbox_id, row.handle) for row in rows))

    async def forget(self, sandbox_id: str) -> None:
        """Drop the sandbox's row (it was destroyed)."""
        async with self._db.write() as conn:
            await conn.execute(delete(sandboxes).where(_X.sandbox_id == sandbox_id))

    async def known(self, sandbox_ids: Sequence[str]) -> frozenset[str]:
        """Which of ``sandbox_ids`` have a row."""
        if not sandbox_ids:
            return frozenset()
        async with self._db.read() as conn:
            found = await conn.scalars(
                select(_X.sandbox_id).where(_X.sandbox_id.in_(list(sandbox_ids)))
            )
            return frozenset(found)


def _claimable(now: datetime) -> ColumnElement[bool]:
    """No use in flight (or only expired ones), no live claim, and no background process
    running in it (a session's ``run_in_background`` command keeps its sandbox awake)."""
    idle = or_(_X.in_flight == 0, _X.busy_until.is_(None), _X.busy_until < at(now))
    unheld = or_(_X.held_until.is_(None), _X.held_until <= at(now))
    return and_(idle, unheld, not_(live_in(_X.sandbox_id)))


def _remaining_s(held_until: datetime | None, now: datetime) -> float:
    return 0.0 if held_until is None else max(0.0, (held_until - now).total_seconds())
