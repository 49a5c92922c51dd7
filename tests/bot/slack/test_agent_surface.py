"""Slack's agent surface through ``ThreadReporter``: the agent session and streamed steps.

The fake Slack answers the agent-surface methods as strictly as docs.slack.dev describes
them (``bot/fakes/slack_agents.py``); the outbox is the real one. A process that died is
a new ``AgentSurface`` over the same outbox: all it knows is what the outbox recorded.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import agent_surface
from bot.slack.agent_surface import (
    DEFERRED_KIND,
    AgentStatus,
    AgentSurface,
    SurfaceBudgets,
    stream_key,
)
from bot.slack.budget import CallBudget
from bot.slack.poster import SlackPoster, Thread
from bot.slack.progress import ThreadReporter
from harness import (
    ApprovalRequested,
    Checkpoint,
    Event,
    Inbound,
    Message,
    ModelResponded,
    PendingApproval,
    Requester,
    ScheduledWakeup,
    TextBlock,
    Todo,
    TodosChanged,
    TodoStatus,
    ToolFinished,
    ToolIntent,
    ToolUseBlock,
    Usage,
)
from memory_store import Database, Outbox, OutboxItem, SessionKey, SessionStore
from tests.fakes.slack_api import TEAM_ID, FakeSlackApi

ALERT = "<@U0FAKEBOT> checkout is returning 500s since the 14:02 deploy"


def checkpoint(thread: Thread, *, turns: int = 1, waits: bool = False) -> Checkpoint:
    """A session mid-turn: a model step is due (``waits``: it is parked instead)."""
    cp = Checkpoint(
        thread.session_id,
        TEAM_ID,
        thread.channel_id,
        Requester("U0FAKEALICE"),
        messages=(Message("user", (TextBlock(ALERT),)),),
        turns=turns,
    )
    if waits:  # the model ended its turn without an answer: it waits for its command
        said = Message("assistant", (TextBlock("It runs in the background."),))
        return replace(cp, messages=(*cp.messages, said))
    return replace(cp, pending_input=(Inbound("U0FAKEALICE", "go on"),))


def reporter_over(client: AsyncWebClient, outbox: Outbox) -> ThreadReporter:
    poster = SlackPoster(client, outbox, min_update_interval_s=0.0)
    return ThreadReporter(poster, surface=AgentSurface(poster))


async def show(reporter: ThreadReporter, thread: Thread, cp: Checkpoint, *events: Event) -> None:
    await reporter.show_progress(
        session_id=thread.session_id,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        checkpoint=cp,
        events=events,
    )
    assert reporter.surface is not None
    assert await reporter.surface.drain(timeout_s=10)


async def answer(reporter: ThreadReporter, thread: Thread, text: str, n: int = 2) -> str:
    return await reporter.post_answer(
        key=f"{thread.session_id}:answer:{n}",
        session_id=thread.session_id,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        markdown=text,
    )


def ran(tool_use_id: str, command: str) -> ToolIntent:
    return ToolIntent(tool_use_id=tool_use_id, name="Bash", summary=command)


def done(tool_use_id: str, command: str, output: str = "ok") -> ToolFinished:
    return ToolFinished(
        tool_use_id=tool_use_id,
        name="Bash",
        summary=command,
        is_error=False,
        output_chars=len(output),
        output_head=output,
        elapsed_ms=1200,
    )


def approval(tool_use_id: str = "tu-restart") -> PendingApproval:
    now = datetime.now(UTC)
    return PendingApproval(
        tool_use_id=tool_use_id,
        tool="Bash",
        input_sha256="0" * 64,
        action="systemctl restart payments",
        reason="restarts a production service",
        requested_at=now,
        expires_at=now + timedelta(minutes=30),
    )


def methods(slack_api: FakeSlackApi) -> list[str]:
    shown = ("agents.", "chat.", "assistant.")
    return [c.method for c in slack_api.calls if c.method.startswith(shown)]


async def test_the_session_status_follows_the_whole_turn_and_each_tool_call_is_a_task(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    cp = checkpoint(thread)
    agents = slack_api.agents

    # A tool step: the session is processing, titled from the alert, the call is a task
    await show(reporter, thread, cp, ran("tu1", "kubectl get pods"))
    session = agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.title == "checkout is returning 500s since the 14:02 deploy"
    assert session.initiator_user_id == "U0FAKEALICE"
    assert session.statuses == ["processing"]
    await show(reporter, thread, cp, done("tu1", "kubectl get pods", "3 pods CrashLoopBackOff"))
    todos = (Todo("Read the logs", TodoStatus.IN_PROGRESS, "Reading the logs"),)
    await show(reporter, thread, replace(cp, todos=todos), TodosChanged(todos=()))

    [stream] = agents.streams_in(thread.channel_id, thread.thread_ts)
    task = stream.tasks()["tu1"]
    assert (task["title"], task["status"]) == ("Running `kubectl get pods`", "complete")
    assert "3 pods CrashLoopBackOff" in task["output"]
    assert "1.2 s" in task["output"]
    assert stream.tasks()["todo-0"]["status"] == "in_progress"
    assert any(c["type"] == "plan_update" for c in stream.chunks)

    # An approval request: the stream ends suspended, the request keeps its buttons
    ts = await reporter.ask_approval(
        key=f"{thread.session_id}:approval:tu-restart",
        session_id=thread.session_id,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        approval=approval(),
        requester_id="U0FAKEALICE",
    )
    assert session.statuses == ["processing", "suspended"]
    assert stream.state == "stopped"
    asked = [m for m in slack_api.thread(thread.channel_id, thread.thread_ts) if m["ts"] == ts]
    assert any(b["type"] == "actions" for b in asked[0]["blocks"])

    # Approved: the next step opens a second stream, processing again
    await show(reporter, thread, cp, ran("tu-restart", "systemctl restart payments"))
    assert session.statuses == ["processing", "suspended", "processing"]
    first, second = agents.streams_in(thread.channel_id, thread.thread_ts)
    assert first is stream
    assert second.state == "streaming"

    # The answer ends that stream with the answer's blocks, findable by its key: active
    posted = await answer(reporter, thread, "The pool was exhausted; restarted it.")
    assert posted == second.ts
    assert second.state == "stopped"
    assert second.metadata == {
        "event_type": "warroom_post",
        "event_payload": {"key": f"{thread.session_id}:answer:2"},
    }
    assert "The pool was exhausted" in str(second.blocks)
    assert session.status == "active"

    # `stop` closes it
    await reporter.end_session(thread)
    assert session.statuses[-1] == "closed"
    assert "chat.update" not in methods(slack_api)
    assert "assistant.threads.setStatus" not in methods(slack_api)


async def park(
    reporter: ThreadReporter, thread: Thread, cp: Checkpoint, key: str, *events: Event
) -> None:
    """What the durable step that parks the session does before its commit."""
    await reporter.show_parked(
        key=key,
        session_id=thread.session_id,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        checkpoint=cp,
        events=events,
    )


async def test_a_step_that_parks_the_session_suspends_it_once_before_its_commit(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    await show(reporter, thread, checkpoint(thread), ran("tu1", "sleep 600 &"))
    # the step started a background command; the session now waits for it: the step
    # closes the stream suspended, its own chunks last, before it commits
    parked = checkpoint(thread, waits=True)
    key = f"{thread.session_id}:park:token-1"
    await park(reporter, thread, parked, key, done("tu1", "sleep 600 &"))
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.statuses == ["processing", "suspended"]
    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert stream.state == "stopped"
    assert stream.tasks()["tu1"]["status"] == "complete"

    # the step is retried by another process (its commit was lost): nothing is set again
    await park(reporter_over(slack_client, outbox), thread, parked, key, done("tu1", "sleep"))
    # and its progress, shown after the commit, adds nothing (it was shown parked)
    await show(reporter, thread, parked, done("tu1", "sleep 600 &"))
    assert session.statuses == ["processing", "suspended"]
    assert len(slack_api.calls_to("chat.startStream")) == 1
    assert len(slack_api.calls_to("chat.stopStream")) == 1
    assert len(slack_api.calls_to("agents.sessions.setStatus")) == 1  # processing, at start
    assert (await outbox.get_post(key)) is not None


async def test_a_step_that_parks_a_turn_without_a_stream_shows_its_chunks_closed(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    key = f"{thread.session_id}:park:token-2"
    await park(reporter, thread, checkpoint(thread, waits=True), key, done("tu1", "uptime"))
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.title == "checkout is returning 500s since the 14:02 deploy"
    assert session.statuses == ["processing", "suspended"]
    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert stream.state == "stopped"
    assert stream.tasks()["tu1"]["status"] == "complete"


async def answer_parked(reporter: ThreadReporter, thread: Thread, text: str) -> str:
    """The answer of a session that then waits for its wake-up (as the post step sends it)."""
    wakeup = ScheduledWakeup(time.time() + 600, "rollout", "Check the rollout again.")
    return await reporter.post_answer(
        key=f"{thread.session_id}:answer:2",
        session_id=thread.session_id,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        markdown=text,
        checkpoint=replace(checkpoint(thread), answer=text, wakeup=wakeup),
    )


async def test_an_answer_after_which_the_session_waits_on_leaves_it_suspended(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    await show(reporter, thread, checkpoint(thread), ran("tu1", "kubectl rollout status"))
    # the model scheduled a wake-up (or left a background command running) and answered
    posted = await answer_parked(reporter, thread, "Rolling out; I will check at 14:30.")
    again = await answer_parked(reporter_over(slack_client, outbox), thread, "Rolling out.")

    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert posted == again == stream.ts
    assert "I will check at 14:30." in str(stream.blocks)
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.statuses == ["processing", "suspended"]


async def test_an_answer_posted_as_a_message_sets_the_parked_status_once(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    # a turn with no tool call has no stream: the answer is a message, then the status
    await answer_parked(reporter_over(slack_client, outbox), thread, "I will check at 14:30.")
    # the post step is retried by another process (its commit was lost)
    await answer_parked(reporter_over(slack_client, outbox), thread, "I will check at 14:30.")

    assert len(slack_api.calls_to("chat.postMessage")) == 1
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.statuses == ["suspended"]
    assert session.title == "checkout is returning 500s since the 14:02 deploy"
    assert session.initiator_user_id == "U0FAKEALICE"


async def test_an_answer_without_a_stream_or_anything_pending_leaves_the_session_listening(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    await reporter.post_answer(
        key=f"{thread.session_id}:answer:2",
        session_id=thread.session_id,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        markdown="Nothing is wrong.",
        checkpoint=replace(checkpoint(thread), answer="Nothing is wrong."),
    )
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert (session.statuses, session.title) == (
        ["active"],
        "checkout is returning 500s since the 14:02 deploy",
    )


async def test_a_process_that_died_mid_stream_leaves_one_stream_the_next_completes(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    dead = reporter_over(slack_client, outbox)
    cp = checkpoint(thread)
    await show(dead, thread, cp, ran("tu1", "kubectl logs deploy/checkout"))
    # the worker dies here; another one runs the next steps and the answer
    heir = reporter_over(slack_client, outbox)
    await show(heir, thread, cp, done("tu1", "kubectl logs deploy/checkout"))
    key = f"{thread.session_id}:answer:2"
    first = await answer(heir, thread, "Found it.")
    # the answer step is retried (its commit was lost): nothing is posted or stopped again
    again = await answer(reporter_over(slack_client, outbox), thread, "Found it.")

    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert first == again == stream.ts
    assert stream.state == "stopped"
    assert stream.tasks()["tu1"]["status"] == "complete"
    assert len(slack_api.calls_to("chat.startStream")) == 1
    assert len([c for c in slack_api.calls_to("chat.stopStream") if c.response["ok"]]) == 1
    assert await outbox.get_post(stream_key(thread.session_id, 1, 0)) is not None
    assert (await outbox.get_post(key)) is not None
    assert slack_api.calls_to("chat.postMessage") == []


async def test_an_answer_whose_stream_ended_is_posted_once_as_a_message(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    await show(reporter, thread, checkpoint(thread), ran("tu1", "uptime"))
    # Slack ends a stream some minutes after it started (measured by others: ~5 min)
    slack_api.agents.stream_lifetime_s = 0.0
    await show(reporter, thread, checkpoint(thread), done("tu1", "uptime"))
    # the chunks went on in a new stream rather than being lost
    old, new = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert old.state == "expired"
    assert new.tasks()["tu1"]["status"] == "complete"

    posted = await answer(reporter, thread, "All good.")
    again = await answer(reporter_over(slack_client, outbox), thread, "All good.")
    assert posted == again
    [message] = [m for m in slack_api.calls_to("chat.postMessage")]
    assert "All good." in str(message.args["blocks"])
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.status == "active"


async def test_two_threads_keep_separate_sessions_and_streams(
    slack_api: FakeSlackApi,
    slack_client: AsyncWebClient,
    outbox: Outbox,
    thread: Thread,
    database: Database,
) -> None:
    other_ts = slack_api.add_message("C0FAKEINC", "<@U0FAKEBOT> disk full on db-2")
    opened = await SessionStore(database).open_or_join(
        SessionKey(TEAM_ID, "C0FAKEINC", other_ts),
        requester_id="U0FAKEBOB",
        initial_checkpoint="{}",
        text="disk full on db-2",
        source_ts=other_ts,
    )
    other = Thread(opened.session_id, "C0FAKEINC", other_ts)
    reporter = reporter_over(slack_client, outbox)
    await show(reporter, thread, checkpoint(thread), ran("a1", "df -h"))
    await show(reporter, other, checkpoint(other), ran("b1", "du -sh /var"))
    await answer(reporter, thread, "Checkout is fine.")

    mine = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    theirs = slack_api.agents.session(other.channel_id, other.thread_ts)
    assert mine is not None
    assert theirs is not None
    assert (mine.status, theirs.status) == ("active", "processing")
    [a] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    [b] = slack_api.agents.streams_in(other.channel_id, other.thread_ts)
    assert set(a.tasks()) == {"a1"}
    assert set(b.tasks()) == {"b1"}


@pytest.mark.parametrize(
    ("error", "extra"),
    [("feature_disabled", {}), ("missing_scope", {"needed": "chat:write", "provided": "x"})],
)
async def test_a_workspace_that_refuses_the_surface_gets_the_status_message_once(
    slack_api: FakeSlackApi,
    slack_client: AsyncWebClient,
    outbox: Outbox,
    thread: Thread,
    error: str,
    extra: dict[str, str],
) -> None:
    slack_api.agents.refuse(error, **extra)
    reporter = reporter_over(slack_client, outbox)
    cp = checkpoint(thread)
    for step in range(3):
        await show(reporter, thread, cp, ran(f"tu{step}", "uptime"))
        await reporter.board.drain(timeout_s=10)
    await answer(reporter, thread, "Up for 3 days.")
    await reporter.board.drain(timeout_s=10)

    assert reporter.surface is not None
    assert not reporter.surface.available
    assert error in str(reporter.surface.refused)
    tried = [c.method for c in slack_api.calls if c.response.get("error") == error]
    assert tried == ["agents.sessions.setStatus"]  # asked once, then the status message
    posted = [str(c.args.get("text")) for c in slack_api.calls_to("chat.postMessage")]
    assert any("Up for 3 days." in str(c.args) for c in slack_api.calls_to("chat.postMessage"))
    assert len(posted) == 2  # the status message and the answer
    assert slack_api.calls_to("chat.update")  # the status message's updates


async def test_a_native_stop_leaves_the_streams_to_slack_and_closes_the_session(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    await show(reporter, thread, checkpoint(thread), ran("tu1", "sleep 3600"))
    event = slack_api.agents.click_stop(thread.channel_id, thread.thread_ts, "U0FAKEBOB")
    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert event["streaming_message_ts"] == [stream.ts]
    assert stream.state == "stopped_by_user"

    # the intake's surface (another process: it knows only the outbox) closes it
    poster = SlackPoster(slack_client, outbox)
    await AgentSurface(poster).end(thread, AgentStatus.CLOSED)
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.statuses == ["processing", "closed"]
    # the stream Slack stopped was not appended to again nor started anew
    await show(reporter, thread, checkpoint(thread), done("tu1", "sleep 3600"))
    assert len(slack_api.calls_to("chat.startStream")) == 1


async def test_a_command_the_model_asked_for_is_a_running_task_before_it_runs(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    call = ToolUseBlock("toolu_1", "Bash", {"command": "sleep 600\necho done"})
    cp = replace(
        checkpoint(thread), messages=(*checkpoint(thread).messages, Message("assistant", (call,)))
    )
    asked = ModelResponded("tool_use", "", ("Bash",), Usage(), 1)

    await show(reporter, thread, cp, asked)

    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    task = stream.tasks()["toolu_1"]
    # titled as its intent and result will be (one label: the harness's summary)
    assert (task["title"], task["status"]) == ("Running `sleep 600 echo done`", "in_progress")
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.status == "processing"  # Slack shows its Stop while the command runs


async def test_an_approval_request_shown_late_does_not_reopen_the_suspended_session(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    reporter = reporter_over(slack_client, outbox)
    cp = checkpoint(thread)
    await show(reporter, thread, cp, ran("tu1", "uptime"))
    # the next step (another worker) posts the request before this step's progress is shown
    other = reporter_over(slack_client, outbox)
    await other.ask_approval(
        key=f"{thread.session_id}:approval:tu-restart",
        session_id=thread.session_id,
        channel_id=thread.channel_id,
        thread_ts=thread.thread_ts,
        approval=approval(),
        requester_id="U0FAKEALICE",
    )
    requested = ApprovalRequested(
        tool_use_id="tu-restart",
        name="Bash",
        action="systemctl restart payments",
        reason="restarts a production service",
        input_sha256="0" * 64,
        expires_at="2099-01-01T00:00:00+00:00",
    )
    await show(reporter_over(slack_client, outbox), thread, cp, requested)

    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.statuses == ["processing", "suspended"]
    assert len(slack_api.calls_to("chat.startStream")) == 1


class StartWatched(Outbox):
    """The outbox, telling when a reader found ``key`` recorded without its ts twice (the
    surface read the segment: its intent, then its ts)."""

    def __init__(self, database: Database, key: str) -> None:
        super().__init__(database)
        self.key, self.misses, self.seen_starting = key, 0, asyncio.Event()

    async def get_post(self, key: str) -> OutboxItem | None:
        item = await super().get_post(key)
        if key == self.key and item is not None and not item.ts:
            self.misses += 1
            if self.misses >= 2:
                self.seen_starting.set()
        return item


async def test_an_answer_ends_the_stream_another_process_is_still_starting(
    slack_api: FakeSlackApi,
    slack_client: AsyncWebClient,
    outbox: Outbox,
    thread: Thread,
    database: Database,
) -> None:
    # a worker's writer has recorded the turn's stream and its chat.startStream is in flight
    starter = SlackPoster(slack_client, outbox)
    key = stream_key(thread.session_id, 1, 0)
    assert await starter.claim_intent(thread, key, kind="stream")
    # while another worker posts the answer, and finds the stream without its ts
    watched = StartWatched(database, key)
    answering = asyncio.create_task(answer(reporter_over(slack_client, watched), thread, "Done."))
    await watched.seen_starting.wait()
    started = await slack_client.chat_startStream(
        channel=thread.channel_id,
        thread_ts=thread.thread_ts,
        recipient_user_id="U0FAKEALICE",
        recipient_team_id=TEAM_ID,
        chunks=[{"type": "task_update", "id": "tu1", "title": "uptime", "status": "complete"}],
    )
    await starter.record_done(key, str(started["ts"]))
    posted = await answering

    # the answer ended that stream: none is left streaming beside the answer
    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert posted == stream.ts
    assert stream.state == "stopped"
    assert "Done." in str(stream.blocks)
    assert slack_api.calls_to("chat.postMessage") == []


async def test_an_answer_takes_a_stream_whose_starter_died_as_never_opened(
    slack_api: FakeSlackApi,
    slack_client: AsyncWebClient,
    outbox: Outbox,
    thread: Thread,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agent_surface, "STARTING_WAIT_S", 0.3)
    # a worker recorded the turn's stream and died before Slack answered its start
    key = stream_key(thread.session_id, 1, 0)
    assert await SlackPoster(slack_client, outbox).claim_intent(thread, key, kind="stream")

    await answer(reporter_over(slack_client, outbox), thread, "Done.")

    [message] = slack_api.calls_to("chat.postMessage")
    assert "Done." in str(message.args["blocks"])
    assert await outbox.get_post(f"{key}/stop") is not None
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.status == "active"


async def test_an_answer_with_the_stop_budget_spent_goes_at_once_and_the_stream_closes_later(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    # Given a workspace whose chat.stopStream budget is spent (a burst of sessions)
    now = [0.0]
    stop = CallBudget(1, window_s=1.0, clock=lambda: now[0])
    await stop.take()
    poster = SlackPoster(slack_client, outbox, min_update_interval_s=0.0)
    surface = AgentSurface(poster, budgets=SurfaceBudgets(stop=stop))
    reporter = ThreadReporter(poster, surface=surface)
    await show(reporter, thread, checkpoint(thread), ran("tu1", "kubectl get pods"))
    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)

    # When the answer is ready
    posted = await answer(reporter, thread, "The pool was exhausted; restarted it.")

    # Then it is posted at once as a message of its own (the step waits for no turn)
    assert posted != stream.ts
    said = [m for m in slack_api.thread(thread.channel_id, thread.thread_ts) if m["ts"] == posted]
    assert "The pool was exhausted" in str(said)
    assert stream.state == "streaming"
    # and once the budget frees a turn, the session's writer closes the stream: active
    now[0] += 2.0
    assert await surface.drain(timeout_s=10)
    assert stream.state == "stopped"
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.statuses[-1] == "active"
    assert "chat.update" not in methods(slack_api)


async def _answered_with_close_deferred(
    slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> tuple[list[float], AgentSurface]:
    """An answer posted while the workspace's chat.stopStream budget was spent: its
    stream's close waits in the writer; returns the budget's clock and the surface."""
    now = [0.0]
    stop = CallBudget(1, window_s=1.0, clock=lambda: now[0])
    await stop.take()
    poster = SlackPoster(slack_client, outbox, min_update_interval_s=0.0)
    surface = AgentSurface(poster, budgets=SurfaceBudgets(stop=stop))
    reporter = ThreadReporter(poster, surface=surface)
    await show(reporter, thread, checkpoint(thread), ran("tu1", "kubectl get pods"))
    await answer(reporter, thread, "The pool was exhausted; restarted it.")
    return now, surface


async def test_a_worker_stopping_with_a_close_still_waiting_sends_it(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    _now, surface = await _answered_with_close_deferred(slack_client, outbox, thread)
    # When the worker stops before the budget frees a turn (a deploy's SIGTERM)
    await surface.aclose()
    # Then no answered session is left streaming with Slack's Stop shown
    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert stream.state == "stopped"
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.status == "active", session.statuses


async def test_a_stop_in_another_process_while_a_close_waits_leaves_the_session_closed(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    now, surface = await _answered_with_close_deferred(slack_client, outbox, thread)
    # When a person types stop, handled by serve's own surface (another process)
    serve = AgentSurface(SlackPoster(slack_client, outbox, min_update_interval_s=0.0))
    await serve.end(thread, AgentStatus.CLOSED)
    # and the worker's waiting close then gets its turn
    now[0] += 2.0
    assert await surface.drain(timeout_s=10)
    # Then the session stays closed: the answer's status does not come after the stop
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.status == "closed", session.statuses


async def test_a_close_a_dead_worker_left_waiting_is_sent_by_another(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, outbox: Outbox, thread: Thread
) -> None:
    _now, surface = await _answered_with_close_deferred(slack_client, outbox, thread)
    # Given the worker dies with its close still waiting for Slack's budget (SIGKILL: its
    # writer is gone, nothing is sent)
    for lane in list(surface._lanes.values()):
        if lane.task is not None:
            lane.task.cancel()
    [stream] = slack_api.agents.streams_in(thread.channel_id, thread.thread_ts)
    assert stream.state == "streaming"
    # When another worker's sweep finds it in the outbox
    other = AgentSurface(SlackPoster(slack_client, outbox, min_update_interval_s=0.0))
    later = datetime.now(UTC) + timedelta(minutes=5)
    assert other.take_deferred(await outbox.unsent(DEFERRED_KIND, created_before=later)) == 1
    assert await other.drain(timeout_s=10)
    # Then the stream is closed and the session listens; the close is recorded done
    assert stream.state == "stopped"
    session = slack_api.agents.session(thread.channel_id, thread.thread_ts)
    assert session is not None
    assert session.status == "active", session.statuses
    assert await outbox.unsent(DEFERRED_KIND, created_before=later) == []
