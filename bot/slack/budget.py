"""A per-workspace budget of Web API calls of one method: N calls per sliding window.

Slack rate-limits each method per workspace and app by tier (docs.slack.dev, "Rate
limits"): ``chat.update`` is Tier 3, about 50 calls a minute. Each status message is
already throttled to one update a second, but five sessions at once would still send
~300 a minute; the poster takes a turn from this budget before each ``chat.update``,
and since it takes the message's latest state only once its turn comes, updates that
wait are coalesced (the latest state wins, the final state is always sent).

Turns are granted first come, first served (``asyncio.Lock`` is fair), so one busy
session cannot starve another. The budget is per process: one poster per workspace
token and process.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

CHAT_UPDATE_PER_MINUTE = 45
"""Below Slack's Tier 3 (50/min for ``chat.update``), leaving room for other callers."""


class CallBudget:
    """At most ``calls`` turns in any ``window_s`` seconds.

    Raises:
        ValueError: ``calls`` or ``window_s`` is not positive.
    """

    def __init__(
        self,
        calls: int = CHAT_UPDATE_PER_MINUTE,
        window_s: float = 60.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if calls < 1 or not window_s > 0:
            raise ValueError(f"a budget needs calls ≥ 1 and window_s > 0, not {calls}/{window_s}")
        self.calls = calls
        self.window_s = window_s
        self._clock = clock
        self._granted: deque[float] = deque()
        self._turn = asyncio.Lock()

    async def take(self) -> None:
        """Wait until a call fits in the window, then count it."""
        async with self._turn:
            while True:
                now = self._clock()
                while self._granted and self._granted[0] <= now - self.window_s:
                    self._granted.popleft()
                if len(self._granted) < self.calls:
                    self._granted.append(now)
                    return
                await asyncio.sleep(self._granted[0] + self.window_s - now)
