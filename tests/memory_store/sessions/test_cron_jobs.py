"""Cron jobs: made, listed and deleted per session; fired by the sweeper once per due
time (two sweepers racing included), re-armed at the next time, deleted by ``stop``
and the session's end. Each test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from memory_store import Database, SessionStatus, SessionStore, SweepResult, Wait
from memory_store.cron.store import CronJobs, CronLimitReached
from tests.memory_store.session_support import ManualClock, claimed, open_session

EVERY_15_MIN = "*/15 * * * *"


async def _sweep(store: SessionStore) -> SweepResult:
    return await store.sweep(max_crashes=3, stale_after_s=60.0)


async def _park(store: SessionStore, clock: ManualClock, session_id: str, token: str) -> None:
    claim = await claimed(store, session_id, token)
    await store.commit(
        claim,
        checkpoint="{}",
        outcome=Wait(until=clock.now + timedelta(days=7)),
        consumed_inbox_upto=claim.inbox_upto,
    )


async def _waiting_with_job(
    store: SessionStore, jobs: CronJobs, clock: ManualClock, *, recurring: bool = True
) -> str:
    session_id, token = await open_session(store)
    await _park(store, clock, session_id, token)
    await jobs.create(
        session_id, "job1", cron=EVERY_15_MIN, prompt="re-check", recurring=recurring, max_jobs=5
    )
    return session_id


def _to_next_quarter(clock: ManualClock) -> None:
    """Move the clock just past the next quarter hour."""
    minute = clock.now.minute
    nxt = clock.now.replace(minute=0, second=0, microsecond=0) + timedelta(
        minutes=(minute // 15 + 1) * 15, seconds=1
    )
    clock.advance((nxt - clock.now).total_seconds())


@pytest.fixture
def jobs(file_db: Database, clock: ManualClock) -> CronJobs:
    """Cron jobs on each backend, on the test's clock."""
    return CronJobs(file_db, clock=clock)


async def test_a_job_fires_once_per_due_time_and_is_re_armed_for_the_next(
    store: SessionStore, jobs: CronJobs, clock: ManualClock
) -> None:
    session_id = await _waiting_with_job(store, jobs, clock)
    [job] = await jobs.list(session_id)
    assert job.next_due_at > clock.now
    assert [w.session_id for w in (await _sweep(store)).woken] == []
    for turn in range(3):
        _to_next_quarter(clock)
        fired = [w for w in (await _sweep(store)).woken if w.session_id == session_id]
        again = [w for w in (await _sweep(store)).woken if w.session_id == session_id]
        assert len(fired) == 1, f"turn {turn}"
        assert again == [], f"turn {turn}"
        claim = await claimed(store, session_id, fired[0].token)
        assert [(i.kind, i.text) for i in claim.inbox][-1:] == [("wake", "re-check")]
        [rearmed] = await jobs.list(session_id)
        assert clock.now < rearmed.next_due_at <= clock.now + timedelta(minutes=15)
        await store.commit(
            claim,
            checkpoint="{}",
            outcome=Wait(until=clock.now + timedelta(days=7)),
            consumed_inbox_upto=claim.inbox_upto,
        )


async def test_two_sweepers_racing_fire_a_due_time_once(
    store: SessionStore,
    jobs: CronJobs,
    clock: ManualClock,
    database_url: str | None,
    tmp_path: Path,
) -> None:
    session_id = await _waiting_with_job(store, jobs, clock)
    other_db = Database.from_url(database_url, data_dir=tmp_path)  # a second process's pool
    other = SessionStore(other_db, clock=clock, lease_clock=clock)
    _to_next_quarter(clock)
    try:
        results = await asyncio.gather(*(_sweep(s) for s in (store, other, store, other)))
    finally:
        await other_db.dispose()
    fired = [w for r in results for w in r.woken if w.session_id == session_id]
    assert len(fired) == 1
    assert len([i for i in await store.inbox(session_id) if i.kind == "wake"]) == 1


async def test_a_one_shot_job_fires_once_and_is_deleted(
    store: SessionStore, jobs: CronJobs, clock: ManualClock
) -> None:
    session_id = await _waiting_with_job(store, jobs, clock, recurring=False)
    _to_next_quarter(clock)
    assert len([w for w in (await _sweep(store)).woken if w.session_id == session_id]) == 1
    assert await jobs.list(session_id) == []


async def test_a_job_of_a_running_session_waits_for_it_to_wait(
    store: SessionStore, jobs: CronJobs, clock: ManualClock
) -> None:
    session_id, token = await open_session(store)
    await jobs.create(session_id, "j", cron=EVERY_15_MIN, prompt="p", recurring=True, max_jobs=5)
    _to_next_quarter(clock)
    assert [w for w in (await _sweep(store)).woken if w.session_id == session_id] == []
    await _park(store, clock, session_id, token)
    assert len([w for w in (await _sweep(store)).woken if w.session_id == session_id]) == 1


async def test_stop_and_the_sessions_end_delete_its_jobs(
    store: SessionStore, jobs: CronJobs, clock: ManualClock
) -> None:
    stopped = await _waiting_with_job(store, jobs, clock)
    assert await store.cancel(stopped, actor="U1") is not None
    assert await jobs.list(stopped) == []
    _to_next_quarter(clock)  # the job's next due time is then ~15 minutes away
    ended, token = await open_session(store)
    claim = await claimed(store, ended, token)
    await store.commit(
        claim,
        checkpoint="{}",
        outcome=Wait(until=clock.now + timedelta(seconds=30)),
        consumed_inbox_upto=claim.inbox_upto,
    )
    await jobs.create(ended, "j", cron=EVERY_15_MIN, prompt="p", recurring=True, max_jobs=5)
    clock.advance(60)  # the wait expires before the job is due
    result = await _sweep(store)
    assert ended in result.expired_waits
    assert (await store.get(ended)).status is SessionStatus.DONE  # type: ignore[union-attr]
    await _sweep(store)
    assert await jobs.list(ended) == []


async def test_jobs_are_capped_per_session_listed_and_deleted_by_id(
    store: SessionStore, jobs: CronJobs, clock: ManualClock
) -> None:
    session_id, _ = await open_session(store)
    for n in range(2):
        await jobs.create(
            session_id, f"j{n}", cron="0 * * * *", prompt=f"p{n}", recurring=True, max_jobs=2
        )
    again = await jobs.create(
        session_id, "j0", cron="0 * * * *", prompt="x", recurring=True, max_jobs=2
    )
    assert again.prompt == "p0", "a retried call finds its job"
    with pytest.raises(CronLimitReached):
        await jobs.create(
            session_id, "j2", cron="0 * * * *", prompt="p", recurring=True, max_jobs=2
        )
    assert [j.job_id for j in await jobs.list(session_id)] == ["j0", "j1"]
    assert await jobs.delete(session_id, "j0") is True
    assert await jobs.delete(session_id, "j0") is False
    assert await jobs.delete("another-session", "j1") is False
    assert [j.job_id for j in await jobs.list(session_id)] == ["j1"]
