"""A worker running its session's next step itself: ``commit_then_claim`` commits a step
and claims the next in one transaction, fenced like any claim, recovered like any claim.

The PostgreSQL database is shared by the test run, so assertions look only at the
sessions each test made.
"""

from __future__ import annotations

import pytest

from memory_store import Continue, Fenced, SessionStore, Wakeup
from tests.memory_store.session_support import ManualClock, claimed, open_session

LEASE_S = 15.0


async def test_the_next_step_is_claimed_with_the_commit_and_the_old_claim_is_fenced(
    store: SessionStore,
) -> None:
    session_id, token = await open_session(store)
    first = await claimed(store, session_id, token)
    second = await store.commit_then_claim(
        first, checkpoint='{"step":1}', lease_s=LEASE_S, consumed_inbox_upto=first.inbox_upto
    )
    assert second.token != first.token
    assert second.epoch == first.epoch + 1
    assert (second.worker_id, second.checkpoint, second.inbox) == ("w", '{"step":1}', ())
    assert second.crash_count == 0
    with pytest.raises(Fenced):  # the step it followed cannot commit again
        await store.commit(first, checkpoint="{}", outcome=Continue())
    # nobody else can claim the step it holds, and it commits like any claim
    assert await store.claim(session_id, second.token, worker_id="x", lease_s=LEASE_S) is None
    assert await store.commit(second, checkpoint="{}", outcome=Continue()) is not None


async def test_a_reply_that_arrived_during_the_step_is_in_the_next_claims_inbox(
    store: SessionStore,
) -> None:
    session_id, token = await open_session(store)
    first = await claimed(store, session_id, token)
    assert await store.add_input(session_id, user_id="U2", text="db?", source_ts="2.0") is None
    second = await store.commit_then_claim(
        first, checkpoint="{}", lease_s=LEASE_S, consumed_inbox_upto=first.inbox_upto
    )
    assert [i.text for i in second.inbox] == ["db?"]


async def test_a_carried_on_step_whose_worker_died_is_handed_out_again_after_its_lease(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id, token = await open_session(store)
    second = await store.commit_then_claim(
        await claimed(store, session_id, token), checkpoint="{}", lease_s=LEASE_S
    )
    alive = await store.sweep(max_crashes=3, stale_after_s=60)
    clock.advance(LEASE_S + 1)
    dead = await store.sweep(max_crashes=3, stale_after_s=60)
    assert [w for w in alive.requeue if w.session_id == session_id] == []
    assert [w for w in dead.requeue if w.session_id == session_id] == [
        Wakeup(session_id, second.token)
    ]
    again = await claimed(store, session_id, second.token, worker="w2")
    assert again.crash_count == 1  # the re-claim counts as another attempt of that step
