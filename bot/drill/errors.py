"""Errors of the drill.

The tree (under ``bot.errors.BotError``)::

    DrillError           the drill could not run (a fake, the app or a worker failed)
    └── DrillStalled     something it waited for did not happen in time (``what``)
"""

from __future__ import annotations

from bot.errors import BotError


class DrillError(BotError):
    """The drill could not run as scripted."""


class DrillStalled(DrillError):
    """A wait ran out: ``what`` did not happen within ``timeout_s``."""

    def __init__(self, what: str, timeout_s: float) -> None:
        super().__init__(f"timed out after {timeout_s:g} s waiting for {what}")
        self.what = what
        self.timeout_s = timeout_s
