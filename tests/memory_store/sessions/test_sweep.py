"""The recovery sweep: lost steps re-enqueued, crash loops failed, waits ended, one at a time.

The PostgreSQL database is shared by the test run, so assertions look only at the
sessions each test made.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from sqlalchemy import text

from memory_store import (
    Claim,
    Continue,
    Database,
    Fenced,
    SessionStatus,
    SessionStore,
    SweepResult,
    Wait,
    Wakeup,
)
from memory_store.sessions.sweeper import SWEEPER_LOCK_KEY
from tests.memory_store.session_support import ManualClock, open_session

LEASE_S = 15.0
STALE_S = 60.0


async def _claim(store: SessionStore, session_id: str, token: str) -> Claim:
    claim = await store.claim(session_id, token, worker_id="w", lease_s=LEASE_S)
    assert claim is not None
    return claim


async def _sweep(store: SessionStore, max_crashes: int = 3) -> SweepResult:
    return await store.sweep(max_crashes=max_crashes, stale_after_s=STALE_S)


def _requeued(result: SweepResult, session_id: str) -> list[Wakeup]:
    return [w for w in result.requeue if w.session_id == session_id]


async def test_sweep_requeues_a_session_whose_lease_expired_with_its_existing_token_once(
    store: SessionStore, clock: ManualClock
) -> None:
    # Given a claimed step whose worker died
    session_id, token = await open_session(store)
    await _claim(store, session_id, token)
    clock.advance(LEASE_S + 1)
    # When the sweeper runs twice
    first = await _sweep(store)
    second = await _sweep(store)
    # Then the first sweep hands the same token out again, the second does not repeat it
    assert _requeued(first, session_id) == [Wakeup(session_id, token)]
    assert _requeued(second, session_id) == []
    assert await store.claim(session_id, token, worker_id="w2", lease_s=LEASE_S) is not None


async def test_sweep_leaves_a_session_with_a_live_lease_alone_however_old_its_token(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    for _ in range(5):
        clock.advance(LEASE_S - 1)
        await store.renew(claim, lease_s=LEASE_S)
    result = await _sweep(store, max_crashes=1)
    assert _requeued(result, session_id) == []
    assert session_id not in result.failed


async def test_sweep_requeues_a_never_claimed_token_only_once_it_is_stale(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id, token = await open_session(store)
    clock.advance(STALE_S - 1)
    fresh = await _sweep(store)
    clock.advance(2)
    stale = await _sweep(store)
    assert _requeued(fresh, session_id) == []
    assert _requeued(stale, session_id) == [Wakeup(session_id, token)]


async def test_sweep_fails_a_session_whose_step_crashed_its_worker_max_crashes_times(
    store: SessionStore, clock: ManualClock
) -> None:
    # Given a step that took down its worker twice (max_crashes = 2)
    session_id, token = await open_session(store)
    await _claim(store, session_id, token)
    clock.advance(LEASE_S + 1)
    after_one = await _sweep(store, max_crashes=2)
    last = await _claim(store, session_id, token)
    clock.advance(LEASE_S + 1)
    # When the sweeper runs
    after_two = await _sweep(store, max_crashes=2)
    # Then the first crash only re-enqueued it; the second failed it, with a notice
    assert session_id not in after_one.failed
    assert _requeued(after_one, session_id) == [Wakeup(session_id, token)]
    assert session_id in after_two.failed
    assert _requeued(after_two, session_id) == []
    session = await store.get(session_id)
    assert session is not None
    assert (session.status, session.pending_token) == (SessionStatus.FAILED, None)
    notice = (await store.events(session_id))[-1]
    assert notice.kind == "notice"
    assert json.loads(notice.payload_json)["notice"] == "crash_loop"
    with pytest.raises(Fenced):
        await store.commit(last, checkpoint="{}", outcome=Continue())


async def test_sweep_ends_a_wait_past_its_deadline_and_keeps_one_without_deadline(
    store: SessionStore, clock: ManualClock
) -> None:
    timed, timed_token = await open_session(store)
    endless, endless_token = await open_session(store)
    await store.commit(
        await _claim(store, timed, timed_token),
        checkpoint="{}",
        outcome=Wait(clock.now + timedelta(seconds=60)),
        consumed_inbox_upto=1,
    )
    await store.commit(
        await _claim(store, endless, endless_token),
        checkpoint="{}",
        outcome=Wait(),
        consumed_inbox_upto=1,
    )
    before = await _sweep(store)
    clock.advance(61)
    after = await _sweep(store)
    assert timed not in before.expired_waits
    assert timed in after.expired_waits
    assert endless not in after.expired_waits
    done, waiting = await store.get(timed), await store.get(endless)
    assert done is not None
    assert waiting is not None
    assert (done.status, waiting.status) == (SessionStatus.DONE, SessionStatus.WAITING)
    assert json.loads((await store.events(timed))[-1].payload_json)["notice"] == "wait_expired"


async def test_sweep_refuses_bad_arguments(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="max_crashes"):
        await store.sweep(max_crashes=0, stale_after_s=STALE_S)
    with pytest.raises(ValueError, match="stale_after_s"):
        await store.sweep(max_crashes=3, stale_after_s=0)


async def test_two_concurrent_sweeps_requeue_each_session_once(
    store: SessionStore, clock: ManualClock
) -> None:
    opened = [await open_session(store) for _ in range(3)]
    for session_id, token in opened:
        await _claim(store, session_id, token)
    clock.advance(LEASE_S + 1)
    results = await asyncio.gather(_sweep(store), _sweep(store))
    for session_id, token in opened:
        both = _requeued(results[0], session_id) + _requeued(results[1], session_id)
        assert both == [Wakeup(session_id, token)]


@pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_a_sweep_does_nothing_while_another_holds_the_sweeper_lock(
    file_db: Database, store: SessionStore, clock: ManualClock
) -> None:
    # Given a lost step, and another sweeper holding the advisory lock
    session_id, token = await open_session(store)
    await _claim(store, session_id, token)
    clock.advance(LEASE_S + 1)
    async with file_db.write() as other:
        await other.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": SWEEPER_LOCK_KEY})
        # When this sweep runs meanwhile
        blocked = await _sweep(store)
    # Then it did nothing, and the next sweep (lock free) does the work
    assert blocked == SweepResult()
    assert _requeued(await _sweep(store), session_id) == [Wakeup(session_id, token)]
