"""Slack's native Stop (``agent_session_stopped``) through signed Events API requests.

The event's shape is docs.slack.dev's ("agent_session_stopped event"), in the Events API
envelope (``tests/bot/data/slack/event_agent_session_stopped.json``).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.slack.agent_surface import AgentSurface
from bot.slack.poster import Thread
from memory_store import SessionStatus
from tests.bot.conftest import load_case
from tests.bot.slack.test_app import REPLY, ROOT_TS, start_session, thread_messages
from tests.bot.slack_edge import CHANNEL, SlackEdge, event, running_edge

STOP_EVENT = "event_agent_session_stopped.json"


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[SlackEdge]:
    async with running_edge(tmp_path) as running:
        yield running


def stopped(event: dict[str, Any], *, event_id: str = "Ev0FAKESTOP1") -> dict[str, Any]:
    """The Events API body carrying ``event`` (as ``click_stop`` made it)."""
    body: dict[str, Any] = copy.deepcopy(load_case(STOP_EVENT))
    body["event"], body["event_id"] = event, event_id
    return body


async def processing(edge: SlackEdge, session_id: str) -> None:
    """The session's step is running: its stream is open and the session processing."""
    surface = AgentSurface(edge.poster, team_id="T0FAKETEAM")
    thread = Thread(session_id, CHANNEL, ROOT_TS)
    chunk = {"type": "task_update", "id": "tu1", "title": "Running `sleep 600`"}
    surface.push(thread, turn=1, chunks=[{**chunk, "status": "in_progress"}], initiator="U1")
    assert await surface.drain(timeout_s=10)


async def test_the_recorded_event_stops_the_thread_s_session_as_stop_does(
    edge: SlackEdge,
) -> None:
    session_id = await start_session(edge)

    response = await edge.post_event(load_case(STOP_EVENT))
    await edge.settle()

    assert response.status_code == 200
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert session.status is SessionStatus.CANCELLED
    assert [c.session_id for c in edge.cancelled] == [session_id]
    assert any("Stopped by <@U0FAKEBOB>" in t for t in thread_messages(edge, ROOT_TS))


async def test_a_click_during_a_long_command_ends_it_once_and_closes_the_session(
    edge: SlackEdge,
) -> None:
    session_id = await start_session(edge)
    await processing(edge, session_id)
    agents = edge.slack_api.agents
    event = agents.click_stop(CHANNEL, ROOT_TS, "U0FAKEBOB")

    # Slack retries an event it saw no ack for; a second person's click is another event
    await edge.post_event(stopped(event))
    await edge.post_event(stopped(event), headers={"X-Slack-Retry-Num": "1"})
    await edge.settle()

    assert [c.session_id for c in edge.cancelled] == [session_id]
    said = [t for t in thread_messages(edge, ROOT_TS) if "Stopped by" in t]
    assert len(said) == 1
    session = agents.session(CHANNEL, ROOT_TS)
    assert session is not None
    assert session.statuses == ["processing", "closed"]
    [stream] = agents.streams_in(CHANNEL, ROOT_TS)
    assert stream.state == "stopped_by_user"  # Slack stopped it; nothing appended since


async def test_a_stop_in_a_thread_without_a_session_is_acked_and_ignored(
    edge: SlackEdge,
) -> None:
    body = load_case(STOP_EVENT)
    body["event"]["thread_ts"] = "1767999999.000001"

    response = await edge.post_event(body)
    await edge.settle()

    assert response.status_code == 200
    assert edge.cancelled == []
    assert edge.slack_api.calls_to("chat.postMessage") == []


async def test_the_typed_stop_closes_the_agent_session_too(edge: SlackEdge) -> None:
    session_id = await start_session(edge)
    await processing(edge, session_id)

    await edge.post_event(event(REPLY, text="stop", ts="1767225900.000100"))
    await edge.settle()

    assert [c.session_id for c in edge.cancelled] == [session_id]
    session = edge.slack_api.agents.session(CHANNEL, ROOT_TS)
    assert session is not None
    assert session.statuses == ["processing", "closed"]
    [stream] = edge.slack_api.agents.streams_in(CHANNEL, ROOT_TS)
    assert stream.state == "stopped"  # the open stream was ended by chat.stopStream
