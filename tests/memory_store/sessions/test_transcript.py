"""The session transcript stored append-only: rows written once, claims read what they lack."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from memory_store import (
    Claim,
    Continue,
    Database,
    Fenced,
    NewEvent,
    SessionStore,
    TranscriptDelta,
    TranscriptMark,
)
from memory_store.sessions.tables import session_transcript
from tests.memory_store.session_support import ManualClock, open_session

LEASE_S = 15.0


@pytest.fixture
def store(file_db: Database, clock: ManualClock) -> SessionStore:
    return SessionStore(file_db, clock=clock)


async def _claim(
    store: SessionStore, session_id: str, token: str, cached: TranscriptMark | None = None
) -> Claim:
    claim = await store.claim(session_id, token, worker_id="w1", lease_s=LEASE_S, cached=cached)
    assert claim is not None
    return claim


def _append(claim: Claim, *messages: str) -> TranscriptDelta:
    mark = claim.transcript_mark()
    return TranscriptDelta(mark, mark.generation, messages)


async def _commit(store: SessionStore, claim: Claim, delta: TranscriptDelta | None) -> str:
    token = await store.commit(claim, checkpoint='{"v": 2}', outcome=Continue(), transcript=delta)
    assert token is not None
    return token


async def test_steps_append_their_messages_and_a_fresh_claim_reads_them_all_in_order(
    store: SessionStore,
) -> None:
    # Given a session whose two steps each stored their own messages
    session_id, token = await open_session(store)
    first = await _claim(store, session_id, token)
    token = await _commit(store, first, _append(first, '{"m":1}', '{"m":2}'))
    second = await _claim(store, session_id, token)
    token = await _commit(store, second, _append(second, '{"m":3}'))
    # When a worker without a cache claims the next step
    third = await _claim(store, session_id, token)
    # Then the claim carries the whole transcript, and the row counters agree
    assert third.transcript == ('{"m":1}', '{"m":2}', '{"m":3}')
    assert (third.transcript_from, third.transcript_length) == (0, 3)
    assert await store.transcript(session_id) == third.transcript


async def test_a_claim_that_follows_its_own_commit_reads_no_transcript_row(
    store: SessionStore,
) -> None:
    # Given a worker that committed a step and knows the mark it left
    session_id, token = await open_session(store)
    first = await _claim(store, session_id, token)
    delta = _append(first, '{"m":1}', '{"m":2}')
    token = await _commit(store, first, delta)
    read_before = store.io.read_bytes
    # When it claims the next step with that mark
    second = await _claim(store, session_id, token, cached=delta.after(first.epoch))
    # Then nothing of the transcript is read: only the small state
    assert second.transcript == ()
    assert second.transcript_from == second.transcript_length == 2
    assert store.io.read_bytes - read_before == len(second.checkpoint) + len("hi")


async def test_a_stale_cache_of_the_same_generation_reads_only_the_rows_it_lacks(
    store: SessionStore,
) -> None:
    # Given a worker's cache from step one, and a step two run by another worker
    session_id, token = await open_session(store)
    first = await _claim(store, session_id, token)
    delta = _append(first, '{"m":1}')
    token = await _commit(store, first, delta)
    other = await _claim(store, session_id, token)
    token = await _commit(store, other, _append(other, '{"m":2}'))
    # When the first worker claims step three with its old mark
    third = await _claim(store, session_id, token, cached=delta.after(first.epoch))
    # Then it reads the one row it has not seen
    assert (third.transcript, third.transcript_from) == (('{"m":2}',), 1)


async def test_compaction_stores_a_new_generation_that_replaces_the_old_rows(
    store: SessionStore, file_db: Database
) -> None:
    # Given a session with three messages
    session_id, token = await open_session(store)
    first = await _claim(store, session_id, token)
    old = _append(first, '{"m":1}', '{"m":2}', '{"m":3}')
    token = await _commit(store, first, old)
    # When a step stores a rewritten (compacted) transcript as the next generation
    second = await _claim(store, session_id, token)
    mark = second.transcript_mark()
    token = await _commit(store, second, TranscriptDelta(mark, 1, ('{"summary":1}', '{"ack":1}')))
    # Then a claim, even one holding a cache of the old generation, reads the new one
    third = await _claim(store, session_id, token, cached=old.after(first.epoch))
    assert third.transcript == ('{"summary":1}', '{"ack":1}')
    assert (third.transcript_generation, third.transcript_from) == (1, 0)
    assert await store.transcript(session_id) == third.transcript
    # And the older generation's rows are gone from the table
    assert await stored_rows(file_db, session_id) == [(1, 0), (1, 1)]


async def stored_rows(db: Database, session_id: str) -> list[tuple[int, int]]:
    """(generation, position) of every transcript row of the session, in order."""
    query = (
        select(session_transcript.c.generation, session_transcript.c.position)
        .where(session_transcript.c.session_id == session_id)
        .order_by(session_transcript.c.generation, session_transcript.c.position)
    )
    async with db.read() as conn:
        return [(g, p) for g, p in await conn.execute(query)]


async def test_a_fenced_commit_writes_no_transcript_row_and_no_event(
    store: SessionStore, file_db: Database
) -> None:
    # Given a claim whose session was stopped meanwhile (the stop bumps the epoch)
    session_id, token = await open_session(store)
    stale = await _claim(store, session_id, token)
    assert await store.cancel(session_id, actor="U0CAROL") is not None
    events_before = await store.events(session_id)
    # When the stale claim commits a message and an event
    with pytest.raises(Fenced):
        await store.commit(
            stale,
            checkpoint='{"v": "stale"}',
            outcome=Continue(),
            events=(NewEvent("note", "{}"),),
            transcript=_append(stale, '{"m":"stale"}'),
        )
    # Then nothing of it was stored
    assert await stored_rows(file_db, session_id) == []
    assert await store.events(session_id) == events_before
    session = await store.get(session_id)
    assert session is not None
    assert session.checkpoint != '{"v": "stale"}'


async def test_a_delta_from_a_transcript_that_moved_on_is_fenced_and_writes_nothing(
    store: SessionStore,
) -> None:
    # Given a claim whose own save stored a message
    session_id, token = await open_session(store)
    claim = await _claim(store, session_id, token)
    await store.save(claim, checkpoint=None, transcript=_append(claim, '{"m":1}'))
    # When it then writes a delta from the claim's original mark (position 0 again)
    with pytest.raises(Fenced):
        await store.commit(
            claim,
            checkpoint='{"v": 2}',
            outcome=Continue(),
            transcript=_append(claim, '{"m":"again"}'),
        )
    # Then the transcript holds only the first write
    assert await store.transcript(session_id) == ('{"m":1}',)


async def test_bytes_written_count_the_step_not_the_session(store: SessionStore) -> None:
    # Given a session that has stored 200 steps of messages
    session_id, token = await open_session(store)
    written: list[int] = []
    for n in range(200):
        claim = await _claim(store, session_id, token)
        before = store.io.written_bytes
        token = await _commit(store, claim, _append(claim, f'{{"step":{n:04d}}}'))
        written.append(store.io.written_bytes - before)
    # Then the last step wrote what the first did
    assert written[-1] == written[0]


def test_a_delta_may_not_go_back_a_generation() -> None:
    with pytest.raises(ValueError, match="generation"):
        TranscriptDelta(TranscriptMark(1, 2, 5), 1, ())
