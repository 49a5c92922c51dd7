"""SlackPoster: idempotent posts across crashes, throttled status updates, 429s, files."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.budget import CallBudget
from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import Progress, markdown_message, notice, render_status
from memory_store import Database, Outbox, SessionKey, SessionStore
from tests.fakes.slack_api import FakeSlackApi

CHANNEL = "C0FAKEINC"
PARAGRAPH = "Checkout pods restarted after the v1.4 deploy; the pool limit is 10. " * 20


class WorkerDied(Exception):
    """Stands for a worker killed between posting and recording the post."""


class DyingOutbox:
    """The real outbox, except that recording a posted ``ts`` kills the "worker"."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox

    async def post_intent(self, session_id: str, key: str, **fields: Any) -> Any:
        return await self.outbox.post_intent(session_id, key, **fields)

    async def post_done(self, key: str, ts: str) -> Any:
        raise WorkerDied(key)

    async def get_post(self, key: str) -> Any:
        return await self.outbox.get_post(key)


def bot_messages(slack_api: FakeSlackApi, thread: Thread) -> list[dict[str, Any]]:
    return [m for m in slack_api.thread(thread.channel_id, thread.thread_ts) if m.get("bot_id")]


async def test_post_carries_its_key_in_metadata_and_records_the_ts(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    poster = SlackPoster(slack_client, outbox)
    key = f"{thread.session_id}:7"

    ts = await poster.post(thread, key, notice("Looking at the pods now."))

    (posted,) = bot_messages(slack_api, thread)
    assert posted["ts"] == ts
    assert posted["metadata"] == {"event_type": "warroom_post", "event_payload": {"key": key}}
    record = await outbox.get_post(key)
    assert record is not None
    assert record.ts == ts


async def test_a_retried_post_with_the_same_key_posts_once(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    poster = SlackPoster(slack_client, outbox)
    key = f"{thread.session_id}:7"

    first = await poster.post(thread, key, notice("once"))
    second = await poster.post(thread, key, notice("once"))

    assert first == second
    assert len(slack_api.calls_to("chat.postMessage")) == 1
    assert slack_api.calls_to("conversations.replies") == []  # a recorded ts needs no search


async def test_two_workers_posting_one_key_at_once_post_it_once(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    # Given two workers' posters (two sweeps telling one failure, issue #32.5)
    posters = [SlackPoster(slack_client, outbox) for _ in range(2)]
    key = f"{thread.session_id}:failed:3"

    # When both post the same key at the same moment
    first, second = await asyncio.gather(*(p.post(thread, key, notice("once")) for p in posters))

    # Then Slack got one post, and both know its ts
    assert len(slack_api.calls_to("chat.postMessage")) == 1
    assert first == second


async def test_crash_between_post_and_record_is_recovered_from_metadata_without_reposting(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    key = f"{thread.session_id}:9"
    # Given a worker that posted and died before recording the ts
    with pytest.raises(WorkerDied):
        await SlackPoster(slack_client, DyingOutbox(outbox)).post(thread, key, notice("answer"))
    record = await outbox.get_post(key)
    assert record is not None
    assert record.ts is None
    # When the step is retried by another worker
    ts = await SlackPoster(slack_client, outbox).post(thread, key, notice("answer"))
    # Then it found the post by its metadata and did not post again
    assert len(slack_api.calls_to("chat.postMessage")) == 1
    (replies,) = slack_api.calls_to("conversations.replies")
    assert replies.args["include_all_metadata"] in (True, "1", "true")
    (posted,) = bot_messages(slack_api, thread)
    assert posted["ts"] == ts
    record = await outbox.get_post(key)
    assert record is not None
    assert record.ts == ts


async def test_intent_without_a_post_is_posted_after_a_crash(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    key = f"{thread.session_id}:9"
    # Given a worker that recorded the intent and died before posting
    await outbox.post_intent(
        thread.session_id,
        key,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        kind="message",
        payload_json="{}",
    )
    # When the step is retried
    ts = await SlackPoster(slack_client, outbox).post(thread, key, notice("answer"))
    # Then the thread was searched, and the message posted exactly once
    assert len(slack_api.calls_to("conversations.replies")) == 1
    assert [m["ts"] for m in bot_messages(slack_api, thread)] == [ts]


async def test_status_updates_are_coalesced_spaced_by_the_interval_and_end_on_the_final_state(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    interval_s = 0.3
    poster = SlackPoster(slack_client, outbox, min_update_interval_s=interval_s)
    ts = await poster.post(thread, f"{thread.session_id}:1", render_status(Progress("s", "start")))

    for i in range(30):
        await poster.update_status(thread.channel_id, ts, render_status(Progress("s", f"step {i}")))
    final = render_status(Progress("s", "all done", elapsed_s=9, finished=True))
    await poster.update_status(thread.channel_id, ts, final, final=True)

    updates = slack_api.calls_to("chat.update")
    assert 1 <= len(updates) <= 3
    gaps = [b.at_s - a.at_s for a, b in itertools.pairwise(updates)]
    assert all(gap >= interval_s for gap in gaps)
    (message,) = [m for m in bot_messages(slack_api, thread) if m["ts"] == ts]
    assert message["blocks"] == list(final.blocks)


async def test_rate_limited_status_update_waits_retry_after_and_nothing_is_lost(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    poster = SlackPoster(slack_client, outbox, min_update_interval_s=0.05)
    ts = await poster.post(thread, f"{thread.session_id}:1", render_status(Progress("s", "start")))
    slack_api.rate_limit_next("chat.update", retry_after_s=1)

    final = render_status(Progress("s", "Running `kubectl rollout undo`", elapsed_s=61))
    await poster.update_status(thread.channel_id, ts, final, final=True)

    limited, retried = slack_api.calls_to("chat.update")
    assert (limited.status, retried.status) == (429, 200)
    assert retried.waited_s is not None
    assert retried.waited_s >= 1.0
    (message,) = [m for m in bot_messages(slack_api, thread) if m["ts"] == ts]
    assert message["blocks"] == list(final.blocks)


async def test_long_answer_is_split_into_parts_posted_in_order_with_their_own_keys(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    answer = "\n\n".join([PARAGRAPH] * 20)  # ~28,000 chars: 3 messages
    key = f"{thread.session_id}:12"

    posted = await SlackPoster(slack_client, outbox).post_answer(thread, key, answer)

    messages = bot_messages(slack_api, thread)
    assert [m["ts"] for m in messages] == list(posted.message_ts)
    assert [m["metadata"]["event_payload"]["key"] for m in messages] == [
        key,
        f"{key}/2",
        f"{key}/3",
    ]
    assert "\n\n".join(m["blocks"][0]["text"] for m in messages) == answer
    assert posted.file_id is None


async def test_answer_too_long_for_messages_is_uploaded_into_the_thread_as_a_file(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    answer = "\n\n".join([PARAGRAPH] * 60)  # ~83,000 chars

    posted = await SlackPoster(slack_client, outbox).post_answer(
        thread, f"{thread.session_id}:3", answer
    )

    assert posted.file_id is not None
    assert slack_api.state.files[posted.file_id]["content"].decode() == answer
    preview, share = bot_messages(slack_api, thread)
    assert "attached below as a file" in preview["blocks"][0]["text"]
    assert share["files"][0]["id"] == posted.file_id


async def test_msg_too_long_on_a_post_falls_back_to_a_file(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    slack_api.fail_next("chat.postMessage", "msg_too_long")
    answer = "## Findings\n\n" + PARAGRAPH

    posted = await SlackPoster(slack_client, outbox).post_answer(
        thread, f"{thread.session_id}:4", answer
    )

    assert posted.message_ts == ()
    assert posted.file_id is not None
    assert slack_api.state.files[posted.file_id]["content"].decode() == answer
    (share,) = bot_messages(slack_api, thread)
    assert "too long for Slack messages" in share["text"]


async def test_upload_interrupted_before_recording_is_found_by_its_file_name(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    key = f"{thread.session_id}:5"
    output = "\n".join(f"{i} GET /checkout 500" for i in range(5_000))
    with pytest.raises(WorkerDied):
        await SlackPoster(slack_client, DyingOutbox(outbox)).post_tool_output(
            thread, key, command="kubectl logs checkout-7d9", output=output
        )

    file_id = await SlackPoster(slack_client, outbox).post_tool_output(
        thread, key, command="kubectl logs checkout-7d9", output=output
    )

    assert len(slack_api.calls_to("files.completeUploadExternal")) == 1
    (share,) = bot_messages(slack_api, thread)
    assert share["files"][0] == {
        "id": file_id,
        "name": f"output-{thread.session_id}-5.txt",
        "title": "Output of kubectl logs checkout-7d9",
        "size": len(output),
    }


async def test_thinking_status_uses_assistant_threads_set_status(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    poster = SlackPoster(slack_client, outbox)

    assert await poster.set_thinking(thread)
    slack_api.fail_next("assistant.threads.setStatus", "channel_not_found")
    assert not await poster.set_thinking(thread, "")

    (first, _) = slack_api.calls_to("assistant.threads.setStatus")
    assert first.args == {
        "channel_id": thread.channel_id,
        "thread_ts": thread.thread_ts,
        "status": "is thinking…",
    }


async def test_markdown_answer_uses_slacks_markdown_block(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    await SlackPoster(slack_client, outbox).post_answer(
        thread, f"{thread.session_id}:2", "**Cause:** pool exhausted"
    )

    (message,) = bot_messages(slack_api, thread)
    assert message["blocks"] == list(markdown_message("**Cause:** pool exhausted").blocks)


async def open_thread(database: Database, slack_api: FakeSlackApi, text: str) -> Thread:
    """A session on a new thread (its mention seeded in the fake Slack)."""
    root = slack_api.add_message(CHANNEL, f"<@U0FAKEBOT> {text}")
    opened = await SessionStore(database).open_or_join(
        SessionKey("T0FAKETEAM", CHANNEL, root),
        requester_id="U0FAKEALICE",
        initial_checkpoint="{}",
        text=text,
        source_ts=root,
    )
    return Thread(opened.session_id, CHANNEL, root)


async def test_five_sessions_status_updates_stay_within_the_workspaces_chat_update_budget(
    database: Database, outbox: Outbox
) -> None:
    # Given Slack's Tier 3 limit for chat.update (50 a minute) applied to a 2 s window,
    # and a poster whose workspace budget is 45 per that window
    slack_api = FakeSlackApi(rate_window_s=2.0)
    await slack_api.start()
    try:
        client = AsyncWebClient(token=slack_api.token, base_url=slack_api.base_url)
        budget = CallBudget(45, window_s=2.0)
        poster = SlackPoster(client, outbox, min_update_interval_s=0.0, update_budget=budget)
        threads = [await open_thread(database, slack_api, f"service {i} is down") for i in range(5)]
        statuses = [
            await poster.post(
                t, f"{t.session_id}:status:0", render_status(Progress(t.session_id, "Start"))
            )
            for t in threads
        ]
        # When five sessions report progress as fast as their steps go (40 steps each)
        for step in range(40):
            for thread, ts in zip(threads, statuses, strict=True):
                state = render_status(Progress(thread.session_id, f"Step {step}"))
                await poster.update_status(thread.channel_id, ts, state)
            await asyncio.sleep(0.01)  # the pace of the sessions' steps (load, not a wait)
        done = [render_status(Progress(t.session_id, "Done", finished=True)) for t in threads]
        await asyncio.gather(
            *(
                poster.update_status(t.channel_id, ts, d, final=True)
                for t, ts, d in zip(threads, statuses, done, strict=True)
            )
        )
    finally:
        await slack_api.stop()
    # Then Slack never had to refuse an update, and every message ends on its final state
    updates = slack_api.calls_to("chat.update")
    assert [c for c in updates if c.status == 429] == []
    assert len(updates) < 5 * 40, "updates were not coalesced"
    for ts, final in zip(statuses, done, strict=True):
        (message,) = [m for m in slack_api.state.messages[CHANNEL] if m["ts"] == ts]
        assert message["blocks"] == list(final.blocks)


class RacingOutbox:
    """Worker B's outbox: between B finding no record and recording its intent, worker A
    posts the same key (a turn's status message, shown by two workers at once)."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self.before_intent: Callable[[], Awaitable[None]] | None = None

    async def post_intent(self, session_id: str, key: str, **fields: Any) -> Any:
        if self.before_intent is not None:
            hook, self.before_intent = self.before_intent, None
            await hook()
        return await self.outbox.post_intent(session_id, key, **fields)

    async def post_done(self, key: str, ts: str) -> Any:
        return await self.outbox.post_done(key, ts)

    async def get_post(self, key: str) -> Any:
        return await self.outbox.get_post(key)


async def test_the_loser_of_a_post_race_remembers_the_recorded_ts_not_its_own(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    key = f"{thread.session_id}:status:0"
    a = SlackPoster(slack_client, outbox, min_update_interval_s=0.0)
    racing = RacingOutbox(outbox)
    b = SlackPoster(slack_client, racing, min_update_interval_s=0.0)
    won: list[str] = []

    async def a_posts() -> None:
        won.append(await a.post(thread, key, notice("Working…"), kind="status"))

    # Given A posting the key while B is about to post it too
    racing.before_intent = a_posts
    lost = await b.post(thread, key, notice("Working…"), kind="status")

    # Then B answers, and goes on addressing, the message the outbox recorded: A's
    record = await outbox.get_post(key)
    assert record is not None
    assert won == [record.ts] == [lost]
    assert await b.recorded_ts(key) == record.ts
    assert await b.post(thread, key, notice("Working…"), kind="status") == record.ts


class HeldOutbox(RacingOutbox):
    """Worker A's outbox: its intent is recorded, then A is held before its Slack call
    (``go``), as a post whose ``chat.postMessage`` is not answered yet."""

    def __init__(self, outbox: Outbox) -> None:
        super().__init__(outbox)
        self.recorded = asyncio.Event()
        self.go = asyncio.Event()

    async def post_intent(self, session_id: str, key: str, **fields: Any) -> Any:
        intent = await self.outbox.post_intent(session_id, key, **fields)
        self.recorded.set()
        await self.go.wait()
        return intent


class PolledOutbox(RacingOutbox):
    """Worker B's outbox: ``polled_again`` once B reads the key a second time (it waits
    for the other poster's ts instead of posting)."""

    def __init__(self, outbox: Outbox) -> None:
        super().__init__(outbox)
        self.reads = 0
        self.polled_again = asyncio.Event()

    async def get_post(self, key: str) -> Any:
        self.reads += 1
        if self.reads >= 2:
            self.polled_again.set()
        return await self.outbox.get_post(key)


async def test_a_post_in_flight_on_another_worker_is_waited_for_not_made_twice(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    key = f"{thread.session_id}:status:1"
    held = HeldOutbox(outbox)
    a = SlackPoster(slack_client, held, min_update_interval_s=0.0)
    watched = PolledOutbox(outbox)
    b = SlackPoster(slack_client, watched, min_update_interval_s=0.0)
    # Given worker A recorded the key's intent and its post is on its way to Slack
    first = asyncio.create_task(a.post(thread, key, notice("Working…"), kind="status"))
    await held.recorded.wait()

    # When worker B shows the same status message meanwhile, and then A's post lands
    second = asyncio.create_task(b.post(thread, key, notice("Working…"), kind="status"))
    waiting = asyncio.create_task(watched.polled_again.wait())
    await asyncio.wait([waiting, second], return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    held.go.set()
    a_ts, b_ts = await asyncio.gather(first, second)

    # Then the message was posted once, and both address it
    posts = [c for c in slack_api.calls_to("chat.postMessage") if c.response.get("ok")]
    assert len(posts) == 1
    assert a_ts == b_ts == posts[0].response["ts"]
