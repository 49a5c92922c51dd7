"""The transports' edges: a refused app token, a stop while connecting, a body that is not
JSON (issue #12, items 5 and 10)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackUnreachable
from bot.slack.background import Background
from bot.slack.modes import AppTokenRefused, SocketMode, open_connection, serve, start
from tests.bot.slack_edge import SlackEdge, running_edge
from tests.fakes.slack_socket_mode import FakeSocketMode


@pytest.fixture
async def socket_mode() -> AsyncIterator[FakeSocketMode]:
    fake = FakeSocketMode()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[SlackEdge]:
    async with running_edge(tmp_path) as running:
        yield running


async def test_a_refused_app_token_ends_the_start_instead_of_retrying(
    edge: SlackEdge, socket_mode: FakeSocketMode
) -> None:
    opener = AsyncWebClient(base_url=socket_mode.base_url)

    with pytest.raises(AppTokenRefused) as refused:
        async with asyncio.timeout(5):
            await start(edge.app, SocketMode("xapp-revoked", web_client=opener))

    assert refused.value.error == "invalid_auth"
    assert refused.value.variable == "SLACK_APP_TOKEN"
    assert socket_mode.connections_opened == 0


async def test_the_stop_signal_ends_a_start_that_keeps_failing_to_connect(
    edge: SlackEdge, socket_mode: FakeSocketMode
) -> None:
    # Given Slack hands out WebSocket URLs whose connections fail (the SDK retries forever)
    socket_mode.refuse_links = True
    opener = AsyncWebClient(base_url=socket_mode.base_url)
    stop = asyncio.Event()
    serving = asyncio.create_task(
        serve(
            edge.app,
            SocketMode(socket_mode.app_token, web_client=opener),
            stop=stop,
            background=Background(),
        )
    )
    await socket_mode.wait_for_refusals(1)

    # When the stop signal comes
    stop.set()

    # Then serve returns at once rather than at the next retry
    async with asyncio.timeout(3):
        await serving


async def test_open_connection_says_when_slack_cannot_be_reached() -> None:
    closed = AsyncWebClient(base_url="http://127.0.0.1:9/api/", timeout=5)

    with pytest.raises(SlackUnreachable):
        await open_connection(closed, "xapp-any")


async def test_a_signed_body_that_is_not_json_gets_400(edge: SlackEdge) -> None:
    for content_type, raw in [
        ("application/json", b"{not json"),
        ("application/x-www-form-urlencoded", b"payload=%7Bnot+json"),
    ]:
        response = await edge.post_raw(raw, content_type, "fake-signing-secret", None, None)

        assert response.status_code == 400, content_type


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Log records at INFO, set before the app is built (as ``serve`` does: bolt copies
    the root logger's level into its own loggers when it makes them)."""
    caplog.set_level(logging.INFO)
    return caplog


@pytest.mark.parametrize(
    ("secret", "age_s", "reason"),
    [("not-the-secret", 0, "bad signature"), ("fake-signing-secret", 6 * 60, "stale timestamp")],
)
async def test_a_refused_request_is_logged_by_what_identifies_it_never_its_body(
    logged: pytest.LogCaptureFixture, edge: SlackEdge, secret: str, age_s: int, reason: str
) -> None:
    # Given a large unsigned body, as anyone who reaches the port can send
    marker = "BODY-MARKER-" * 75_000  # 900 kB, under the listener's 1 MiB
    raw = ('{"type": "event_callback", "padding": "' + marker + '"}').encode()
    timestamp = int(time.time()) - age_s

    response = await edge.post_raw(
        raw, "application/json", secret, timestamp, {"User-Agent": "x" * 5000}
    )

    assert response.status_code == 401
    text = "\n".join(record.getMessage() for record in logged.records)
    assert "BODY-MARKER" not in text
    assert len(text) < 2000, text[:2000]
    refusals = [r for r in logged.records if r.getMessage().startswith("refused ")]
    assert len(refusals) == 1, text[:2000]
    line = refusals[0].getMessage()
    assert line.startswith("refused POST /slack/events from 127.0.0.1, ")
    assert f"{len(raw)} bytes body" in line
    assert f"x-slack-request-timestamp='{timestamp}'" in line
    assert line.endswith(f": {reason}")
