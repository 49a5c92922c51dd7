"""Where the store's times come from: an injectable clock of aware UTC ``datetime``s."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC ``datetime``."""


def utc_now() -> datetime:
    """The current time as an aware UTC ``datetime`` (the default clock)."""
    return datetime.now(UTC)
