"""Status messages are written off the step (issue #32.1, #26.6): a step never waits for
the workspace's ``chat.update`` budget; views are merged per message, a turn's final view
goes first, and a late "Working" from another worker never overwrites "Finished".

The real ``SlackPoster`` and outbox, the fake Slack API; the budget is a gate the test
opens one turn at a time (a budget spent for the minute).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.budget import CallBudget
from bot.slack.poster import SlackPoster, Thread
from bot.slack.progress import ThreadReporter
from bot.slack.status_board import FINAL_KIND
from harness import Answered, Checkpoint, ModelResponded, Requester, Todo, TodoStatus, Usage
from memory_store import Database, Outbox, SessionKey, SessionStore
from tests.bot.durable_support import poll
from tests.fakes.slack_api import FakeSlackApi

DEADLINE_S = 10.0  # a deadline for a condition, not a timing assertion


class GatedBudget(CallBudget):
    """A budget with no turn left until the test grants one (``grant``)."""

    def __init__(self) -> None:
        super().__init__()
        self._turns = asyncio.Semaphore(0)
        self.waiting = 0

    async def take(self) -> None:
        self.waiting += 1
        await self._turns.acquire()
        self.waiting -= 1

    def grant(self, turns: int = 1) -> None:
        for _ in range(turns):
            self._turns.release()


async def _thread(database: Database, slack_api: FakeSlackApi, name: str) -> Thread:
    thread_ts = slack_api.add_message("C0FAKEINC", f"<@U0FAKEBOT> look at {name}")
    checkpoint = Checkpoint(name, "T0FAKETEAM", "C0FAKEINC", Requester("U0FAKEALICE"))
    opened = await SessionStore(database).open_or_join(
        SessionKey("T0FAKETEAM", "C0FAKEINC", thread_ts),
        requester_id="U0FAKEALICE",
        initial_checkpoint=checkpoint.to_json(),
        text="look",
        source_ts=thread_ts,
        session_id=name,
    )
    return Thread(opened.session_id, "C0FAKEINC", thread_ts)


async def _show(
    reporter: ThreadReporter,
    thread: Thread,
    *,
    finished: bool = False,
    todos: tuple[Todo, ...] = (),
) -> None:
    cp = Checkpoint(
        thread.session_id, "T0FAKETEAM", thread.channel_id, Requester("U0FAKEALICE"), todos=todos
    )
    said = ModelResponded(
        "end_turn" if finished else "tool_use", "", () if finished else ("Bash",), Usage(), 1
    )
    events = (said, Answered("Pool exhausted.")) if finished else (said,)
    await asyncio.wait_for(
        reporter.show_progress(
            session_id=thread.session_id,
            channel_id=thread.channel_id,
            thread_ts=thread.thread_ts,
            checkpoint=cp,
            events=events,
        ),
        DEADLINE_S,
    )


def _updates(slack_api: FakeSlackApi) -> list[tuple[str, str]]:
    return [(c.args["ts"], c.args["text"]) for c in slack_api.calls_to("chat.update")]


async def _until(check: Callable[[], bool], what: str) -> None:
    async def holds() -> bool:
        return check()

    await poll(holds, timeout_s=DEADLINE_S, what=what)


async def test_a_step_never_waits_for_the_update_budget_and_a_final_view_goes_first(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, database: Database
) -> None:
    budget = GatedBudget()
    poster = SlackPoster(slack_client, Outbox(database), update_budget=budget)
    reporter = ThreadReporter(poster)
    threads = [await _thread(database, slack_api, f"s{i}") for i in range(3)]

    # Given three sessions whose status messages are posted, with the budget spent
    for thread in threads:
        await _show(reporter, thread)
    await _until(lambda: len(slack_api.calls_to("chat.postMessage")) == 3, "three posts")
    # When each shows five more steps of progress and the last one finishes its turn
    for _ in range(5):
        for thread in threads:
            await _show(reporter, thread)
    await _show(reporter, threads[2], finished=True)  # returned: no step waited for the budget
    await _until(lambda: budget.waiting == 1, "the board waiting for a turn")
    assert _updates(slack_api) == []

    # Then the first turn of the budget goes to the finished session's status
    budget.grant()
    await _until(lambda: len(_updates(slack_api)) == 1, "one update")
    ((_, text),) = _updates(slack_api)
    assert text.startswith("Done")
    # And the other two get one update each (their latest view), not one per step
    budget.grant(10)
    assert await reporter.board.drain(timeout_s=DEADLINE_S)
    assert len(_updates(slack_api)) == 3
    await reporter.board.aclose()


async def test_a_late_working_view_from_another_worker_never_overwrites_finished(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, database: Database
) -> None:
    outbox = Outbox(database)
    slow_budget = GatedBudget()
    slow = ThreadReporter(SlackPoster(slack_client, outbox, update_budget=slow_budget))
    fast = ThreadReporter(SlackPoster(slack_client, outbox))
    thread = await _thread(database, slack_api, "moved")
    await _show(fast, thread)
    assert await fast.board.drain(timeout_s=DEADLINE_S)

    # Given a worker whose progress view of the turn waits for the budget
    await _show(slow, thread)
    await _until(lambda: slow_budget.waiting == 1, "the slow worker waiting for a turn")
    # When the turn's next step, in another worker, finishes it
    await _show(fast, thread, finished=True)
    assert await fast.board.drain(timeout_s=DEADLINE_S)
    # And the first worker's turn comes
    slow_budget.grant()
    assert await slow.board.drain(timeout_s=DEADLINE_S)

    # Then the message reads finished, without the Stop button
    (message,) = [m for m in slack_api.thread("C0FAKEINC", thread.thread_ts) if m.get("bot_id")]
    assert message["text"].startswith("Done")
    assert "warroom_stop" not in json.dumps(message["blocks"])
    await slow.board.aclose()
    await fast.board.aclose()


async def test_a_finished_status_says_done_and_shows_no_todo_in_progress(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, database: Database
) -> None:
    reporter = ThreadReporter(SlackPoster(slack_client, Outbox(database)))
    thread = await _thread(database, slack_api, "done")
    todos = (
        Todo("Check the pods", TodoStatus.COMPLETED, "Checking the pods"),
        Todo("Read the deploy log", TodoStatus.IN_PROGRESS, "Reading the deploy log"),
    )

    await _show(reporter, thread, finished=True, todos=todos)
    assert await reporter.board.drain(timeout_s=DEADLINE_S)

    (message,) = [m for m in slack_api.thread("C0FAKEINC", thread.thread_ts) if m.get("bot_id")]
    shown = json.dumps(message["blocks"])
    assert "Writing the answer" not in shown
    assert "Reading the deploy log" not in shown  # not "in progress" once finished
    assert "\\u2610 Read the deploy log" in shown  # ☐, as JSON escapes it
    assert "\\u25d0" not in shown  # ◐
    await reporter.board.aclose()


async def test_a_final_view_a_stopped_worker_never_sent_is_sent_by_another(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, database: Database
) -> None:
    outbox = Outbox(database)
    stopped_budget = GatedBudget()
    stopped = ThreadReporter(SlackPoster(slack_client, outbox, update_budget=stopped_budget))
    thread = await _thread(database, slack_api, "left")
    await _show(stopped, thread)
    # Given a worker that recorded its turn's final view, then stopped before its turn of
    # the budget came (a deploy under load)
    await _show(stopped, thread, finished=True)
    await _until(lambda: stopped_budget.waiting == 1, "the final view waiting for a turn")
    await stopped.board.aclose()
    # When another worker looks for final views recorded but never sent
    other = ThreadReporter(SlackPoster(slack_client, outbox))
    later = datetime.now(UTC) + timedelta(hours=1)
    other.board.resend(await outbox.unsent(FINAL_KIND, created_before=later))
    assert await other.board.drain(timeout_s=DEADLINE_S)
    # Then the status message reads finished, without the Stop button, and is not sent again
    (message,) = [m for m in slack_api.thread("C0FAKEINC", thread.thread_ts) if m.get("bot_id")]
    assert message["text"].startswith("Done")
    assert "warroom_stop" not in json.dumps(message["blocks"])
    assert await outbox.unsent(FINAL_KIND, created_before=later) == []
    await other.board.aclose()
