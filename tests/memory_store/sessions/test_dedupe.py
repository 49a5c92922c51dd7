"""Inbound event dedupe: first sighting once, even under concurrency; expiry (both backends)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from memory_store import Database, InboundDedupe
from tests.memory_store.session_support import ManualClock


@pytest.fixture
def dedupe(file_db: Database, clock: ManualClock) -> InboundDedupe:
    return InboundDedupe(file_db, clock=clock)


def _key() -> str:
    return f"Ev{uuid.uuid4().hex[:10]}"


async def test_a_key_is_a_first_sighting_only_once(dedupe: InboundDedupe) -> None:
    key = _key()
    assert await dedupe.first_sighting(key)
    assert not await dedupe.first_sighting(key)
    assert await dedupe.first_sighting(_key())


async def test_eight_concurrent_deliveries_of_one_event_get_exactly_one_first_sighting(
    dedupe: InboundDedupe,
) -> None:
    key = _key()
    seen = await asyncio.gather(*(dedupe.first_sighting(key) for _ in range(8)))
    assert sorted(seen) == [False] * 7 + [True]


async def test_a_key_counts_as_new_again_after_its_ttl(
    dedupe: InboundDedupe, clock: ManualClock
) -> None:
    key = _key()
    assert await dedupe.first_sighting(key, ttl_s=600)
    clock.advance(599)
    assert not await dedupe.first_sighting(key, ttl_s=600)
    clock.advance(2)
    assert await dedupe.first_sighting(key, ttl_s=600)
    assert not await dedupe.first_sighting(key, ttl_s=600)


async def test_purge_deletes_only_expired_sightings(
    dedupe: InboundDedupe, clock: ManualClock
) -> None:
    short, long = _key(), _key()
    await dedupe.first_sighting(short, ttl_s=10)
    await dedupe.first_sighting(long, ttl_s=1000)
    clock.advance(11)
    assert await dedupe.purge_sightings(clock.now) >= 1
    # Back at the start, an unpurged ``short`` would still be live; it is gone instead
    clock.advance(-11)
    assert await dedupe.first_sighting(short, ttl_s=10)
    assert not await dedupe.first_sighting(long, ttl_s=1000)


async def test_first_sighting_rejects_a_non_positive_ttl(dedupe: InboundDedupe) -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        await dedupe.first_sighting(_key(), ttl_s=0)
