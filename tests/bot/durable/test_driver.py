"""The step driver's order of work after a commit (in-process drivers over a real store)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI
from harness import Checkpoint, Event
from tests.bot.durable.driver_support import Workers, open_workers, script


class WatchingThread:
    """A ``ThreadPoster`` noting, at each progress update, how many wake-ups were sent."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.enqueued_at_progress: list[int] = []

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        return "0.0"

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        self.enqueued_at_progress.append(len(self.workers.enqueued))


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[Workers]:
    async with FakeAnthropicAPI(script) as fake:
        made, db, manager = await open_workers(fake, tmp_path)
        try:
            yield made
        finally:
            await made.model.aclose()
            await manager.aclose()
            await db.dispose()


async def test_the_next_step_is_enqueued_before_the_threads_progress_is_shown(
    workers: Workers,
) -> None:
    # Given a worker whose thread reports what was enqueued when progress is shown
    thread = WatchingThread(workers)
    driver = workers.driver("a", thread)
    await workers.open("ordered")
    # When it runs three steps
    for _ in range(3):
        await workers.step(driver, "ordered")
    # Then each step's wake-up was sent before its progress update
    assert thread.enqueued_at_progress == [1, 2, 3]
