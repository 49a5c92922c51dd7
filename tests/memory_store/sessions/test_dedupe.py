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


async def test_several_keys_are_first_sightings_together_only_if_none_was_seen(
    dedupe: InboundDedupe,
) -> None:
    event, twin = _key(), _key()
    assert await dedupe.first_sightings([event, twin])
    # A retry of the event: both keys seen
    assert not await dedupe.first_sightings([event, twin])
    # The other delivery of the same message (a new event id, the same ts key)
    assert not await dedupe.first_sightings([_key(), twin])


async def test_several_keys_renew_expired_sightings_as_one_key_does(
    dedupe: InboundDedupe, clock: ManualClock
) -> None:
    old, live = _key(), _key()
    await dedupe.first_sighting(old, ttl_s=10)
    clock.advance(11)
    assert await dedupe.first_sightings([old, _key()], ttl_s=10)
    await dedupe.first_sighting(live, ttl_s=1000)
    assert not await dedupe.first_sightings([_key(), live], ttl_s=1000)


async def test_eight_concurrent_deliveries_of_one_event_get_one_first_sighting_of_both_keys(
    dedupe: InboundDedupe,
) -> None:
    keys = [_key(), _key()]
    seen = await asyncio.gather(*(dedupe.first_sightings(keys) for _ in range(8)))
    assert seen.count(True) == 1


async def test_several_keys_must_be_distinct_and_not_none(dedupe: InboundDedupe) -> None:
    key = _key()
    with pytest.raises(ValueError, match="distinct"):
        await dedupe.first_sightings([key, key])
    with pytest.raises(ValueError, match="distinct"):
        await dedupe.first_sightings([])


async def test_seen_tells_a_live_sighting_and_records_nothing(
    dedupe: InboundDedupe, clock: ManualClock
) -> None:
    key = _key()
    assert not await dedupe.seen(key)
    assert await dedupe.first_sighting(key, ttl_s=600)  # seen() recorded nothing
    assert await dedupe.seen(key)
    clock.advance(601)
    assert not await dedupe.seen(key)
