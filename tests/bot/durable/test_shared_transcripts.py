"""The copies of long transcripts in Redis: what a cold worker reads instead of the rows.

The copy is a cache of what PostgreSQL (here SQLite) holds: these tests check that it
only ever saves reads, and never changes what a step sees or sends.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.durable.shared_transcripts import SharedTranscripts
from bot.fakes.anthropic_api import FakeAnthropicAPI
from harness import Message, TextBlock
from tests.bot.durable.driver_support import Workers, open_workers, script
from tests.bot.durable.test_transcripts import todo_transcript


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    name = f"warroom:test:transcript:{uuid.uuid4().hex[:8]}:"
    yield name
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{name}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
async def shared(redis_url: str, prefix: str) -> AsyncIterator[SharedTranscripts]:
    copies = SharedTranscripts(redis_url, prefix=prefix, min_messages=8)
    yield copies
    await copies.aclose()


def said(count: int, start: int = 0) -> tuple[Message, ...]:
    return tuple(
        Message("user" if n % 2 == 0 else "assistant", (TextBlock(f"message {n} ✓"),))
        for n in range(start, start + count)
    )


async def texts(copies: SharedTranscripts, session_id: str) -> tuple[int, list[str]] | None:
    copy = await copies.read(session_id)
    if copy is None:
        return None
    return copy.generation, [copy.stored.text(i) for i in range(len(copy.stored))]


async def test_a_copy_is_made_whole_once_then_grows_by_what_each_commit_added(
    shared: SharedTranscripts,
) -> None:
    # Given no copy, when a worker shares a 20-message transcript
    messages = said(20)
    assert await shared.read("s") is None
    assert await shared.share("s", 3, messages, 0) == 20
    whole = shared.io.written_bytes
    # Then the copy is those messages' stored JSON, of that generation
    assert await texts(shared, "s") == (3, [m.to_json() for m in messages])
    # When two more are added, only they are written
    longer = (*messages, *said(2, 20))
    assert await shared.share("s", 3, longer, 20) == 22
    assert shared.io.written_bytes - whole < whole / 5
    assert await texts(shared, "s") == (3, [m.to_json() for m in longer])
    # And a transcript shorter than min_messages gets none
    assert await shared.share("short", 0, said(7), 0) == 0  # generation 0: never compacted
    assert await shared.read("short") is None


async def test_a_worker_that_does_not_know_the_copy_brings_it_up_to_date(
    shared: SharedTranscripts,
) -> None:
    messages = said(30)
    await shared.share("s", 1, messages[:24], 0)
    # A worker that read the transcript from the database (it knows of no copy), or that
    # knows an older state of it, adds the messages the copy lacks
    assert await shared.share("s", 1, messages[:27], 0) == 27
    assert await shared.share("s", 1, messages, 24) == 30
    assert await texts(shared, "s") == (1, [m.to_json() for m in messages])


async def test_a_copy_is_replaced_by_a_later_transcript_only(shared: SharedTranscripts) -> None:
    old, compacted, stale = said(20), said(10, 100), said(24, 200)
    assert await shared.share("s", 1, old, 0) == 20
    # A compaction's new generation replaces the copy
    assert await shared.share("s", 2, compacted, 0) == 10
    assert await texts(shared, "s") == (2, [m.to_json() for m in compacted])
    # A worker still on the older generation (fenced, or behind) changes nothing
    assert await shared.share("s", 1, stale, 20) == 20
    assert await shared.share("s", 1, stale, 0) == 0
    # Nor does one holding fewer messages than the copy
    assert await shared.share("s", 2, compacted[:9], 0) == 0
    assert await texts(shared, "s") == (2, [m.to_json() for m in compacted])


async def test_a_copy_missing_a_part_or_out_of_reach_is_no_copy(
    shared: SharedTranscripts, redis_url: str, prefix: str
) -> None:
    await shared.share("s", 0, said(12), 0)
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url)
    try:
        await client.delete(f"{prefix}{{s}}:text")  # evicted
    finally:
        await client.aclose()
    assert await shared.read("s") is None
    unreachable = SharedTranscripts("redis://127.0.0.1:1/0", min_messages=8)
    try:
        assert await unreachable.read("s") is None
        assert await unreachable.share("s", 0, said(12), 5) == 5
    finally:
        await unreachable.aclose()


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI(script) as fake:
        yield fake


@pytest.fixture
async def workers(fake_api: FakeAnthropicAPI, tmp_path: Path) -> AsyncIterator[Workers]:
    made, db, manager = await open_workers(fake_api, tmp_path)
    try:
        yield made
    finally:
        await made.model.aclose()
        await manager.aclose()
        await db.dispose()


async def current(workers: Workers, session_id: str) -> tuple[int, list[str]]:
    """The session's transcript generation and its stored messages."""
    session = await workers.sessions.get(session_id)
    assert session is not None
    return session.transcript_generation, list(await workers.sessions.transcript(session_id))


async def sent_is_stored(workers: Workers, fake: FakeAnthropicAPI, session_id: str) -> None:
    """The last request's messages are the stored transcript's first ones, as stored."""
    stored = list(await workers.sessions.transcript(session_id))
    sent = [Message.from_dict(m).to_json() for m in fake.requests[-1].messages]
    assert stored[: len(sent)] == sent
    assert len(sent) >= len(stored) - 1


async def test_a_worker_that_never_ran_the_session_reads_its_copy_and_no_transcript_row(
    workers: Workers, fake_api: FakeAnthropicAPI, shared: SharedTranscripts
) -> None:
    # Given a long session stepped by worker A, which keeps its copy up to date
    await workers.open("long", todo_transcript(200))
    a = workers.driver("a", shared=shared)
    for _ in range(3):
        await workers.step(a, "long")
    stored = await workers.sessions.transcript("long")
    assert await texts(shared, "long") == await current(workers, "long")
    # When worker B, which never ran it, takes its next steps (a tool and a model step)
    read = workers.sessions.io.read_bytes
    for _ in range(2):
        await workers.step(workers.driver("b", shared=shared), "long")
    # Then it read no transcript row from the database (the claims' small state only)
    assert workers.sessions.io.read_bytes - read < sum(map(len, stored)) / 8
    # And its model call sent the stored transcript, and the copy holds its steps too
    await sent_is_stored(workers, fake_api, "long")
    assert await texts(shared, "long") == await current(workers, "long")


async def test_a_copy_behind_the_database_is_completed_from_it(
    workers: Workers, fake_api: FakeAnthropicAPI, shared: SharedTranscripts
) -> None:
    # Given a copy left behind: steps committed by a worker that did not add to it (it
    # died before it could, or had no Redis)
    await workers.open("behind", todo_transcript(100))
    await workers.step(workers.driver("a", shared=shared), "behind")
    blind = workers.driver("blind")
    for _ in range(3):
        await workers.step(blind, "behind")
    copy = await shared.read("behind")
    assert copy is not None
    assert len(copy.stored) < len(await workers.sessions.transcript("behind"))
    # When another worker takes the next steps from the copy
    for _ in range(2):
        await workers.step(workers.driver("c", shared=shared), "behind")
    # Then it read the rows the copy lacked: its request is the stored transcript
    await sent_is_stored(workers, fake_api, "behind")
    # And the copy caught up
    assert await texts(shared, "behind") == await current(workers, "behind")


async def test_a_copy_the_database_does_not_hold_is_not_used(
    workers: Workers, fake_api: FakeAnthropicAPI, shared: SharedTranscripts
) -> None:
    # Given a copy that says more than the database holds (the database was restored)
    await workers.open("restored", todo_transcript(100))
    await workers.step(workers.driver("a", shared=shared), "restored")
    stored = await workers.sessions.transcript("restored")
    invented = (*map(Message.from_stored, stored), *said(5, 900))
    generation, _ = await current(workers, "restored")
    await shared.share("restored", generation, invented, len(stored))
    # When a worker without the session takes its next steps
    for _ in range(2):
        await workers.step(workers.driver("b", shared=shared), "restored")
    # Then what it sent is what the database holds, none of the copy's own messages
    await sent_is_stored(workers, fake_api, "restored")
    assert b"message 900" not in fake_api.requests[-1].raw


async def test_a_compacted_session_continues_on_other_workers_from_its_new_copy(
    fake_api: FakeAnthropicAPI, tmp_path: Path, shared: SharedTranscripts
) -> None:
    made, db, manager = await open_workers(fake_api, tmp_path, compact_at_tokens=1)
    try:
        # Given a long session compacted by worker A
        await made.open("compacting", todo_transcript(100))
        first = made.driver("a", shared=shared)
        for _ in range(6):
            await made.step(first, "compacting")
        session = await made.sessions.get("compacting")
        assert session is not None
        assert session.transcript_generation >= 2
        # When workers that never ran it take turns from their copies
        for name in ("b", "c", "b", "c"):
            await made.step(made.driver(name, shared=shared), "compacting")
            # Then each sent the (compacted) stored transcript
            await sent_is_stored(made, fake_api, "compacting")
        session = await made.sessions.get("compacting")
        assert session is not None
        copy = await texts(shared, "compacting")
        assert copy == (
            session.transcript_generation,
            list(await made.sessions.transcript("compacting")),
        )
    finally:
        await made.model.aclose()
        await manager.aclose()
        await db.dispose()
