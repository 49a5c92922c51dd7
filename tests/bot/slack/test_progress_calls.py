"""What showing a turn's progress costs: Slack calls and outbox reads per step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.poster import SlackPoster, Thread
from bot.slack.progress import THINKING_REFRESH_S, ThreadReporter
from harness import Checkpoint, Requester
from memory_store import Outbox
from tests.fakes.slack_api import FakeSlackApi


class CountingOutbox:
    """The real outbox, counting the reads of a post's record (not of a status
    message's final marker, read once before each progress update is sent, so at most
    the ``chat.update`` budget a minute)."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self.reads = 0

    async def post_intent(self, session_id: str, key: str, **fields: Any) -> Any:
        return await self.outbox.post_intent(session_id, key, **fields)

    async def post_done(self, key: str, ts: str) -> Any:
        return await self.outbox.post_done(key, ts)

    async def get_post(self, key: str) -> Any:
        if not key.endswith("/final"):  # a final-view check costs one read per chat.update
            self.reads += 1
        return await self.outbox.get_post(key)


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def statuses(slack_api: FakeSlackApi) -> list[str]:
    return [call.args["status"] for call in slack_api.calls_to("assistant.threads.setStatus")]


async def show_steps(reporter: ThreadReporter, thread: Thread, cp: Checkpoint, steps: int) -> None:
    for _ in range(steps):
        await reporter.show_progress(
            session_id=thread.session_id,
            channel_id=thread.channel_id,
            thread_ts=thread.thread_ts,
            checkpoint=cp,
            events=(),
        )
        await reporter.board.drain(timeout_s=10)


async def test_a_turn_sets_the_thinking_status_once_a_minute_not_once_a_step(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    clock = Clock()
    poster = SlackPoster(slack_client, outbox, min_update_interval_s=0.0)
    reporter = ThreadReporter(poster, clock=clock)
    cp = Checkpoint(thread.session_id, "T0FAKETEAM", thread.channel_id, Requester("U0FAKEALICE"))

    # Given a turn of ten quick steps
    await show_steps(reporter, thread, cp, 10)
    # Then the status was set once
    assert statuses(slack_api) == ["is thinking…"]

    # When the turn runs on past the refresh time (Slack drops a status after two minutes)
    clock.now_s += THINKING_REFRESH_S
    await show_steps(reporter, thread, cp, 3)
    # Then it is set again, once
    assert statuses(slack_api) == ["is thinking…"] * 2

    # When the answer is posted (which clears it) and the next turn starts
    await reporter.post_answer(
        key=f"{thread.session_id}:answer:1",
        session_id=thread.session_id,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        markdown="Pool exhausted.",
    )
    await reporter.board.drain(timeout_s=10)
    await show_steps(reporter, thread, replace(cp, turns=1), 2)
    # Then the new turn shows it at once
    assert statuses(slack_api) == ["is thinking…", "is thinking…", "", "is thinking…"]
    await poster.flush()


async def test_a_failed_status_is_tried_again_at_the_next_step(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    poster = SlackPoster(slack_client, outbox, min_update_interval_s=0.0)
    reporter = ThreadReporter(poster, clock=Clock())
    cp = Checkpoint(thread.session_id, "T0FAKETEAM", thread.channel_id, Requester("U0FAKEALICE"))
    slack_api.fail_next("assistant.threads.setStatus", "ratelimited")

    await show_steps(reporter, thread, cp, 3)

    assert statuses(slack_api) == ["is thinking…", "is thinking…"]
    await poster.flush()


async def test_the_status_message_is_looked_up_once_then_remembered(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    counting = CountingOutbox(outbox)
    poster = SlackPoster(slack_client, counting, min_update_interval_s=0.0)
    reporter = ThreadReporter(poster, clock=Clock())
    cp = Checkpoint(thread.session_id, "T0FAKETEAM", thread.channel_id, Requester("U0FAKEALICE"))

    await show_steps(reporter, thread, cp, 1)
    first_step_reads = counting.reads
    await show_steps(reporter, thread, cp, 20)

    # the first step found no status message and posted it; later steps read nothing
    assert first_step_reads >= 1
    assert counting.reads == first_step_reads
    assert len(slack_api.calls_to("chat.postMessage")) == 1
    # and a poster of another worker process (no memory of it) still finds it recorded
    other = SlackPoster(slack_client, outbox)
    assert await other.recorded_ts(f"{thread.session_id}:status:0") is not None
    await poster.flush()
