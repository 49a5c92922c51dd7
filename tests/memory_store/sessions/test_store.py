"""SessionStore: opening, the inbox, claiming and committing steps (both backends)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from memory_store import (
    Claim,
    Continue,
    Finish,
    NewEvent,
    SessionKey,
    SessionNotFound,
    SessionStatus,
    SessionStore,
    TokenUsage,
    Wait,
)
from tests.memory_store.session_support import ManualClock, new_key, open_session

LEASE_S = 15.0


async def _claim(store: SessionStore, session_id: str, token: str, worker: str = "w1") -> Claim:
    claim = await store.claim(session_id, token, worker_id=worker, lease_s=LEASE_S)
    assert claim is not None
    return claim


async def test_open_creates_a_runnable_session_with_the_text_in_its_inbox(
    store: SessionStore,
) -> None:
    key = new_key()
    opened = await store.open_or_join(
        key, requester_id="U1", initial_checkpoint="{}", text="look at pods", source_ts="1.1"
    )
    session = await store.get(opened.session_id)
    assert opened.created
    assert session is not None
    assert session.status is SessionStatus.RUNNING
    assert session.pending_token == opened.token
    assert session.key == key
    assert await store.find(key) == session
    assert [i.text for i in await store.inbox(opened.session_id)] == ["look at pods"]


async def test_open_of_an_existing_thread_joins_it_and_enqueues_nothing_while_a_step_is_pending(
    store: SessionStore,
) -> None:
    key = new_key()
    first = await store.open_or_join(
        key, requester_id="U1", initial_checkpoint="{}", text="one", source_ts="1.1"
    )
    second = await store.open_or_join(
        key, requester_id="U2", initial_checkpoint="{}", text="two", source_ts="1.2"
    )
    assert (second.session_id, second.created, second.token) == (first.session_id, False, None)
    items = await store.inbox(first.session_id)
    assert [(i.position, i.user_id, i.text) for i in items] == [(1, "U1", "one"), (2, "U2", "two")]


async def test_a_repeated_open_of_a_thread_is_recorded_once_and_names_the_session(
    store: SessionStore,
) -> None:
    # Given a thread opened by a mention, then a reply
    key = new_key()
    first = await store.open_or_join(
        key, requester_id="U1", initial_checkpoint="{}", text="one", source_ts="1.1"
    )
    await store.open_or_join(
        key, requester_id="U2", initial_checkpoint="{}", text="two", source_ts="1.2"
    )
    # When the mention comes again (Slack's message twin of an app_mention)
    again = await store.open_or_join(
        key, requester_id="U1", initial_checkpoint="{}", text="one", source_ts="1.1"
    )
    # Then it joins the session, wakes nothing and records nothing new
    assert (again.session_id, again.created, again.token) == (first.session_id, False, None)
    items = await store.inbox(first.session_id)
    assert [(i.position, i.text) for i in items] == [(1, "one"), (2, "two")]
    session = await store.get(first.session_id)
    assert session is not None
    assert session.inbox_seq == 2


async def test_twenty_concurrent_opens_of_one_thread_make_one_session_holding_every_text_once(
    store: SessionStore,
) -> None:
    key = new_key()
    texts = [f"message {n}" for n in range(20)]
    opened = await asyncio.gather(
        *(
            store.open_or_join(
                key, requester_id="U1", initial_checkpoint="{}", text=t, source_ts=f"1.{n}"
            )
            for n, t in enumerate(texts)
        )
    )
    assert len({o.session_id for o in opened}) == 1
    assert sum(o.created for o in opened) == 1
    assert len([o.token for o in opened if o.token is not None]) == 1
    items = await store.inbox(opened[0].session_id)
    assert sorted(i.text for i in items) == sorted(texts)
    assert [i.position for i in items] == list(range(1, 21))


async def test_a_repeated_slack_message_is_recorded_once(store: SessionStore) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    await store.commit(claim, checkpoint="{}", outcome=Wait(), consumed_inbox_upto=1)
    first = await store.add_input(session_id, user_id="U2", text="check DB", source_ts="2.1")
    again = await store.add_input(session_id, user_id="U2", text="check DB", source_ts="2.1")
    assert first is not None
    assert again is None
    assert [i.text for i in await store.inbox(session_id)] == ["hi", "check DB"]


async def test_a_reply_to_a_waiting_session_makes_it_runnable_with_a_new_token(
    store: SessionStore,
) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    assert await store.commit(claim, checkpoint="{}", outcome=Wait(), consumed_inbox_upto=1) is None
    waiting = await store.get(session_id)
    new_token = await store.add_input(session_id, user_id="U2", text="and?", source_ts="3.1")
    running = await store.get(session_id)
    assert waiting is not None
    assert waiting.status is SessionStatus.WAITING
    assert waiting.pending_token is None
    assert new_token is not None
    assert new_token != token
    assert running is not None
    assert running.status is SessionStatus.RUNNING
    assert running.pending_token == new_token


async def test_a_reply_to_a_finished_session_revives_it(store: SessionStore) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    await store.commit(claim, checkpoint="{}", outcome=Finish(), consumed_inbox_upto=1)
    revived = await store.add_input(session_id, user_id="U2", text="again", source_ts="4.1")
    assert revived is not None
    assert await _claim(store, session_id, revived) is not None


async def test_a_reply_to_an_unknown_session_raises_session_not_found(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        await store.add_input("no-such-session", user_id="U", text="x", source_ts="1.1")


async def test_claim_returns_the_checkpoint_and_unconsumed_inbox_in_order(
    store: SessionStore,
) -> None:
    session_id, token = await open_session(store, "first")
    await store.add_input(session_id, user_id="U2", text="second", source_ts="1.2")
    await store.add_input(session_id, user_id="U3", text="third", source_ts="1.3")
    claim = await _claim(store, session_id, token)
    assert claim.checkpoint == '{"v": 0}'
    assert [(i.position, i.text) for i in claim.inbox] == [
        (1, "first"),
        (2, "second"),
        (3, "third"),
    ]
    assert (claim.epoch, claim.crash_count, claim.inbox_upto) == (1, 0, 3)


async def test_consumed_inbox_items_are_not_given_to_the_next_claim(store: SessionStore) -> None:
    # Given a step that consumed the first two of three inbox items
    session_id, token = await open_session(store, "first")
    await store.add_input(session_id, user_id="U2", text="second", source_ts="1.2")
    await store.add_input(session_id, user_id="U3", text="third", source_ts="1.3")
    claim = await _claim(store, session_id, token)
    # When it commits Continue having consumed up to position 2
    next_token = await store.commit(
        claim, checkpoint='{"v": 1}', outcome=Continue(), consumed_inbox_upto=2
    )
    # Then the next claim gets only the third, and the new checkpoint
    assert next_token is not None
    after = await _claim(store, session_id, next_token)
    assert [i.text for i in after.inbox] == ["third"]
    assert after.checkpoint == '{"v": 1}'


async def test_input_that_arrives_during_a_step_keeps_the_session_running_after_a_wait(
    store: SessionStore,
) -> None:
    # Given a claimed step, and a reply arriving while it runs (nothing enqueued for it)
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    assert (
        await store.add_input(session_id, user_id="U2", text="stop that", source_ts="5.1") is None
    )
    # When the step ends its turn having consumed only what it was given
    woke = await store.commit(
        claim, checkpoint="{}", outcome=Wait(), consumed_inbox_upto=claim.inbox_upto
    )
    # Then the session stays runnable and the next step sees the reply
    session = await store.get(session_id)
    assert woke is not None
    assert session is not None
    assert session.status is SessionStatus.RUNNING
    assert [i.text for i in (await _claim(store, session_id, woke)).inbox] == ["stop that"]


async def test_commit_refuses_to_consume_inbox_positions_the_claim_never_saw(
    store: SessionStore,
) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    with pytest.raises(ValueError, match="consumed_inbox_upto"):
        await store.commit(claim, checkpoint="{}", outcome=Wait(), consumed_inbox_upto=2)


async def test_events_get_contiguous_seqs_across_saves_commits_and_claims(
    store: SessionStore,
) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    await store.save(claim, checkpoint=None, events=[NewEvent("tool_intent", '{"id": "a"}')])
    next_token = await store.commit(
        claim,
        checkpoint="{}",
        outcome=Continue(),
        events=[NewEvent("tool_result"), NewEvent("todos")],
    )
    assert next_token is not None
    claim2 = await _claim(store, session_id, next_token)
    await store.commit(claim2, checkpoint="{}", outcome=Wait(), events=[NewEvent("answer")])
    events = await store.events(session_id)
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert [e.kind for e in events] == ["tool_intent", "tool_result", "todos", "answer"]
    assert [e.epoch for e in events] == [1, 1, 1, 2]
    assert events[0].payload_json == '{"id": "a"}'
    assert [e.seq for e in await store.events(session_id, after_seq=2)] == [3, 4]
    assert claim2.last_seq == 3


async def test_save_keeps_the_claim_so_the_same_claim_can_commit(store: SessionStore) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    await store.save(claim, checkpoint='{"in_flight": "toolu_1"}', events=[NewEvent("tool_intent")])
    held = await store.get(session_id)
    assert held is not None
    assert (held.checkpoint, held.pending_token, held.lease_owner) == (
        '{"in_flight": "toolu_1"}',
        token,
        "w1",
    )
    assert await store.commit(claim, checkpoint="{}", outcome=Continue()) is not None


async def test_commit_continue_releases_the_lease_and_hands_out_a_new_token(
    store: SessionStore,
) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    next_token = await store.commit(claim, checkpoint="{}", outcome=Continue())
    session = await store.get(session_id)
    assert next_token is not None
    assert next_token != token
    assert session is not None
    assert (session.status, session.pending_token) == (SessionStatus.RUNNING, next_token)
    assert (session.lease_owner, session.lease_until) == (None, None)
    assert await store.claim(session_id, token, worker_id="w2", lease_s=LEASE_S) is None


async def test_commit_wait_records_the_deadline_and_holds_nothing(
    store: SessionStore, clock: ManualClock
) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    until = clock.now + timedelta(hours=1, microseconds=250)
    assert (
        await store.commit(claim, checkpoint="{}", outcome=Wait(until), consumed_inbox_upto=1)
        is None
    )
    session = await store.get(session_id)
    assert session is not None
    assert session.status is SessionStatus.WAITING
    assert session.wait_until == until
    assert (session.pending_token, session.lease_owner, session.lease_until) == (None, None, None)


@pytest.mark.parametrize(
    "status", [SessionStatus.DONE, SessionStatus.FAILED, SessionStatus.CANCELLED]
)
async def test_commit_finish_ends_the_session_with_its_status(
    store: SessionStore, status: SessionStatus
) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    finished = await store.commit(
        claim, checkpoint="{}", outcome=Finish(status), consumed_inbox_upto=1
    )
    session = await store.get(session_id)
    assert finished is None
    assert session is not None
    assert session.status is status


async def test_usage_totals_are_summed_over_commits(store: SessionStore) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    next_token = await store.commit(
        claim, checkpoint="{}", outcome=Continue(), usage=TokenUsage(100, 20, 1000, 50)
    )
    assert next_token is not None
    claim2 = await _claim(store, session_id, next_token)
    await store.commit(claim2, checkpoint="{}", outcome=Wait(), usage=TokenUsage(10, 2, 3, 4))
    session = await store.get(session_id)
    assert session is not None
    assert session.usage == TokenUsage(110, 22, 1003, 54)


async def test_set_sandbox_records_the_handle_for_the_next_claim(store: SessionStore) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    await store.set_sandbox(claim, '{"provider": "local", "id": "sbx-1"}')
    next_token = await store.commit(claim, checkpoint="{}", outcome=Continue())
    assert next_token is not None
    assert (await _claim(store, session_id, next_token)).sandbox == (
        '{"provider": "local", "id": "sbx-1"}'
    )


async def test_claim_refuses_a_token_that_is_not_pending(store: SessionStore) -> None:
    session_id, _ = await open_session(store)
    assert await store.claim(session_id, "stale-token", worker_id="w1", lease_s=LEASE_S) is None
    assert await store.claim("no-such-session", "t", worker_id="w1", lease_s=LEASE_S) is None


async def test_claim_refuses_a_waiting_session(store: SessionStore) -> None:
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    await store.commit(claim, checkpoint="{}", outcome=Wait(), consumed_inbox_upto=1)
    assert await store.claim(session_id, token, worker_id="w2", lease_s=LEASE_S) is None


async def test_claim_rejects_a_non_positive_lease(store: SessionStore) -> None:
    session_id, token = await open_session(store)
    with pytest.raises(ValueError, match="lease_s"):
        await store.claim(session_id, token, worker_id="w1", lease_s=0)


async def test_latest_is_the_channels_session_updated_last(
    store: SessionStore, clock: ManualClock
) -> None:
    # Given two threads of one channel, the older one replied to last, and another channel
    key = new_key()
    first = await store.open_or_join(
        key, requester_id="U1", initial_checkpoint="{}", text="a", source_ts="1.1"
    )
    clock.advance(1)
    await store.open_or_join(
        SessionKey(key.org_id, key.channel_id, "1.2"),
        requester_id="U2", initial_checkpoint="{}", text="b", source_ts="1.2",
    )  # fmt: skip
    clock.advance(1)
    await store.open_or_join(
        key, requester_id="U3", initial_checkpoint="{}", text="again", source_ts="1.3"
    )
    await store.open_or_join(
        SessionKey(key.org_id, "C-ELSEWHERE", "1.4"),
        requester_id="U4", initial_checkpoint="{}", text="c", source_ts="1.4",
    )  # fmt: skip
    # Then the channel's latest is the thread replied to, and an empty channel has none
    latest = await store.latest(key.org_id, key.channel_id)
    assert latest is not None
    assert latest.id == first.session_id
    assert await store.latest(key.org_id, "C-EMPTY") is None
