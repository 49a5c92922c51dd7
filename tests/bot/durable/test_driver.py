"""The step driver's order of work after a commit (in-process drivers over a real store)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import cast

import pytest

from bot.durable.driver import StepDriver
from bot.durable.failures import tell_failed
from bot.errors import SlackRefused
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.metrics import StepOutcome, default_metrics
from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import SlackMessage
from harness import Checkpoint, Event, Message, Requester, TextBlock
from memory_store import SessionStatus
from tests.bot.durable.driver_support import (
    CHANNEL,
    ORG,
    TODOS,
    Workers,
    open_workers,
    script,
)


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


class BrokenThread(WatchingThread):
    """A thread whose poster is broken (a bug, a library that changed): every post raises."""

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        raise RuntimeError("the Slack client lost its token")


class Said:
    """The thread's posts, as ``failures.tell_failed`` makes them (a ``SlackPoster``'s part)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def post(self, thread: Thread, key: str, message: SlackMessage) -> str:
        self.texts.append(message.text)
        return "1.0"


async def test_a_step_given_up_after_its_attempts_says_what_the_last_attempt_met(
    workers: Workers,
) -> None:
    # Given a session whose answer is ready, and a worker whose poster raises
    driver = workers.driver("a", BrokenThread(workers))
    answered = Checkpoint("broken", ORG, CHANNEL, Requester("U1"), answer="Done.")
    await workers.open("broken", checkpoint=answered)
    # When its step fails (and, with one attempt allowed, the sweeper gives it up)
    with pytest.raises(RuntimeError):
        await driver.run("broken", workers.pending.pop("broken"))
    swept = await workers.sessions.sweep(max_crashes=1, stale_after_s=30)
    assert swept.failed == ("broken",)
    said = Said()
    await tell_failed(workers.sessions, cast(SlackPoster, said), _nothing, "broken", crashes=1)
    # Then the thread is told why the last attempt failed, in the failure's own words
    assert len(said.texts) == 1
    assert "crashed 1 times in a row" in said.texts[0]
    assert "(the last time: RuntimeError: the Slack client lost its token)" in said.texts[0]


async def _nothing(session_id: str, token: str) -> None:
    raise AssertionError("a top-level session's failure enqueues nothing")


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


class StepsThread(WatchingThread):
    """Notes each progress update's step count and each answer posted."""

    def __init__(self, workers: Workers) -> None:
        super().__init__(workers)
        self.steps_shown: list[int] = []
        self.answers: list[str] = []

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        self.answers.append(markdown)
        return "1.0"

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        await asyncio.sleep(0)  # a real update awaits Slack: let the next step start first
        self.steps_shown.append(checkpoint.steps)


def three_todos_then_answer(request: RecordedRequest) -> Reply:
    """``TodoWrite`` three times, then end the turn."""
    calls = sum(1 for m in request.messages if '"tool_use"' in json.dumps(m))
    return Reply.tool("TodoWrite", TODOS) if calls < 3 else Reply.text("Pods checked.")


async def _run_turn(
    tmp_path: Path,
    *,
    carry_on_s: float,
    draining: bool,
    stop_at_request: int | None = None,
) -> tuple[StepOutcome, Workers, StepsThread, list[str]]:
    """One message's run of a three-``TodoWrite`` turn; ``stop_at_request``: the worker is
    told to stop (as its SIGTERM handler does) while the model answers that request."""
    driver: StepDriver | None = None
    requests = 0

    def stopping_script(request: RecordedRequest) -> Reply:
        nonlocal requests
        requests += 1
        if requests == stop_at_request and driver is not None:
            driver.draining = True  # mid-step: the model call is under way
        return three_todos_then_answer(request)

    async with FakeAnthropicAPI(stopping_script) as fake:
        workers, db, manager = await open_workers(fake, tmp_path)
        try:
            thread = StepsThread(workers)
            driver = workers.driver("a", thread)
            driver.carry_on_s, driver.draining = carry_on_s, draining
            await workers.open("carried")
            outcome = await driver.run("carried", workers.pending.pop("carried"))
            kinds = [e.kind for e in await workers.sessions.events("carried")]
        finally:
            await workers.model.aclose()
            await manager.aclose()
            await db.dispose()
    return outcome, workers, thread, kinds


async def test_a_worker_carries_its_session_through_a_whole_turn_without_a_queue_message(
    tmp_path: Path,
) -> None:
    # When one message starts a turn of three tool calls, with time to carry on
    outcome, workers, thread, kinds = await _run_turn(tmp_path, carry_on_s=60, draining=False)
    # Then every step ran in this worker, each claimed by the previous commit: the
    # answer was posted and the session waits, with nothing ever enqueued
    assert outcome is StepOutcome.POSTED
    assert workers.enqueued == []
    assert thread.answers == ["Pods checked."]
    assert kinds.count("tool_result") == 3
    assert "post_done" in kinds
    # and the thread saw every step's progress, in order
    assert thread.steps_shown == sorted(thread.steps_shown)
    assert len(thread.steps_shown) == 7  # 4 model steps and 3 tool steps


async def test_a_draining_worker_runs_one_step_and_hands_the_next_to_the_queue(
    tmp_path: Path,
) -> None:
    outcome, workers, thread, kinds = await _run_turn(tmp_path, carry_on_s=60, draining=True)
    assert outcome is StepOutcome.STEPPED
    assert len(workers.enqueued) == 1
    assert thread.answers == []
    assert kinds.count("tool_result") == 0


async def test_a_worker_told_to_stop_during_a_step_hands_the_next_step_to_the_queue(
    tmp_path: Path,
) -> None:
    # Given a worker carrying a session on (a minute's window), told to stop (SIGTERM)
    # while its second model call is under way (the third step of the message)
    outcome, workers, thread, kinds = await _run_turn(
        tmp_path, carry_on_s=60, draining=False, stop_at_request=2
    )
    # Then that step commits and its next step goes to the queue: the worker starts no
    # tool call (nor model call) after the step that was running when it was told
    assert outcome is StepOutcome.STEPPED
    assert len(workers.enqueued) == 1
    assert kinds.count("model_response") == 2
    assert kinds.count("tool_result") == 1
    assert thread.answers == []
