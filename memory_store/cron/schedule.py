"""Cron expressions: checking one, and its next time (croniter does the parsing).

Expressions have Claude Code's 5 fields (minute hour day-of-month month day-of-week) in
the server's local time, which Warroom takes to be UTC (its containers run in UTC). A
6-field expression (croniter's seconds field last: ``* * * * * */5``) is a test-only
seconds mode: only accepted when the caller allows it (``WARROOM_CRON_SECONDS``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from croniter import croniter

SAMPLED_FIRINGS = 50
"""Firings looked at when checking an expression's shortest interval."""


class CronExpressionError(ValueError):
    """An expression that is not a valid cron expression, or fires too often."""


def check(expr: str, *, now: datetime, min_interval_s: float, seconds: bool = False) -> str:
    """``expr`` normalised (fields separated by single spaces), checked.

    Raises:
        CronExpressionError: not 5 fields (6 with ``seconds``), not a valid expression,
            it never fires, or two of its next ``SAMPLED_FIRINGS`` firings are closer
            than ``min_interval_s`` seconds (the message says which).

    >>> check("*/15  * * * *", now=datetime(2026, 1, 1, tzinfo=UTC), min_interval_s=60)
    '*/15 * * * *'
    """
    fields = expr.split()
    allowed = (5, 6) if seconds else (5,)
    if len(fields) not in allowed:
        raise CronExpressionError(
            f"Invalid cron expression '{expr}'. Expected 5 fields: M H DoM Mon DoW."
        )
    normal = " ".join(fields)
    if not croniter.is_valid(normal):
        raise CronExpressionError(f"Invalid cron expression '{expr}'")
    try:
        it = croniter(normal, now.astimezone(UTC))
        times = [it.get_next(datetime) for _ in range(SAMPLED_FIRINGS)]
    except Exception as e:  # croniter: CroniterBadDateError (no such date, e.g. 31 2)
        raise CronExpressionError(f"Cron expression '{expr}' never fires") from e
    gaps = [(b - a).total_seconds() for a, b in zip([now, *times], times, strict=False)][1:]
    if gaps and min(gaps) < min_interval_s:
        raise CronExpressionError(
            f"Cron expression '{expr}' fires every {min(gaps):g} seconds; "
            f"the shortest interval allowed is {min_interval_s:g} seconds"
        )
    return normal


def next_due(expr: str, after: datetime) -> datetime:
    """The first time ``expr`` (already ``check``-ed) fires strictly after ``after``,
    as an aware UTC datetime."""
    due: datetime = croniter(expr, after.astimezone(UTC)).get_next(datetime)
    return due.astimezone(UTC)
