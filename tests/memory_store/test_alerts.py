"""The alert registry on both backends: recorded once, decided once, always accounted for."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from memory_store import AlertStore, Database, NewAlert
from tests.memory_store.session_support import ManualClock


def _alert(org: str, key: str, n: int, *, firing: bool = True, delivery: str = "") -> NewAlert:
    return NewAlert(
        org_id=org,
        source="alertmanager",
        delivery_id=delivery or f"d{n}",
        dedupe_key=key,
        firing=firing,
        title=f"{key} alert",
        alert_json="{}",
        channel_id="C1",
    )


@pytest.fixture
def org() -> str:
    return f"T{uuid.uuid4().hex[:12]}"


async def _decide(store: AlertStore, row: int, *, max_open: int = 5, burst_s: float = 60.0):  # type: ignore[no-untyped-def]
    return await store.decide(
        row, max_open=max_open, burst_window_s=burst_s, summary_channel_id="CSUM"
    )


async def test_a_retried_delivery_is_recorded_once(file_db: Database, org: str) -> None:
    store = AlertStore(file_db)
    first = await store.record([_alert(org, "k1", 1), _alert(org, "k2", 2)])
    again = await store.record([_alert(org, "k1", 1), _alert(org, "k2", 2)])
    assert len(first) == 2
    assert again == []
    assert (await store.tally(org)).received == 2


async def test_repeats_join_the_open_thread_and_a_burst_is_one_input(
    file_db: Database, org: str
) -> None:
    clock = ManualClock()
    store = AlertStore(file_db, clock=clock)
    # Given a first firing that starts a thread
    (row,) = await store.record([_alert(org, "k1", 1)])
    started = await _decide(store, row)
    assert started.kind == "start"
    assert started.thread is not None
    await store.opened(started.thread.id, thread_ts="100.1", session_id="s1")
    # When it fires again 10 s later (a burst) and then 2 minutes later
    clock.advance(10)
    (row2,) = await store.record([_alert(org, "k1", 2)])
    burst = await _decide(store, row2)
    clock.advance(120)
    (row3,) = await store.record([_alert(org, "k1", 3)])
    repeat = await _decide(store, row3)
    # Then both are in the same thread, only the later one is a new input, counted 3rd
    assert burst.kind == "burst"
    assert repeat.kind == "repeat"
    assert repeat.thread is not None
    assert repeat.thread.id == started.thread.id
    assert repeat.thread.firing_count == 3
    assert repeat.thread.thread_ts == "100.1"


async def test_a_resolve_closes_the_thread_and_a_later_firing_opens_a_new_one(
    file_db: Database, org: str
) -> None:
    store = AlertStore(file_db)
    (row,) = await store.record([_alert(org, "k1", 1)])
    started = await _decide(store, row)
    (row2,) = await store.record([_alert(org, "k1", 2, firing=False)])
    resolved = await _decide(store, row2)
    assert resolved.kind == "resolved"
    assert resolved.thread is not None
    assert started.thread is not None
    assert resolved.thread.id == started.thread.id
    assert await store.open_thread(org, "k1") is None
    (row3,) = await store.record([_alert(org, "k1", 3)])
    again = await _decide(store, row3)
    assert again.kind == "start"
    assert again.thread is not None
    assert again.thread.id != started.thread.id


async def test_over_the_cap_alerts_fold_into_one_summary_and_none_is_unaccounted(
    file_db: Database, org: str
) -> None:
    store = AlertStore(file_db)
    rows = await store.record([_alert(org, f"k{n % 8}", n) for n in range(40)])
    decisions = [await _decide(store, row, max_open=3) for row in rows]
    kinds = [d.kind for d in decisions]
    assert kinds.count("start") == 3
    summaries = {d.thread.id for d in decisions if d.kind == "folded" and d.thread}
    assert len(summaries) == 1
    assert sum(1 for d in decisions if d.created_thread and d.kind == "folded") == 1
    tally = await store.tally(org)
    assert (tally.received, tally.pending, tally.unaccounted) == (40, 0, 0)
    assert tally.in_threads == 40
    assert tally.open_session_threads == 3
    folded = await store.folded(next(iter(summaries)))
    assert sum(n for _, _, n, _ in folded) == len([k for k in kinds if k == "folded"])


async def test_concurrent_decisions_never_open_two_threads_for_a_key(
    file_db: Database, org: str
) -> None:
    store = AlertStore(file_db)
    rows = await store.record([_alert(org, "k1", n) for n in range(10)])
    decisions = await asyncio.gather(*(_decide(store, row) for row in rows))
    assert [d.kind for d in decisions].count("start") == 1
    assert len({d.thread.id for d in decisions if d.thread}) == 1


async def test_an_alert_decided_twice_is_acted_on_once(file_db: Database, org: str) -> None:
    store = AlertStore(file_db)
    (row,) = await store.record([_alert(org, "k1", 1)])
    first = await _decide(store, row)
    second = await _decide(store, row)
    assert first.kind == "start"
    assert second.kind == "taken"
    assert all(p.id != row for p in await store.pending())
