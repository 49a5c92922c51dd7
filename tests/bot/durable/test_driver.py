"""The step driver's order of work after a commit (in-process drivers over a real store)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from bot.errors import SlackRefused
from bot.fakes.anthropic_api import FakeAnthropicAPI
from bot.metrics import StepOutcome, default_metrics
from harness import Checkpoint, Event, Message, Requester, TextBlock
from memory_store import SessionStatus
from tests.bot.durable.driver_support import CHANNEL, ORG, Workers, open_workers, script


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


class ArchivedThread(WatchingThread):
    """A thread whose channel was archived: Slack refuses every post for good."""

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        self.posts = getattr(self, "posts", 0) + 1
        raise SlackRefused("chat.postMessage", "is_archived")


async def test_an_answer_refused_for_good_fails_the_session_once_and_is_counted(
    workers: Workers,
) -> None:
    # Given a session whose answer is ready, in an archived channel, and a reply waiting
    thread = ArchivedThread(workers)
    driver = workers.driver("a", thread)
    answered = Checkpoint("refused", ORG, CHANNEL, Requester("U1"), answer="Done.")
    await workers.open("refused", checkpoint=answered)
    counted = default_metrics().registry.get_sample_value(
        "warroom_slack_posts_refused_total", {"error": "is_archived"}
    )
    # When the post step runs
    outcome = await driver.run("refused", workers.pending.pop("refused"))
    # Then the session ends failed after one try (the reply cannot be answered there
    # either), nothing is enqueued, and the metric counts it
    assert outcome is StepOutcome.REFUSED
    assert thread.posts == 1
    assert "refused" not in workers.pending
    session = await workers.sessions.get("refused")
    assert session is not None
    assert session.status is SessionStatus.FAILED
    after = default_metrics().registry.get_sample_value(
        "warroom_slack_posts_refused_total", {"error": "is_archived"}
    )
    assert (after or 0.0) == (counted or 0.0) + 1


async def test_a_system_input_reaches_the_model_as_recorded_beside_a_users_reply(
    tmp_path: Path,
) -> None:
    # Given a session that has talked before, with a user's reply in its inbox
    async with FakeAnthropicAPI(script) as fake:
        workers, db, manager = await open_workers(fake, tmp_path)
        try:
            talked = (
                Message("user", (TextBlock("start"),)),
                Message("assistant", (TextBlock("ok"),)),
            )
            await workers.open("notified", talked)
            # When the system records an input for it before its step runs
            note = "<task-notification>exit 0</task-notification>"
            token = await workers.sessions.notify(
                "notified", kind="notification", text=note, source_key="bg:toolu_1"
            )
            await workers.step(workers.driver("a"), "notified")
        finally:
            await workers.model.aclose()
            await manager.aclose()
            await db.dispose()
    # Then no new token was needed (a step was pending), and the model got the reply
    # labelled as a teammate's and the note as it was recorded
    assert token is None
    texts = [b["text"] for b in fake.requests[0].messages[-1]["content"]]
    assert texts[-2].startswith("Message from")
    assert texts[-2].endswith("pods are down")
    assert texts[-1] == note
