"""The full drill leaves its Redis database as it found it.

Its workers, its broker and the shared Slack budget write keys (Dramatiq's queues, acks
and heartbeats, the queue's liveness marker, the budget's window and marker). When the
drill ends, every key that was not there when it began is deleted, and the heartbeats its
workers added to Dramatiq's shared set are removed from it; keys that were there before
are left alone. Keys another program creates in the same database while the drill runs
cannot be told from the drill's: give the drill a scratch database (the README says so).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

HEARTBEATS = "dramatiq:__heartbeats__"
"""Dramatiq's sorted set of live workers (shared by every worker on the database)."""


@dataclass(frozen=True)
class RedisBefore:
    """What a Redis database held when the drill began: its keys, and the members of
    Dramatiq's heartbeat set."""

    url: str
    keys: frozenset[bytes]
    heartbeats: frozenset[bytes]

    @classmethod
    async def take(cls, url: str) -> RedisBefore:
        """Read the database's keys (``SCAN``, so a large one is not blocked).

        Raises:
            RedisError: Redis could not be reached.
        """
        client = aioredis.from_url(url)
        try:
            keys = frozenset([key async for key in client.scan_iter(count=1000)])
            heartbeats = await _heartbeats(client)
        finally:
            await client.aclose()
        return cls(url, keys, heartbeats)

    async def restore(self) -> int:
        """Delete the keys made since ``take`` and the heartbeats added since; returns how
        many keys were deleted. A Redis failure is logged, not raised (the drill's
        outcome stands)."""
        client = aioredis.from_url(self.url)
        try:
            now = [key async for key in client.scan_iter(count=1000)]
            made = [key for key in now if key not in self.keys]
            added = await _heartbeats(client) - self.heartbeats
            if added and HEARTBEATS.encode() in self.keys:
                await client.zrem(HEARTBEATS, *added)
            if made:
                await client.delete(*made)
            return len(made)
        except RedisError:
            log.exception("the drill's Redis keys could not be removed")
            return 0
        finally:
            await client.aclose()


async def _heartbeats(client: aioredis.Redis) -> frozenset[bytes]:
    """The members of Dramatiq's heartbeat set (worker ids)."""
    members = await client.zrange(HEARTBEATS, 0, -1)
    return frozenset(m for m in members if isinstance(m, bytes))
