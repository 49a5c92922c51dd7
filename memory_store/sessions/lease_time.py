"""Lease time: the current time as SQL, read from the database's clock on PostgreSQL.

Leases are granted and judged expired by one clock, the database's (``now()``, the
transaction's start), so a worker host whose clock runs ahead or behind can neither
take over a live step nor hold an expired one (issue #19, item 17). SQLite is
embedded: its clock is the host's, so there the store's clock is used, which also
lets tests move time on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Interval, bindparam, func, literal

from memory_store.sessions.tables import UTC_DATETIME, at

_INTERVAL = Interval()  # shared, as UTC_DATETIME is


@dataclass(frozen=True)
class LeaseTime:
    """``instant`` (the store's clock), or the database's ``now()`` when ``from_database``."""

    instant: datetime
    from_database: bool

    def now(self, plus_s: float = 0.0) -> ColumnElement[datetime]:
        """The current time plus ``plus_s`` seconds (may be negative), as a SQL value."""
        if not self.from_database:
            return at(self.instant + timedelta(seconds=plus_s))
        now: ColumnElement[datetime] = func.now(type_=UTC_DATETIME)
        if plus_s:
            return now + literal(timedelta(seconds=plus_s), _INTERVAL)
        return now

    @property
    def bound(self) -> datetime | None:
        """The value for ``BOUND_NOW`` in a precompiled statement: None (the database's
        ``now()``) when ``from_database``, else ``instant``."""
        return None if self.from_database else self.instant


BOUND_NOW: ColumnElement[datetime] = func.coalesce(
    bindparam("lease_now", type_=UTC_DATETIME), func.now(type_=UTC_DATETIME)
)
"""A lease time in a statement compiled once for PostgreSQL (``Database.precompiled``): the
bound ``lease_now`` (``LeaseTime.bound``), or the database's ``now()`` when that is NULL.
A wake-up's send time (``enqueued_at``) is written with it: the sweeps judge it by the same
clock (``sweeper``), whichever host's clock the caller has."""
