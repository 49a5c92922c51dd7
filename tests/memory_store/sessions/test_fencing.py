"""SessionStore fencing: one claim per token, zombies refused, crashes counted, stop."""

from __future__ import annotations

import asyncio

import pytest

from memory_store import (
    Claim,
    Continue,
    DatabaseUnavailable,
    Fenced,
    NewEvent,
    SessionStatus,
    SessionStore,
    Wait,
)
from memory_store.sessions import inbox
from tests.memory_store.session_support import ManualClock, open_session

LEASE_S = 15.0


async def _claim(store: SessionStore, session_id: str, token: str, worker: str) -> Claim:
    claim = await store.claim(session_id, token, worker_id=worker, lease_s=LEASE_S)
    assert claim is not None
    return claim


async def test_four_concurrent_copies_of_one_token_yield_exactly_one_claim(
    store: SessionStore,
) -> None:
    session_id, token = await open_session(store)
    results = await asyncio.gather(
        *(store.claim(session_id, token, worker_id=f"w{n}", lease_s=LEASE_S) for n in range(4))
    )
    claims = [c for c in results if c is not None]
    assert len(claims) == 1
    session = await store.get(session_id)
    assert session is not None
    assert (session.epoch, session.lease_owner) == (1, claims[0].worker_id)


async def test_a_duplicate_delivery_while_the_lease_is_live_claims_nothing(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id, token = await open_session(store)
    await _claim(store, session_id, token, "w1")
    clock.advance(LEASE_S - 1)
    assert await store.claim(session_id, token, worker_id="w2", lease_s=LEASE_S) is None


async def test_a_zombie_workers_late_save_and_commit_are_refused_and_write_nothing(
    store: SessionStore, clock: ManualClock
) -> None:
    # Given worker 1's claim whose lease ran out, and worker 2 claiming the same token
    session_id, token = await open_session(store)
    zombie = await _claim(store, session_id, token, "w1")
    clock.advance(LEASE_S + 1)
    live = await _claim(store, session_id, token, "w2")
    await store.save(live, checkpoint='{"by": "w2"}', events=[NewEvent("tool_intent")])
    # When worker 1 wakes up and writes
    with pytest.raises(Fenced) as fenced:
        await store.save(zombie, checkpoint='{"by": "w1"}', events=[NewEvent("tool_result")])
    with pytest.raises(Fenced):
        await store.commit(
            zombie, checkpoint='{"by": "w1"}', outcome=Continue(), events=[NewEvent("x")]
        )
    with pytest.raises(Fenced):
        await store.renew(zombie, lease_s=LEASE_S)
    # Then nothing of worker 1's landed, and worker 2 still holds the step
    session = await store.get(session_id)
    assert (fenced.value.session_id, fenced.value.epoch) == (session_id, zombie.epoch)
    assert session is not None
    assert (session.checkpoint, session.pending_token, session.lease_owner) == (
        '{"by": "w2"}',
        token,
        "w2",
    )
    assert [(e.kind, e.epoch) for e in await store.events(session_id)] == [
        ("tool_intent", live.epoch)
    ]
    assert live.epoch == zombie.epoch + 1


async def test_reclaiming_a_token_that_never_committed_counts_a_crash(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id, token = await open_session(store)
    first = await _claim(store, session_id, token, "w1")
    clock.advance(LEASE_S + 1)
    second = await _claim(store, session_id, token, "w2")
    clock.advance(LEASE_S + 1)
    third = await _claim(store, session_id, token, "w3")
    next_token = await store.commit(third, checkpoint="{}", outcome=Continue())
    assert next_token is not None
    after_commit = await _claim(store, session_id, next_token, "w4")
    assert [c.crash_count for c in (first, second, third, after_commit)] == [0, 1, 2, 0]


async def test_renew_extends_the_lease_so_a_duplicate_cannot_take_over(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token, "w1")
    clock.advance(LEASE_S - 1)
    await store.renew(claim, lease_s=LEASE_S)
    clock.advance(LEASE_S - 1)
    assert await store.claim(session_id, token, worker_id="w2", lease_s=LEASE_S) is None
    assert await store.commit(claim, checkpoint="{}", outcome=Continue()) is not None


async def test_committing_the_same_claim_twice_is_refused(store: SessionStore) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token, "w1")
    await store.commit(claim, checkpoint="{}", outcome=Wait(), events=[NewEvent("answer")])
    with pytest.raises(Fenced):
        await store.commit(claim, checkpoint="{}", outcome=Wait(), events=[NewEvent("answer")])
    assert [e.kind for e in await store.events(session_id)] == ["answer"]


async def test_cancel_fences_the_running_step_and_returns_its_checkpoint(
    store: SessionStore,
) -> None:
    # Given a step mid-tool
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token, "w1")
    await store.save(claim, checkpoint='{"in_flight": "toolu_9"}', events=[NewEvent("tool_intent")])
    # When someone says stop
    cancelled = await store.cancel(session_id, actor="U7")
    # Then the step's writes are refused and the session is cancelled, with a notice
    assert cancelled is not None
    assert (cancelled.was_status, cancelled.checkpoint) == (
        SessionStatus.RUNNING,
        '{"in_flight": "toolu_9"}',
    )
    with pytest.raises(Fenced):
        await store.commit(claim, checkpoint="{}", outcome=Continue())
    session = await store.get(session_id)
    assert session is not None
    assert (session.status, session.pending_token, session.epoch) == (
        SessionStatus.CANCELLED,
        None,
        cancelled.epoch,
    )
    events = await store.events(session_id)
    assert [e.kind for e in events] == ["tool_intent", "notice"]
    assert '"by": "U7"' in events[1].payload_json


async def test_cancel_of_an_ended_or_unknown_session_returns_none(store: SessionStore) -> None:
    session_id, _ = await open_session(store)
    assert await store.cancel(session_id) is not None
    assert await store.cancel(session_id) is None
    assert await store.cancel("no-such-session") is None


async def test_a_reply_after_stop_revives_the_session(store: SessionStore) -> None:
    session_id, _ = await open_session(store)
    await store.cancel(session_id)
    token = await store.add_input(session_id, user_id="U1", text="go on", source_ts="9.1")
    assert token is not None
    claim = await _claim(store, session_id, token, "w1")
    assert [i.text for i in claim.inbox] == ["hi", "go on"]


async def _connection_lost(*_: object, **__: object) -> None:
    """Stands for the database connection lost between a claim's write and its read.

    Nothing outside can time a drop between two statements of one call, so the inbox
    read is replaced by this (the one patch here): it fails as a dropped connection
    does (``OSError``, which the store reports as ``DatabaseUnavailable``).
    """
    raise OSError("connection reset by peer")


async def test_a_claim_whose_read_fails_claims_nothing(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a session with input, whose claim reads its inbox after taking the step
    session_id, token = await open_session(store)
    # When the connection is lost after the claiming write
    with monkeypatch.context() as patch:
        patch.setattr(inbox, "read", _connection_lost)
        with pytest.raises(DatabaseUnavailable):
            await store.claim(session_id, token, worker_id="w1", lease_s=15.0)
    # Then the step was not taken: its message's retry claims it, as a first attempt
    again = await store.claim(session_id, token, worker_id="w1", lease_s=15.0)
    assert again is not None
    assert again.crash_count == 0


async def test_a_commit_then_claim_whose_read_fails_writes_nothing(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a claimed step, and a reply that arrived while it ran
    session_id, token = await open_session(store)
    held = await store.claim(session_id, token, worker_id="w1", lease_s=15.0)
    assert held is not None
    await store.add_input(session_id, user_id="U1", text="more", source_ts="2.2")
    # When the connection is lost after the commit, as the next claim reads that reply
    with monkeypatch.context() as patch:
        patch.setattr(inbox, "read", _connection_lost)
        with pytest.raises(DatabaseUnavailable):
            await store.commit_then_claim(
                held, checkpoint='{"v": 1}', lease_s=15.0, consumed_inbox_upto=held.inbox_upto
            )
    # Then nothing was committed: the step is still held as it was
    session = await store.get(session_id)
    assert session is not None
    assert (session.epoch, session.checkpoint) == (held.epoch, held.checkpoint)
