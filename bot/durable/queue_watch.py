"""Whether the queue lost its wake-ups: Redis restarted (or was emptied) since the last look.

A Redis without persistence forgets every queued message when it restarts; the sessions
those wake-ups named stay runnable in the database, and the sweeper re-enqueues a
wake-up only once it is ``stale_after_s`` old (30 s). ``QueueWatch`` keeps a marker key
in the broker's Redis: a look that finds it missing (and sets it again) means the queue
was lost, and the sweeper then re-enqueues every runnable session nobody holds at once,
as after a start over an empty in-memory queue (issue #32.2: recover within a lease and
a sweep, not the stale age). At a deployment's first start the marker is missing too:
the sweep then re-enqueues what is runnable, which costs a few duplicate wake-ups (a
duplicate claims nothing).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

MARKER_KEY = "warroom:queue:alive"


class QueueWatch:
    """Looks for the marker key in ``redis_url`` (the broker's Redis)."""

    def __init__(self, redis_url: str) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.from_url(redis_url)

    async def lost(self) -> bool:
        """True when the marker was missing (Redis lost its data since the last look, or
        this is its first use); sets it. False while Redis cannot be reached: the look
        after it is back tells."""
        from redis import RedisError

        try:
            return bool(await self._redis.set(MARKER_KEY, "1", nx=True))
        except RedisError as exc:
            log.info("queue marker not readable (%s)", exc)
            return False

    async def aclose(self) -> None:
        """Close the Redis connection."""
        await self._redis.aclose()
