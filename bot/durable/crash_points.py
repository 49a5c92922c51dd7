"""Crash-test hooks: where the durable driver tells a test build how far a step got.

The crash tests (``WARROOM_CRASH_AT``, see ``bot.durable.actors.crash_from``) kill a
worker at a named point of a step and check that another worker recovers the real
outcome. The driver reports each point to one ``CrashHooks`` object and knows nothing
else of them; in production the crasher is ``no_crash`` and every call does nothing.

``DURING_POST`` is the one point the driver cannot see itself: Slack has accepted the
answer and the outbox has not recorded its ``ts`` yet. The driver marks the answer's
outbox key with ``posting`` while it posts, and the outbox calls
``before_post_recorded`` for every key it is about to record.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


class CrashPoint(StrEnum):
    """Deterministic kill points of a step, in the order a step reaches them."""

    BEFORE_MODEL = "before_model"
    AFTER_MODEL = "after_model"
    AFTER_TOOL = "after_tool"
    AFTER_PARK = "after_park"
    """A step that parks the session (mid-turn, or an answer after which it waits for a
    wake-up or background work) has shown it parked; it is not committed yet."""
    AFTER_COMMIT = "after_commit"
    DURING_POST = "during_post"


class Crasher(Protocol):
    """Called at each crash point; a test build kills the process there.

    ``step`` is the number of steps the session had taken before this one
    (``Checkpoint.steps``); ``attempt`` is ``Claim.crash_count`` (0 on a first try).
    """

    def __call__(
        self, point_reached: CrashPoint, *, session_id: str, step: int, attempt: int
    ) -> None: ...


def no_crash(point_reached: CrashPoint, *, session_id: str, step: int, attempt: int) -> None:
    """The production crasher: does nothing."""


@dataclass(frozen=True)
class _Posting:
    session_id: str
    step: int
    attempt: int


@dataclass
class CrashHooks:
    """The driver's one door to the crash tests.

    Attributes:
        crash: called at each point reached (``no_crash`` in production).
    """

    crash: Crasher = no_crash
    _posting: dict[str, _Posting] = field(default_factory=dict, init=False, repr=False)

    def reached(self, point: CrashPoint, *, session_id: str, step: int, attempt: int) -> None:
        """The step of ``session_id`` (``step`` steps taken, ``attempt``) got to ``point``."""
        if self.crash is not no_crash:
            self.crash(point, session_id=session_id, step=step, attempt=attempt)

    @contextlib.contextmanager
    def posting(self, key: str, *, session_id: str, step: int, attempt: int) -> Iterator[None]:
        """While the answer with outbox ``key`` is posted (``DURING_POST`` may be reached)."""
        self._posting[key] = _Posting(session_id, step, attempt)
        try:
            yield
        finally:
            del self._posting[key]

    def before_post_recorded(self, key: str) -> None:
        """The outbox is about to record Slack's ``ts`` of the post ``key``.

        Reaches ``DURING_POST`` for an answer being posted: its key, or a key that extends
        it (a long answer's later parts, ``<key>/<n>``); other posts (status messages) are
        ignored.
        """
        for answer_key, posting in self._posting.items():
            if key == answer_key or key.startswith(answer_key + "/"):
                self.reached(
                    CrashPoint.DURING_POST,
                    session_id=posting.session_id,
                    step=posting.step,
                    attempt=posting.attempt,
                )
