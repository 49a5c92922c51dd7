"""The same app over Socket Mode: the real bolt handler connects to a local Socket Mode fake.

The handler asks ``apps.connections.open`` for a WebSocket URL, receives ``hello``, then
the envelopes of ``tests/bot/data/slack/socket_mode_*.json``; every envelope must be
acked by its ``envelope_id``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import text

from bot.slack.modes import RunningSlack, SocketMode, serve, start
from memory_store import Limits
from tests.bot.conftest import load_case
from tests.bot.slack_edge import SlackEdge, running_edge
from tests.fakes.slack_socket_mode import FakeSocketMode

ROOT_TS = "1767225600.000100"
TRIGGER = "1000000000001.0000000000002.fakefakefakefakefakefakefakefake"


@pytest.fixture
async def socket_mode() -> AsyncIterator[FakeSocketMode]:
    fake = FakeSocketMode()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def edge(tmp_path: Path, socket_mode: FakeSocketMode) -> AsyncIterator[SlackEdge]:
    async with running_edge(tmp_path) as running:
        connection = await connect(running, socket_mode)
        try:
            yield running
        finally:
            await connection.close()


async def connect(edge: SlackEdge, socket_mode: FakeSocketMode) -> RunningSlack:
    opener = AsyncWebClient(base_url=socket_mode.base_url)
    return await start(edge.app, SocketMode(socket_mode.app_token, web_client=opener))


def envelope(case: str, envelope_id: str, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(load_case(case))
    body.update(envelope_id=envelope_id, **changes)
    return body


async def test_an_event_and_its_retry_are_both_acked_and_start_one_session(
    edge: SlackEdge, socket_mode: FakeSocketMode
) -> None:
    # Given the first delivery of a mention and, later, Slack's retry of the same event
    first = envelope(
        "socket_mode_envelope_events_api_retry.json", "env-1", retry_attempt=0, retry_reason=""
    )
    retry = envelope("socket_mode_envelope_events_api_retry.json", "env-2")
    # When both arrive over the WebSocket
    await socket_mode.send(first)
    assert await socket_mode.ack_for("env-1") == {"envelope_id": "env-1"}
    await socket_mode.send(retry)
    assert await socket_mode.ack_for("env-2") == {"envelope_id": "env-2"}
    await edge.settle()
    # Then one session holds the request and one wake-up went out
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert await edge.inbox_texts(session.id) == [
        "payments-api p99 is 4s since 09:00, can you investigate?"
    ]
    assert len(edge.enqueued.calls) == 1
    assert socket_mode.connections_opened == 1


async def test_a_slash_command_is_acked_at_once_and_the_loading_modal_uses_its_trigger(
    edge: SlackEdge, socket_mode: FakeSocketMode
) -> None:
    await socket_mode.send(envelope("socket_mode_envelope_slash_command.json", "env-cmd"))

    assert await socket_mode.ack_for("env-cmd") == {"envelope_id": "env-cmd"}
    await edge.settle()
    (opened,) = edge.slack_api.calls_to("views.open")
    assert opened.args["trigger_id"] == TRIGGER
    assert opened.response["ok"] is True
    (updated,) = edge.slack_api.calls_to("views.update")
    assert "no skill named `triage`" in str(updated.args["view"])


async def test_the_bots_own_echo_over_socket_mode_is_acked_and_ignored(
    edge: SlackEdge, socket_mode: FakeSocketMode
) -> None:
    echo = {
        "envelope_id": "env-echo",
        "payload": load_case("event_message_bot_self_echo.json"),
        "type": "events_api",
        "accepts_response_payload": False,
        "retry_attempt": 0,
        "retry_reason": "",
    }

    await socket_mode.send(echo)

    assert await socket_mode.ack_for("env-echo") == {"envelope_id": "env-echo"}
    await edge.settle()
    assert await edge.session(ROOT_TS) is None
    assert edge.enqueued.calls == []


async def test_serve_runs_the_app_until_stop_is_set_and_then_finishes_its_work(
    tmp_path: Path, socket_mode: FakeSocketMode
) -> None:
    async with running_edge(tmp_path) as edge:
        # Given the app served over Socket Mode the way the CLI serves it
        stop = asyncio.Event()
        opener = AsyncWebClient(base_url=socket_mode.base_url)
        mode = SocketMode(socket_mode.app_token, web_client=opener)
        served = asyncio.create_task(serve(edge.app, mode, stop=stop, background=edge.background))
        # When a mention arrives and then the process is asked to stop
        await socket_mode.send(envelope("socket_mode_envelope_events_api_retry.json", "env-s"))
        await socket_mode.ack_for("env-s")
        stop.set()
        await asyncio.wait_for(served, timeout=10.0)
        # Then the mention was recorded and woken before serve returned
        session = await edge.session(ROOT_TS)
        assert session is not None
        assert edge.enqueued.calls == [(session.id, session.pending_token)]
        assert edge.background.pending == 0


async def test_a_refresh_disconnect_reconnects_and_later_envelopes_are_still_acked(
    edge: SlackEdge, socket_mode: FakeSocketMode
) -> None:
    # Given Slack asks the connection to refresh (it does so every few hours)
    await socket_mode.send(load_case("socket_mode_disconnect_refresh.json"))
    # When the client has reconnected through apps.connections.open
    await socket_mode.wait_for_sockets(2)
    await socket_mode.send(envelope("socket_mode_envelope_events_api_retry.json", "env-after"))
    # Then the envelope on the new connection is acked and handled
    assert await socket_mode.ack_for("env-after") == {"envelope_id": "env-after"}
    await edge.settle()
    assert socket_mode.connections_opened == 2
    assert await edge.session(ROOT_TS) is not None


@pytest.mark.postgres
async def test_an_event_whose_record_failed_is_not_acked_and_its_retry_starts_the_session(
    tmp_path: Path, socket_mode: FakeSocketMode, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    limits = Limits(lock_timeout_ms=100)
    async with running_edge(tmp_path, database_url=postgres_url, limits=limits) as edge:
        connection = await connect(edge, socket_mode)
        try:
            changes = {"ts": "1767400100.000001", "event_ts": "1767400100.000001"}
            first = envelope("socket_mode_envelope_events_api_retry.json", "env-1")
            first["payload"]["event"].update(changes)
            retry = copy.deepcopy(first) | {"envelope_id": "env-2"}
            # Given sessions cannot be written past the ack budget (a SHARE lock elsewhere)
            async with edge.database.engine.connect() as blocker:
                await blocker.execute(text("LOCK TABLE sessions IN SHARE MODE"))
                await socket_mode.send(first)
                await edge.slack_api.wait_for(lambda: "not recorded" in caplog.text, timeout_s=10)
                await blocker.rollback()
            # When Slack redelivers the unacked event
            await socket_mode.send(retry)
            assert await socket_mode.ack_for("env-2") == {"envelope_id": "env-2"}
            await edge.settle()
        finally:
            await connection.close()
        # Then the first was never acked, and the retry was recorded and woke the session
        assert not socket_mode.acked("env-1")
        session = await edge.session("1767400100.000001")
        assert session is not None
        assert edge.enqueued.calls == [(session.id, session.pending_token)]
