"""Spending caps (§14): what a session and its org have spent, checked before each step.

The durable layer reads ``Spent`` from the model-call ledger before a step (only when a
cap is set) and passes it in ``Collaborators``; ``Limits.enforce`` compares it with the
caps. Costs are nano-dollars (see ``pricing``); the org's day is the current UTC day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Spent:
    """Nano-dollars spent so far by the session, and by its org since ``day_start(now)``."""

    session_nanousd: int = 0
    org_day_nanousd: int = 0


def day_start(now: datetime) -> datetime:
    """Midnight UTC of ``now``'s UTC day (the org cap's window starts there).

    >>> from datetime import timezone, timedelta
    >>> day_start(datetime(2026, 12, 2, 1, 30, tzinfo=timezone(timedelta(hours=3))))
    datetime.datetime(2026, 12, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    utc = now.astimezone(UTC)
    return datetime(utc.year, utc.month, utc.day, tzinfo=UTC)
