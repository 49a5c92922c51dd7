"""A per-workspace budget of Web API calls of one method: N calls per sliding window.

Slack rate-limits each method per workspace and app by tier (docs.slack.dev, "Rate
limits"): ``chat.update`` is Tier 3, about 50 calls a minute. Each status message is
already throttled to one update a second, but five sessions at once would still send
~300 a minute; the poster takes a turn from this budget before each ``chat.update``,
and since it takes the message's latest state only once its turn comes, updates that
wait are coalesced (the latest state wins, the final state is always sent).

Turns are granted first come, first served (``asyncio.Lock`` is fair), so one busy
session cannot starve another. ``CallBudget`` is one process's; ``SharedCallBudget`` is the
whole deployment's, through Redis, for when several worker processes post for one workspace.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

logger = logging.getLogger(__name__)

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

    @property
    def contended(self) -> bool:
        """Whether a caller waits in ``take`` now (the window is full for this process)."""
        return self._turn.locked()

    async def take_now(self) -> bool:
        """Count a call if one fits in the window now, without waiting: True then. False
        when the window is full, or callers already wait for their turn (they go first):
        for a caller that must not wait on Slack's budget (a durable step, issue #32)."""
        if self._turn.locked():
            return False
        now = self._clock()
        while self._granted and self._granted[0] <= now - self.window_s:
            self._granted.popleft()
        if len(self._granted) < self.calls:
            self._granted.append(now)
            return True
        return False

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


KNOWN_FOR_S = 86_400
"""How long a window's marker is kept after its last turn (a day)."""
AFTER_RESET_CALLS = 5
"""Turns granted in the first window after the shared window was lost (a Redis restart):
Slack's own window may hold up to ``CHAT_UPDATE_PER_MINUTE`` calls of the last minute, and
45 + 5 stays within Tier 3's 50 (issue #32.1: 181 HTTP 429s after two restarts)."""

# KEYS[1]: the window's sorted set; KEYS[2]: a marker that the window is known (kept a day).
# ARGV: calls, window in ms, a unique member, turns to grant when the window was lost, the
# marker's life in seconds.
# Returns 0 when a turn was taken, else the milliseconds until the oldest turn leaves.
# The sorted set expires a window after its last turn, the marker only after a day: a
# window missing while its marker is there is an idle one; both missing (Redis restarted,
# or the first use in a day) and the window's history is unknown, so it starts as if full
# but for ARGV[4] turns.
_TAKE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local window = tonumber(ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 0 then
  local unknown = tonumber(ARGV[1]) - tonumber(ARGV[4])
  for i = 1, unknown do
    redis.call('ZADD', KEYS[1], now, 'unknown:' .. now .. ':' .. i)
  end
  redis.call('PEXPIRE', KEYS[1], window)
end
redis.call('SET', KEYS[2], '1', 'EX', ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"""


class SharedCallBudget(CallBudget):
    """A ``CallBudget`` that every process of the deployment shares, through Redis.

    With ``REDIS_URL``, several worker processes post for one workspace: each keeping its
    own budget would let N of them send N times Slack's limit. The window is a Redis sorted
    set per workspace and method, trimmed and counted in one server-side script on the
    server's clock (hosts' clocks need not agree). Within a process, turns are still taken
    in order (the inherited lock), so waiting updates coalesce as before. A window Redis
    lost (a restart) starts nearly full (``after_reset_calls`` turns), and while Redis
    cannot be reached this process takes turns from its own budget of that size.

    Args:
        redis_url: the deployment's Redis.
        key: names the workspace and method, e.g. ``chat.update:<team id>``.
        after_reset_calls: turns in a window whose history was lost.

    Raises:
        ValueError: ``calls`` or ``window_s`` is not positive.
    """

    def __init__(
        self,
        redis_url: str,
        key: str,
        calls: int = CHAT_UPDATE_PER_MINUTE,
        window_s: float = 60.0,
        *,
        after_reset_calls: int = AFTER_RESET_CALLS,
    ) -> None:
        super().__init__(calls, window_s)
        import redis.asyncio as aioredis

        self._redis = aioredis.from_url(redis_url)
        self._key = f"warroom:budget:{key}"
        self._script = self._redis.register_script(_TAKE)
        self._after_reset = max(0, min(after_reset_calls, calls))
        self._offline = CallBudget(max(1, self._after_reset), window_s)

    async def try_take(self) -> float:
        """Take a turn if the deployment-wide window has one: 0.0, else the seconds until
        the next one frees.

        Raises:
            redis.RedisError: Redis could not be reached.
        """
        member = f"{time.time_ns()}:{id(self)}"
        args: list[str | int] = [
            self.calls,
            int(self.window_s * 1000),
            member,
            self._after_reset,
            KNOWN_FOR_S,
        ]
        wait_ms = int(await self._script(keys=[self._key, f"{self._key}:known"], args=args))
        return wait_ms / 1000

    async def take_now(self) -> bool:
        """``CallBudget.take_now`` over the deployment-wide window (this process's own
        while Redis cannot be reached)."""
        from redis import RedisError

        if self._turn.locked():
            return False
        try:
            return await self.try_take() == 0
        except RedisError as exc:
            logger.warning("shared %s budget unreachable (%s): using a local one", self._key, exc)
            return await self._offline.take_now()

    async def take(self) -> None:
        """Wait until a call fits in the deployment-wide window, then count it."""
        from redis import RedisError

        async with self._turn:
            while True:
                try:
                    wait_s = await self.try_take()
                except RedisError as exc:
                    logger.warning(
                        "shared %s budget unreachable (%s): using a local one", self._key, exc
                    )
                    await self._offline.take()
                    return
                if wait_s == 0:
                    return
                await asyncio.sleep(wait_s)  # the window's next free turn

    async def known_empty(self) -> None:
        """Record that this window has no lost history: the workspace is new (no process
        posted for it before, as the drill's fake one), so its first window starts empty
        instead of nearly full. Sets the marker a turn sets (kept a day).

        Raises:
            redis.RedisError: Redis could not be reached.
        """
        await self._redis.set(f"{self._key}:known", "1", ex=KNOWN_FOR_S)

    async def aclose(self) -> None:
        """Close the Redis connection."""
        await self._redis.aclose()
