"""``HostStore``: worker hosts' heartbeats and stops, and where a session's steps should go.

A session's sandbox is named by the handle in its checkpoint (``Checkpoint.sandbox``:
JSON holding a ``sandbox_id``, also a subagent's, whose sandbox is its parent's); the
``sandboxes`` ledger row of that id says which scope (host and state directory) holds
it, and the ``worker_hosts`` row of that scope says which queue reaches the host and
whether it lives. ``queue_of`` answers this in one statement per call.

Every call is one short transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, cast, func, not_, or_, select, type_coerce
from sqlalchemy.dialects.postgresql import JSON

from memory_store.clock import Clock, utc_now
from memory_store.db import Database
from memory_store.hosts.tables import worker_hosts
from memory_store.sandboxes.tables import sandboxes
from memory_store.sessions.tables import at, sessions
from memory_store.upsert import insert

_H = worker_hosts.c
_S = sessions.c
_X = sandboxes.c


@dataclass(frozen=True)
class HostWakeup:
    """A session a stopping host hands back: its id and the token to enqueue."""

    session_id: str
    token: str


class HostStore:
    """Worker hosts over ``Database`` (migrated); times from ``clock``."""

    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        self._db = db
        self._clock = clock

    async def start(self, host_id: str, *, queue: str, scope: str) -> str | None:
        """Register the host as live (a restart clears its stop). Returns the scope another
        live process of the same ``host_id`` registered if it differs from ``scope`` (two
        hosts share an identity: a misconfiguration to report), else None.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        async with self._db.write() as conn:
            previous = (
                await conn.execute(
                    select(_H.scope, _H.beat_at, _H.stopping_at).where(_H.host_id == host_id)
                )
            ).one_or_none()
            values = {"queue": queue, "scope": scope, "beat_at": now, "stopping_at": None}
            await conn.execute(
                insert(worker_hosts, is_postgres=self._db.is_postgres)
                .values(host_id=host_id, started_at=now, **values)
                .on_conflict_do_update(index_elements=["host_id"], set_=values)
            )
        if previous is None or previous.scope == scope or previous.stopping_at is not None:
            return None
        return str(previous.scope)

    async def beat(self, host_id: str) -> None:
        """The host is alive now (leaves a stop in place: a stopping host stays stopping).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        async with self._db.write() as conn:
            await conn.execute(
                worker_hosts.update().where(_H.host_id == host_id).values(beat_at=self._clock())
            )

    async def stop(self, host_id: str) -> None:
        """The host stops: no step is routed to it from now on.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        async with self._db.write() as conn:
            await conn.execute(
                worker_hosts.update()
                .where(_H.host_id == host_id, _H.stopping_at.is_(None))
                .values(stopping_at=self._clock())
            )

    async def queue_of(self, session_id: str, *, dead_after_s: float) -> str | None:
        """The queue of the live host holding the session's sandbox, or None: the session
        has no sandbox, the ledger does not know it, or its host stopped or has not
        beaten for ``dead_after_s`` seconds.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        cutoff = self._clock() - timedelta(seconds=dead_after_s)
        stmt = (
            select(_H.queue)
            .select_from(
                sessions.join(sandboxes, _X.sandbox_id == self._sandbox_id()).join(
                    worker_hosts, _H.scope == _X.scope
                )
            )
            .where(_S.id == session_id, self._live(cutoff))
            .order_by(_H.beat_at.desc())
            .limit(1)
        )
        async with self._db.read() as conn:
            queue = await conn.scalar(stmt)
        return None if queue is None else str(queue)

    async def waiting_on(self, scope: str) -> tuple[HostWakeup, ...]:
        """The running sessions nobody holds whose sandbox is of ``scope``, with their
        pending token: what a stopping host hands back to the shared queue.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        stmt = (
            select(_S.id, _S.pending_token)
            .select_from(sessions.join(sandboxes, _X.sandbox_id == self._sandbox_id()))
            .where(
                _X.scope == scope,
                _S.status == "running",
                _S.pending_token.is_not(None),
                or_(_S.lease_until.is_(None), _S.lease_until < at(now)),
            )
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return tuple(HostWakeup(row.id, row.pending_token) for row in rows)

    async def live_hosts(self, *, dead_after_s: float) -> tuple[str, ...]:
        """The ids of the hosts alive now (beaten within ``dead_after_s``, not stopping).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        cutoff = self._clock() - timedelta(seconds=dead_after_s)
        async with self._db.read() as conn:
            found = await conn.scalars(
                select(_H.host_id).where(self._live(cutoff)).order_by(_H.host_id)
            )
            return tuple(found)

    async def gone_scopes(self, *, dead_after_s: float) -> tuple[str, ...]:
        """The sandbox scopes of hosts that stopped or have not beaten for
        ``dead_after_s`` seconds (and that no live host has): their sandboxes are out of
        every live host's reach.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        cutoff = self._clock() - timedelta(seconds=dead_after_s)
        live = select(_H.scope).where(self._live(cutoff))
        async with self._db.read() as conn:
            found = await conn.scalars(
                select(_H.scope)
                .where(not_(self._live(cutoff)), _H.scope.not_in(live))
                .distinct()
                .order_by(_H.scope)
            )
            return tuple(found)

    def _live(self, cutoff: datetime) -> ColumnElement[bool]:
        return and_(_H.stopping_at.is_(None), _H.beat_at >= at(cutoff))

    def _sandbox_id(self) -> ColumnElement[str]:
        """SQL: the ``sandbox_id`` of the handle in the session's checkpoint (NULL: none).
        The handle is JSON stored as a string inside the checkpoint's JSON."""
        if self._db.is_postgres:
            handle = cast(_S.checkpoint, JSON)["sandbox"].astext
            return type_coerce(cast(handle, JSON)["sandbox_id"].astext, _X.sandbox_id.type)
        handle_text = func.json_extract(_S.checkpoint, "$.sandbox")
        return type_coerce(func.json_extract(handle_text, "$.sandbox_id"), _X.sandbox_id.type)
