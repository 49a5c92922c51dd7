"""The step driver over the append-only transcript: O(step) writes, compaction, worker caches.

Each test steps one session with real ``StepDriver``s (one per simulated worker) over
a migrated SQLite store, the real ``AnthropicModel`` against the fake Messages API,
and ``TodoWrite`` as the tool (no sandbox needed). The store's own counters
(``SessionStore.io``) give the bytes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI
from harness import Message, TextBlock, ToolResultBlock, ToolUseBlock
from tests.bot.durable.driver_support import TODOS, Workers, open_workers, script


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


async def test_a_long_session_writes_no_more_bytes_at_step_1000_than_at_step_10(
    workers: Workers,
) -> None:
    # Given a session 10 steps in, and one 996 steps in (seeded in the older format,
    # whose first step stores its whole transcript as rows)
    driver = workers.driver("a")
    await workers.open("short")
    short = [await workers.step(driver, "short") for _ in range(10)]
    await workers.open("long", todo_transcript(996))
    await workers.step(driver, "long")
    assert len(await workers.stored("long")) == 996
    # When the long one takes steps 998 to 1,000
    long = [await workers.step(driver, "long") for _ in range(3)]
    # Then steps 999 and 1,000 wrote no more than steps 9 and 10 (each a model and a
    # tool step)
    assert sum(long[1:]) <= sum(short[8:]) * 1.1, (short, long)
    # And the stored transcript holds every message, once, in order
    stored = await workers.stored("long")
    assert len(stored) == 1000
    assert stored[-1].role == "assistant"


def todo_transcript(steps: int) -> tuple[Message, ...]:
    """``steps`` steps of ``TodoWrite`` calls and results, ending with a call to run."""
    messages = [Message("user", (TextBlock("pods are down"),))]
    for n in range(steps // 2):
        call = ToolUseBlock(f"toolu_seed{n:06d}", "TodoWrite", TODOS)
        messages += [Message("assistant", (call,))]
        messages += [Message("user", (ToolResultBlock(call.id, "Todos have been modified"),))]
    return tuple(messages[:-1])


async def test_a_compacted_session_continues_on_another_worker_from_the_compacted_transcript(
    fake_api: FakeAnthropicAPI, tmp_path: Path
) -> None:
    made, db, manager = await open_workers(fake_api, tmp_path, compact_at_tokens=1)
    try:
        # Given a session stepped past its (tiny) compaction threshold by worker A
        first = made.driver("a")
        await made.open("compacting")
        for _ in range(6):
            await made.step(first, "compacting")
        stored = await made.stored("compacting")
        # Then the stored transcript is the compacted one, not the old rows
        assert "This session was compacted" in json.dumps(stored[0].to_dict())
        assert len(stored) == 4
        session = await made.sessions.get("compacting")
        assert session is not None
        assert session.transcript_generation == 1
        # When worker B, with no cache, takes the next model step
        second = made.driver("b")
        await made.step(second, "compacting")
        await made.step(second, "compacting")
        # Then the model saw the compacted transcript, as stored, as its prefix
        request = fake_api.requests[-1].messages
        sent = [Message.from_dict(m).to_json() for m in request]
        now = await made.sessions.transcript("compacting")
        assert [Message.from_json(m).to_json() for m in now][: len(sent)] == sent
    finally:
        await made.model.aclose()
        await manager.aclose()
        await db.dispose()


async def test_workers_taking_turns_each_see_the_steps_the_other_committed(
    workers: Workers, fake_api: FakeAnthropicAPI
) -> None:
    # Given a session opened with a transcript inside its checkpoint (the older format)
    seeded = (
        Message("user", (TextBlock("earlier question"),)),
        Message("assistant", (TextBlock("earlier answer"),)),
    )
    await workers.open("turns", seeded)
    a, b = workers.driver("a"), workers.driver("b")
    # When two workers (each with its own cache) step it in turns
    for driver in (a, a, b, b, a, a, b, b):
        await workers.step(driver, "turns")
        # Then every request holds the whole stored transcript so far, in order
        stored = [m.to_json() for m in await workers.stored("turns")]
        request = [Message.from_dict(m).to_json() for m in fake_api.requests[-1].messages]
        assert stored[: len(request)] == request
    assert [m.role for m in await workers.stored("turns")][:3] == ["user", "assistant", "user"]
    assert len(await workers.stored("turns")) == 2 + 8
