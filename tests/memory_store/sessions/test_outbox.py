"""The Slack outbox: post intents are idempotent, the first recorded ts wins (both backends)."""

from __future__ import annotations

import asyncio

import pytest

from memory_store import (
    Database,
    Outbox,
    OutboxItem,
    PostNotFound,
    SessionNotFound,
    SessionStore,
)
from tests.memory_store.session_support import ManualClock, new_key


@pytest.fixture
def outbox(file_db: Database, clock: ManualClock) -> Outbox:
    return Outbox(file_db, clock=clock)


@pytest.fixture
async def session_id(file_db: Database) -> str:
    opened = await SessionStore(file_db).open_or_join(
        new_key(), requester_id="U1", initial_checkpoint="{}", text="hi", source_ts="1.1"
    )
    return opened.session_id


async def _intend(
    outbox: Outbox, session_id: str, seq: int, payload: str = '{"text": "a"}'
) -> OutboxItem:
    return await outbox.post_intent(
        session_id,
        f"{session_id}:{seq}",
        channel_id="C1",
        thread_ts="1.1",
        kind="answer",
        payload_json=payload,
    )


async def test_a_repeated_post_intent_returns_the_first_one_unchanged(
    outbox: Outbox, session_id: str
) -> None:
    first = await _intend(outbox, session_id, 3, '{"text": "first"}')
    again = await _intend(outbox, session_id, 3, '{"text": "second"}')
    assert again == first
    assert again.payload_json == '{"text": "first"}'
    assert again.ts is None


async def test_concurrent_intents_with_one_key_make_one_post(
    outbox: Outbox, session_id: str
) -> None:
    items = await asyncio.gather(*(_intend(outbox, session_id, 7) for _ in range(5)))
    assert len(set(items)) == 1
    assert [p.key for p in await outbox.pending_posts(session_id)] == [f"{session_id}:7"]


async def test_post_done_records_the_ts_and_keeps_the_first_one(
    outbox: Outbox, session_id: str
) -> None:
    item = await _intend(outbox, session_id, 4)
    done = await outbox.post_done(item.key, "1700000000.000100")
    again = await outbox.post_done(item.key, "1700000000.000200")
    assert done.ts == "1700000000.000100"
    assert again == done
    assert await outbox.get_post(item.key) == done
    assert (await _intend(outbox, session_id, 4)).ts == "1700000000.000100"


async def test_pending_posts_lists_unposted_intents_oldest_first(
    outbox: Outbox, session_id: str
) -> None:
    for seq in (12, 9, 10):
        await _intend(outbox, session_id, seq)
    await outbox.post_done(f"{session_id}:9", "1.2")
    assert [p.key for p in await outbox.pending_posts(session_id)] == [
        f"{session_id}:12",
        f"{session_id}:10",
    ]


async def test_unknown_keys_and_sessions_are_reported(outbox: Outbox) -> None:
    assert await outbox.get_post("nope:1") is None
    with pytest.raises(PostNotFound):
        await outbox.post_done("nope:1", "1.1")
    with pytest.raises(SessionNotFound):
        await _intend(outbox, "no-such-session", 1)


async def test_a_second_intent_of_one_key_says_it_did_not_record_it(
    outbox: Outbox, session_id: str
) -> None:
    first = await _intend(outbox, session_id, 5)
    second = await _intend(outbox, session_id, 5)

    assert (first.created, second.created) == (True, False)


async def test_unsent_lists_old_intents_of_a_kind_without_a_ts(
    outbox: Outbox, session_id: str, clock: ManualClock
) -> None:
    # Given two intents of one kind, one carried out, and one of another kind
    await _intend(outbox, session_id, 1)
    done = await _intend(outbox, session_id, 2)
    await outbox.post_done(done.key, "9.9")
    await outbox.post_intent(
        session_id,
        f"{session_id}:x",
        channel_id="C1",
        thread_ts="1.1",
        kind="status",
        payload_json="{}",
    )
    # When asked, later, for the unsent ones of the first kind
    later = clock.advance(60)

    unsent = await outbox.unsent("answer", created_before=later, limit=1000)

    # Then only the one not carried out is listed (of this session: the database is shared
    # by the module's tests), and none recorded after the cutoff
    mine = [item.key for item in unsent if item.session_id == session_id]
    assert mine == [f"{session_id}:1"]
    earlier = await outbox.unsent("answer", created_before=clock.advance(-120), limit=1000)
    assert [item for item in earlier if item.session_id == session_id] == []
