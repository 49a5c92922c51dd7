"""``warroom fake-slack`` shows the agent session and its streamed steps as a person sees
them, and ``click stop`` clicks Slack's own Stop (a signed ``agent_session_stopped``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

from bot.cli.fake_slack import CHANNEL, agent_lines, deliver_lines, watch_channel
from bot.fakes.slack_api import TEAM_ID, FakeSlackApi
from bot.slack.agent_surface import AgentSurface
from bot.slack.poster import Thread
from bot.slack.stream_chunks import approval_chunk
from memory_store import SessionKey, SessionStatus
from tests.bot.slack_edge import running_edge

TASK = {"type": "task_update", "id": "t1", "title": "Running `kubectl get pods`"}


async def test_the_session_s_status_its_tasks_and_plan_are_printed_as_they_change(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    seen: dict[str, str] = {}
    thread_ts = slack_api.add_message(CHANNEL, "<@U0FAKEBOT> pods are down")
    await slack_client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=thread_ts, status="processing", title="pods are down"
    )
    started = await slack_client.chat_startStream(
        channel=CHANNEL,
        thread_ts=thread_ts,
        recipient_user_id="U0YOU",
        recipient_team_id=TEAM_ID,
        chunks=[{**TASK, "status": "in_progress"}],
    )
    first = agent_lines(slack_api, seen)
    assert first == [
        "agent session: processing · pods are down (Stop shown: type 'click stop')",
        "  ◐ Running `kubectl get pods`",
    ]
    assert agent_lines(slack_api, seen) == []  # nothing changed: nothing printed

    await slack_client.chat_appendStream(
        channel=CHANNEL,
        ts=started["ts"],
        chunks=[
            {**TASK, "status": "complete", "output": "done in 1.2 s\n3 pods"},
            {"type": "plan_update", "title": "Plan · 0/1 done"},
        ],
    )
    await slack_client.chat_stopStream(channel=CHANNEL, ts=started["ts"])
    # in the order Slack made them: the last task's line, then the session's status
    assert agent_lines(slack_api, seen) == [
        "  ● Running `kubectl get pods` — done in 1.2 s · 3 pods",  # time, first output line
        "  plan: Plan · 0/1 done",
        "  (stream stopped)",
        "agent session: active · pods are down",
    ]


async def test_a_call_waiting_for_approval_is_shown_waiting_not_stopped(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    seen: dict[str, str] = {}
    thread_ts = slack_api.add_message(CHANNEL, "<@U0FAKEBOT> pods are down")
    await slack_client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=thread_ts, status="processing", title="pods are down"
    )
    waiting = approval_chunk("t2", "systemctl restart payments", "restarts a service")
    started = await slack_client.chat_startStream(
        channel=CHANNEL,
        thread_ts=thread_ts,
        recipient_user_id="U0YOU",
        recipient_team_id=TEAM_ID,
        chunks=[{**TASK, "status": "in_progress"}, waiting],
    )
    agent_lines(slack_api, seen)
    # When the step asks for approval: the stream ends, the session is suspended
    await slack_client.chat_stopStream(
        channel=CHANNEL, ts=started["ts"], session_status="suspended"
    )
    lines = agent_lines(slack_api, seen)
    # Then the call that waits is shown waiting; only the one cut short is stopped
    assert "  ⏸ Waiting for approval: systemctl restart payments" in lines
    assert "  ■ Running `kubectl get pods` — stopped" in lines
    assert not any("Waiting for approval" in line and "stopped" in line for line in lines)


async def test_click_stop_sends_the_native_stop_which_stops_the_session(tmp_path: Path) -> None:
    said: list[str] = []
    async with running_edge(tmp_path) as edge:
        fake = edge.slack_api
        fake.state.messages.setdefault(CHANNEL, [])
        edge_channel_key: list[str] = []

        async def lines() -> AsyncIterator[str]:
            yield "checkout-api returns 500s"  # opens the thread and its session
            await edge.settle()
            root = next(m for m in fake.state.messages[CHANNEL] if "thread_ts" not in m)
            edge_channel_key.append(str(root["ts"]))
            session = await edge.sessions.find(SessionKey(TEAM_ID, CHANNEL, str(root["ts"])))
            assert session is not None
            # a worker runs its first step: the session is processing, a task streams
            surface = AgentSurface(edge.poster, team_id=TEAM_ID)
            thread = Thread(session.id, CHANNEL, str(root["ts"]))
            surface.push(
                thread, turn=1, chunks=[{**TASK, "status": "in_progress"}], initiator="U0YOU"
            )
            assert await surface.drain(timeout_s=10)
            yield "click stop"
            await edge.settle()  # the app closed the agent session
            yield "click stop"  # no Stop is shown any more: said so, nothing sent

        await deliver_lines(fake, edge.url, lines(), said.append)
        await edge.settle()

        session = await edge.sessions.find(SessionKey(TEAM_ID, CHANNEL, edge_channel_key[0]))
        assert session is not None
        assert session.status is SessionStatus.CANCELLED
        assert [c.session_id for c in edge.cancelled] == [session.id]
        agent = fake.agents.session(CHANNEL, edge_channel_key[0])
        assert agent is not None
        assert agent.status == "closed"
        assert said == ["no Stop is shown: the session is not processing"]


async def test_a_streamed_message_is_shown_by_its_steps_then_once_by_its_answer(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    said: list[str] = []
    answered = asyncio.Event()

    def say(line: str) -> None:
        said.append(line)
        if "OOMKilled" in line:
            answered.set()

    watching = asyncio.create_task(watch_channel(slack_api, say))
    try:
        thread_ts = slack_api.add_message(CHANNEL, "<@U0FAKEBOT> pods are down")
        started = await slack_client.chat_startStream(
            channel=CHANNEL,
            thread_ts=thread_ts,
            recipient_user_id="U0YOU",
            recipient_team_id=TEAM_ID,
            chunks=[{"type": "markdown_text", "text": "Looking at the pods."}],
        )
        answer = [{"type": "markdown", "text": "The pods crash-loop: OOMKilled."}]
        await slack_client.chat_stopStream(channel=CHANNEL, ts=started["ts"], blocks=answer)
        await asyncio.wait_for(answered.wait(), timeout=10)
    finally:
        watching.cancel()
    # the note is shown once, as a step (not again as the message's text), then the answer
    assert [line for line in said if "Looking at the pods." in line] == ["  Looking at the pods."]
    assert [line for line in said if "OOMKilled" in line] == [
        "warroom: The pods crash-loop: OOMKilled."
    ]
