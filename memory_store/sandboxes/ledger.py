"""``SandboxLedgerStore``: sandboxes' uses and claims in the database, shared by every
worker (``sandbox_client.SandboxLedger``'s contract, checked by its conformance tests).

Every call is one short transaction; a claim is one ``UPDATE … WHERE <no use in
flight, unclaimed, idle> RETURNING``, so two processes never both claim a sandbox and
a claim never lands while a use is counted (PostgreSQL row locks; SQLite's single
writer).

Each use is also counted under the process that makes it (``sandbox_uses``), so that
a use of a process that died stops counting as soon as the death is known
(``take_abandoned``: ``memory_store.sessions.liveness.dead_owners``), not only once its
``busy_until`` passed (a command's timeout: minutes); and so that a sandbox whose
every user died is adopted by a live process of its scope, which suspends it when idle
and destroys it when it stops (issue #26: a SIGKILLed ``serve``'s jails outlived every
later restart and clean stop).
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, delete, exists, not_, null, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from memory_store.clock import Clock, utc_now
from memory_store.db import Database
from memory_store.sandboxes.tables import sandbox_uses, sandboxes
from memory_store.sessions.liveness import dead_owners, process_host
from memory_store.sessions.tables import at, sessions
from memory_store.tasks.store import live_in
from memory_store.upsert import insert

_X = sandboxes.c
_U = sandbox_uses.c
_LIVE_STATUSES = ("running", "waiting")


SUSPECTED_FOR_S = 30.0
"""How long an owner judged only by its liveness lock must have held none, seen by this
process's looks, before its uses are forgotten: a live worker whose lock's connection
dropped takes it again within seconds (``OwnerLiveness``: a check a second)."""


def process_owner() -> str:
    """An owner id for this process, ``<process_host()>:<pid>:<random>`` (judged by PID)."""
    return f"{process_host()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class SandboxLedgerStore:
    """The shared sandbox ledger over ``Database`` (migrated); times from ``clock``.

    Args:
        owner: this process's id in ``sandbox_uses`` (``<host>:<pid>:<random>``, ending
            in ``+live`` only when the process holds its liveness lock:
            ``memory_store.OwnerLiveness``); default ``process_owner()``.
    """

    def __init__(
        self,
        db: Database,
        *,
        clock: Clock = utc_now,
        owner: str | None = None,
        suspected_for_s: float = SUSPECTED_FOR_S,
    ) -> None:
        self._db = db
        self._clock = clock
        self.owner = owner or process_owner()
        self._suspected_for_s = suspected_for_s
        self._suspects: dict[str, float] = {}  # owner -> when first seen without its lock

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
            await conn.execute(delete(sandbox_uses).where(_U.sandbox_id == sandbox_id))
            await conn.execute(
                sandbox_uses.insert().values(sandbox_id=sandbox_id, owner=self.owner, in_flight=0)
            )

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
                    .returning(_X.held_until, _X.in_flight)
                )
            ).one_or_none()
            if row is None:
                return 0.0
            if row.in_flight == 1:  # every earlier use ended or expired: theirs are void
                await conn.execute(
                    sandbox_uses.update()
                    .where(_U.sandbox_id == sandbox_id, _U.owner != self.owner, _U.in_flight > 0)
                    .values(in_flight=0)
                )
            await self._count(conn, sandbox_id, 1 if row.in_flight == 1 else None)
        return _remaining_s(row.held_until, now)

    async def _count(self, conn: AsyncConnection, sandbox_id: str, reset: int | None) -> None:
        """Add one use to this process's row (``reset``: set it to that instead)."""
        stmt = insert(sandbox_uses, is_postgres=self._db.is_postgres).values(
            sandbox_id=sandbox_id, owner=self.owner, in_flight=1
        )
        counted = _U.in_flight + 1 if reset is None else reset
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["sandbox_id", "owner"], set_={"in_flight": counted}
            )
        )

    async def end_use(self, sandbox_id: str) -> None:
        """End one use (the sandbox was used now)."""
        now = self._clock()
        async with self._db.write() as conn:
            counted = (
                await conn.execute(
                    sandbox_uses.update()
                    .where(_U.sandbox_id == sandbox_id, _U.owner == self.owner, _U.in_flight > 0)
                    .values(in_flight=_U.in_flight - 1)
                    .returning(_U.owner)
                )
            ).one_or_none()
            values: dict[str, Any] = {"last_used": now}
            if counted is not None:  # else its use was voided (expired, its owner judged dead)
                values["in_flight"] = case((_X.in_flight > 0, _X.in_flight - 1), else_=0)
                values["busy_until"] = case((_X.in_flight <= 1, null()), else_=_X.busy_until)
            await conn.execute(
                sandboxes.update().where(_X.sandbox_id == sandbox_id).values(**values)
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
            await conn.execute(delete(sandbox_uses).where(_U.sandbox_id == sandbox_id))

    async def take_abandoned(self, *, scope: str) -> tuple[tuple[str, str], ...]:
        """Forget the uses of ``scope``'s sandboxes by processes known to be dead
        (``liveness.dead_owners``): their count no longer blocks a claim. Returns
        ``(sandbox_id, handle_json)`` of those no live process knows any more, which
        this process now owns (it has a row for each): the caller suspends them when
        idle and destroys them when it stops.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        of_scope = select(_X.sandbox_id).where(_X.scope == scope).scalar_subquery()
        async with self._db.write() as conn:
            owners = (
                await conn.scalars(
                    select(_U.owner)
                    .distinct()
                    .where(_U.sandbox_id.in_(of_scope), _U.owner != self.owner)
                )
            ).all()
            if not owners:
                return ()
            judged = await dead_owners(conn, owners, is_postgres=self._db.is_postgres)
            dead = sorted(judged[0] | self._confirmed(judged[1]))
            if not dead:
                return ()
            # only what this statement deleted is subtracted: two processes looking at
            # once never forget one use twice
            gone = (
                await conn.execute(
                    delete(sandbox_uses)
                    .where(_U.sandbox_id.in_(of_scope), _U.owner.in_(dead))
                    .returning(_U.sandbox_id, _U.in_flight)
                )
            ).all()
            theirs: Counter[str] = Counter()
            for row in gone:
                theirs[row.sandbox_id] += row.in_flight
            for sandbox_id, uses in theirs.items():
                if uses:
                    await conn.execute(
                        sandboxes.update()
                        .where(_X.sandbox_id == sandbox_id)
                        .values(
                            in_flight=case((_X.in_flight > uses, _X.in_flight - uses), else_=0),
                            busy_until=case((_X.in_flight <= uses, null()), else_=_X.busy_until),
                        )
                    )
            touched = list(theirs)
            known = select(_U.sandbox_id).where(_U.sandbox_id == _X.sandbox_id)
            orphaned = (
                await conn.execute(
                    select(_X.sandbox_id, _X.handle).where(
                        _X.sandbox_id.in_(touched), not_(exists(known))
                    )
                )
            ).all()
            for row in orphaned:
                await conn.execute(
                    sandbox_uses.insert().values(
                        sandbox_id=row.sandbox_id, owner=self.owner, in_flight=0
                    )
                )
        return tuple(sorted((row.sandbox_id, row.handle) for row in orphaned))

    def _confirmed(self, suspected: frozenset[str]) -> frozenset[str]:
        """The suspects this process has seen without their lock for ``suspected_for_s``
        (on every look since the first); the others' first sighting is noted."""
        now = time.monotonic()
        self._suspects = {o: self._suspects.get(o, now) for o in suspected}
        return frozenset(
            o for o, since in self._suspects.items() if now - since >= self._suspected_for_s
        )

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
