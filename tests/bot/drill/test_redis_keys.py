"""The full drill leaves its Redis database as it found it (``bot.drill.redis_keys``)."""

from __future__ import annotations

import pytest
import redis

from bot.drill.redis_keys import HEARTBEATS, RedisBefore

pytestmark = pytest.mark.redis


async def test_keys_made_after_the_snapshot_go_and_keys_from_before_stay(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    try:
        # Given a database holding a key and a live worker's heartbeat
        client.set("theirs", "1")
        client.zadd(HEARTBEATS, {"their-worker": 1})
        before = await RedisBefore.take(redis_url)
        # When the drill's workers add queues, acks, markers and heartbeats of their own
        client.hset("dramatiq:warroom.msgs", "m1", "advance")
        client.sadd("dramatiq:__acks__.w2.warroom", "m1")
        client.set("warroom:queue:alive", "1")
        client.zadd(HEARTBEATS, {"drill-worker": 2})
        client.zadd(HEARTBEATS, {"their-worker": 3})  # a live worker beats meanwhile
        # Then restoring deletes what the drill made and keeps what was there
        assert await before.restore() == 3
        assert sorted(client.keys()) == sorted([b"theirs", HEARTBEATS.encode()])
        assert client.zrange(HEARTBEATS, 0, -1) == [b"their-worker"]
    finally:
        client.flushdb()
        client.close()


async def test_a_heartbeat_set_the_drill_made_goes_whole(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    try:
        before = await RedisBefore.take(redis_url)
        client.zadd(HEARTBEATS, {"drill-worker": 1})
        assert await before.restore() == 1
        assert client.keys() == []
    finally:
        client.flushdb()
        client.close()
