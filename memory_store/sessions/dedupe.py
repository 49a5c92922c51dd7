"""Inbound Slack event dedupe: has this key been seen (within its time to live)?

Slack retries an event up to 3 times over ~5 minutes and one @mention arrives as both
``app_mention`` and ``message`` (docs/architecture.md §9), so the bot asks once per
``event_id`` and once per ``"<channel>:<ts>"``. One atomic ``INSERT … ON CONFLICT``
decides, so concurrent deliveries of one event get exactly one ``True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import bindparam, delete, select

from memory_store.clock import Clock, utc_now
from memory_store.db import Database
from memory_store.sessions.tables import UtcDateTime, inbound_sightings
from memory_store.upsert import insert

_D = inbound_sightings.c


class InboundDedupe:
    """Sightings of inbound event keys over ``Database``; one statement per call."""

    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        """Use ``db`` (migrated) and ``clock`` (returns aware UTC ``datetime``s)."""
        self._db = db
        self._clock = clock

    async def first_sighting(self, key: str, *, ttl_s: float = 3600) -> bool:
        """True the first time ``key`` is seen, False for every repeat within ``ttl_s``.

        A key whose sighting expired (older than its ``ttl_s``) counts as new again.
        Slack: dedupe ``event_id`` for at least 10 minutes (retries come up to ~5 min
        later); the default keeps an hour.

        Raises:
            ValueError: ``ttl_s`` is not positive.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        now = self._clock()
        expires = now + timedelta(seconds=ttl_s)
        values = insert(inbound_sightings, is_postgres=self._db.is_postgres).values(
            key=key, seen_at=now, expires_at=expires
        )
        stmt = values.on_conflict_do_update(
            index_elements=["key"],
            set_={"seen_at": now, "expires_at": expires},
            where=_D.expires_at <= now,
        ).returning(_D.key)
        writing = self._db.autocommit() if self._db.is_postgres else self._db.write()
        async with writing as conn:  # one statement: PostgreSQL needs no transaction
            return (await conn.execute(stmt)).one_or_none() is not None

    async def first_sightings(self, keys: Sequence[str], *, ttl_s: float = 3600) -> bool:
        """Record every key of ``keys`` in ONE statement; True iff none was seen before.

        Each key is recorded as ``first_sighting`` would (a live sighting is kept, an
        expired one renewed), all at once: on PostgreSQL one autocommit statement, a
        single round trip, so an inbound event's dedupe costs one database call
        however many keys it has.

        Raises:
            ValueError: ``ttl_s`` is not positive, or no key, or a repeated key.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        if not keys or len(set(keys)) != len(keys):
            raise ValueError(f"keys must be distinct and not empty: {keys!r}")
        now = self._clock()
        expires = now + timedelta(seconds=ttl_s)
        rows = [{"key": k, "seen_at": now, "expires_at": expires} for k in keys]
        # An executemany with RETURNING: SQLAlchemy sends it as one multi-row INSERT
        # ("insertmanyvalues"), and the statement, unlike a literal multi-row VALUES,
        # is compiled once and cached.
        stmt = _sighting_upsert(self._db.is_postgres)
        writing = self._db.autocommit() if self._db.is_postgres else self._db.write()
        async with writing as conn:
            return len((await conn.execute(stmt, rows)).all()) == len(keys)

    async def seen(self, key: str) -> bool:
        """Whether ``key`` has a live sighting (recorded and not yet expired); records nothing.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if self._db.is_postgres:  # on the ack path of a new thread: the driver's connection
            statement = self._db.precompiled(_live_sighting())
            args = statement.args({"key": key, "now": self._clock()})
            async with self._db.driver() as raw:
                return await raw.fetchrow(statement.sql, *args) is not None
        query = select(_D.key).where(_D.key == key, _D.expires_at > self._clock())
        async with self._db.read() as conn:
            return (await conn.execute(query)).one_or_none() is not None

    async def purge_sightings(self, older_than: datetime | None = None) -> int:
        """Delete sightings that expired at or before ``older_than`` (default: now).

        Returns:
            How many were deleted.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        cutoff = older_than or self._clock()
        async with self._db.write() as conn:
            result = await conn.execute(delete(inbound_sightings).where(_D.expires_at <= cutoff))
        return result.rowcount


@cache
def _live_sighting() -> Any:
    """``seen``'s query, built once (bound parameters only)."""
    now = bindparam("now", type_=UtcDateTime())
    return select(_D.key).where(_D.key == bindparam("key"), _D.expires_at > now)


@cache
def _sighting_upsert(is_postgres: bool) -> Any:
    """``INSERT … ON CONFLICT (key) DO UPDATE … WHERE expired RETURNING key``, built once."""
    new = insert(inbound_sightings, is_postgres=is_postgres)
    return new.on_conflict_do_update(
        index_elements=["key"],
        set_={"seen_at": new.excluded.seen_at, "expires_at": new.excluded.expires_at},
        where=_D.expires_at <= new.excluded.seen_at,
    ).returning(_D.key)
