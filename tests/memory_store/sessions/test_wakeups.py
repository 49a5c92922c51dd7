"""Timed wake-ups and system inputs: a waiting session woken by the sweeper at its
``wake_at`` with its note in the inbox, once; ``notify`` recording an input once.

The PostgreSQL database is shared by the test run, so assertions look only at the
sessions each test made.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory_store import (
    SessionStatus,
    SessionStore,
    SweepResult,
    Wait,
    Wakeup,
)
from tests.memory_store.session_support import ManualClock, claimed, open_session

LEASE_S = 15.0
STALE_S = 60.0


async def _sweep(store: SessionStore) -> SweepResult:
    return await store.sweep(max_crashes=3, stale_after_s=STALE_S)


def _woken(result: SweepResult, session_id: str) -> list[Wakeup]:
    return [w for w in result.woken if w.session_id == session_id]


async def _park(
    store: SessionStore, clock: ManualClock, *, wake_in_s: float, until_s: float
) -> str:
    session_id, token = await open_session(store)
    await store.commit(
        await claimed(store, session_id, token),
        checkpoint="{}",
        outcome=Wait(
            until=clock.now + timedelta(seconds=until_s),
            wake_at=clock.now + timedelta(seconds=wake_in_s),
            wake_note="check the rollout",
        ),
        consumed_inbox_upto=1,
    )
    return session_id


async def test_a_waiting_session_is_woken_once_at_its_time_with_its_note_in_the_inbox(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id = await _park(store, clock, wake_in_s=30, until_s=3600)
    early = await _sweep(store)
    clock.advance(31)
    due = await _sweep(store)
    again = await _sweep(store)
    assert _woken(early, session_id) == []
    [wakeup] = _woken(due, session_id)
    assert _woken(again, session_id) == []
    session = await store.get(session_id)
    assert session is not None
    assert session.status is SessionStatus.RUNNING
    claim = await claimed(store, session_id, wakeup.token)
    assert [(i.kind, i.user_id, i.text) for i in claim.inbox] == [("wake", "", "check the rollout")]


async def test_a_wake_due_before_the_waits_deadline_wakes_rather_than_ends_the_session(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id = await _park(store, clock, wake_in_s=30, until_s=60)
    clock.advance(120)  # both have passed by the time the sweeper runs
    result = await _sweep(store)
    assert len(_woken(result, session_id)) == 1
    assert session_id not in result.expired_waits


async def test_a_reply_before_the_wake_runs_the_session_and_its_next_wait_rewrites_the_wake(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id = await _park(store, clock, wake_in_s=30, until_s=3600)
    token = await store.add_input(session_id, user_id="U2", text="status?", source_ts="2.0")
    assert token is not None
    clock.advance(31)
    assert _woken(await _sweep(store), session_id) == []  # running: not woken under a step
    claim = await claimed(store, session_id, token)
    await store.commit(claim, checkpoint="{}", outcome=Wait(until=clock.now + timedelta(hours=1)))
    clock.advance(3000)
    assert _woken(await _sweep(store), session_id) == []  # the new wait has no wake-up


async def test_notify_records_a_system_input_once_per_source_key_and_wakes_the_session(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id = await _park(store, clock, wake_in_s=3600, until_s=7200)
    first = await store.notify(session_id, kind="notification", text="done", source_key="bg:t1")
    second = await store.notify(session_id, kind="notification", text="done", source_key="bg:t1")
    assert first is not None
    assert second is None
    claim = await claimed(store, session_id, first)
    assert [(i.kind, i.text) for i in claim.inbox] == [("notification", "done")]


@pytest.mark.parametrize(
    ("kind", "source_key"), [("user", "k"), ("", "k"), ("x" * 17, "k"), ("note", "k" * 65)]
)
async def test_notify_refuses_a_user_kind_or_oversized_fields(
    store: SessionStore, kind: str, source_key: str
) -> None:
    session_id, _ = await open_session(store)
    with pytest.raises(ValueError, match=r"kind|source_key"):
        await store.notify(session_id, kind=kind, text="t", source_key=source_key)


def test_a_wait_needs_both_a_wake_time_and_a_note_or_neither() -> None:
    at = ManualClock().now
    with pytest.raises(ValueError, match="both wake_at and wake_note"):
        Wait(wake_at=at)
    with pytest.raises(ValueError, match="both wake_at and wake_note"):
        Wait(wake_note="x")
