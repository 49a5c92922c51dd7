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

from sqlalchemy import ColumnElement, Interval, func, literal

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
