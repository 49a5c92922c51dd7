"""Whether a worker runs a session's next step itself rather than through the queue.

For ``carry_on_s`` from a message's first step, a step that continues is followed by the
next one in the same worker: its commit claims it (``SessionStore.commit_then_claim``),
with no queue round trip between (docs/architecture.md §5). A stopping worker carries on
no further: it hands the next step to the queue, where a worker that stays takes it.

The decision is taken when a step commits, not when it starts: a SIGTERM that arrives
during a step (a model call, a Bash command) then hands the session back after that step,
instead of carrying it into one more model call that holds the stop for its whole length
(issue #31: 4 of 6 SIGTERMs to a worker's process group did).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["NEVER", "CarryOn"]


@dataclass(frozen=True)
class CarryOn:
    """The carry-on window of one queue message.

    Attributes:
        window_s: how long from ``started`` steps may be carried on (0: never).
        started: when the message's first step started (``time.monotonic()``, seconds).
        stopping: whether the worker is stopping now (read at each decision).
    """

    window_s: float
    started: float
    stopping: Callable[[], bool]

    @classmethod
    def from_now(cls, window_s: float, stopping: Callable[[], bool]) -> CarryOn:
        """The window of a message whose first step starts now."""
        return cls(window_s, time.monotonic(), stopping)

    def allows(self) -> bool:
        """Whether the step committing now may claim the next one for this worker:
        within the window and the worker is not stopping (call it at the commit)."""
        if self.window_s <= 0 or time.monotonic() - self.started >= self.window_s:
            return False
        return not self.stopping()


NEVER = CarryOn(0.0, 0.0, lambda: True)
"""A window that allows nothing: every next step goes through the queue."""
