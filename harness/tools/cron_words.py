"""How the Cron tools write a schedule and a time, in Claude Code 2.1.336's manner.

Captured from Claude Code 2.1.336 (CronCreate, CronList): ``*/15 * * * *`` is "Every 15
minutes", ``30 14 * * *`` "Every day at 2:30 PM", ``0 9 * * 1`` "Every Monday at 9:00 AM",
and a next run is written ``Dec 5 2:02am``. Warroom writes the common shapes the same way
and any other expression as it is; times are UTC (the expressions are UTC).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_NUMBER = re.compile(r"\A\d{1,2}\Z")
_EVERY = re.compile(r"\A\*/(\d{1,2})\Z")


def clock(hour: int, minute: int) -> str:
    """``2:30 PM``, ``12:00 AM``.

    >>> clock(14, 30), clock(0, 0), clock(9, 5)
    ('2:30 PM', '12:00 AM', '9:05 AM')
    """
    half = "AM" if hour < 12 else "PM"
    return f"{(hour % 12) or 12}:{minute:02d} {half}"


def describe(cron: str) -> str:
    """A 5-field expression in words where its shape is a common one, else as given.

    >>> describe("*/15 * * * *"), describe("30 14 * * *"), describe("0 9 * * 1")
    ('Every 15 minutes', 'Every day at 2:30 PM', 'Every Monday at 9:00 AM')
    >>> describe("* * * * *"), describe("0 */2 * * *"), describe("0 9 * * 1-5")
    ('Every minute', 'Every 2 hours', 'Every weekday at 9:00 AM')
    >>> describe("5 4 1 * *")
    '5 4 1 * *'
    """
    fields = cron.split()
    if len(fields) != 5:
        return cron
    minute, hour, dom, month, dow = fields
    if (dom, month) != ("*", "*"):
        return cron
    if (minute, hour, dow) == ("*", "*", "*"):
        return "Every minute"
    if (every := _EVERY.match(minute)) and (hour, dow) == ("*", "*"):
        n = int(every.group(1))
        return "Every minute" if n == 1 else f"Every {n} minutes"
    if minute == "0" and (every := _EVERY.match(hour)) and dow == "*":
        n = int(every.group(1))
        return "Every hour" if n == 1 else f"Every {n} hours"
    if not (_NUMBER.match(minute) and _NUMBER.match(hour)):
        return cron
    at = clock(int(hour), int(minute))
    if dow == "*":
        return f"Every day at {at}"
    if dow == "1-5":
        return f"Every weekday at {at}"
    if _NUMBER.match(dow) and int(dow) <= 7:
        return f"Every {_DAYS[int(dow) % 7]} at {at}"
    return cron


def next_run(at: datetime) -> str:
    """A next run as Claude Code writes it: ``Dec 5 2:02am`` (here in UTC).

    >>> next_run(datetime(2026, 12, 5, 14, 29, tzinfo=UTC))
    'Dec 5 2:29pm'
    """
    at = at.astimezone(UTC)
    half = "am" if at.hour < 12 else "pm"
    return f"{at:%b} {at.day} {(at.hour % 12) or 12}:{at.minute:02d}{half}"
