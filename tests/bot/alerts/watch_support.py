"""Watched channels over the real Slack edge, through either transport (tests)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts.intake import AlertPolicy
from bot.slack.modes import SocketMode, start
from bot.slack.watch import WatchPolicy
from memory_store import Session, SessionKey
from tests.bot.alerts.alert_cases import alert_body
from tests.bot.slack_edge import SlackEdge, running_edge
from tests.fakes.slack_api import TEAM_ID
from tests.fakes.slack_socket_mode import FakeSocketMode

WATCHED = "C0ALERTS"
SLACK_RETRIES = 3  # Slack retries an unacked event up to 3 times
T = TypeVar("T")
_envelopes = itertools.count(1)


class Channel:
    """Delivers events to the app over HTTP (signed) or Socket Mode (acked envelopes)."""

    def __init__(self, edge: SlackEdge, socket_mode: FakeSocketMode | None) -> None:
        self.edge = edge
        self.socket_mode = socket_mode

    async def deliver(self, body: dict[str, Any]) -> None:
        """Deliver one Events API body; AssertionError when the app does not take it.

        Over HTTP an unacked delivery (the app could not record it within its ack budget,
        as on a loaded host) is retried as Slack retries it, up to 3 times with
        ``X-Slack-Retry-Num``/``X-Slack-Retry-Reason`` (docs.slack.dev, "Events API":
        retries).
        """
        if self.socket_mode is None:
            response = await self.edge.post_event(body)
            for retry in range(1, SLACK_RETRIES + 1):
                if response.status_code == 200:
                    break
                retried = {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_error"}
                response = await self.edge.post_event(body, headers=retried)
            assert response.status_code == 200, response.text
        else:
            envelope_id = f"env-{next(_envelopes)}"
            await self.socket_mode.send(
                {
                    "envelope_id": envelope_id,
                    "payload": body,
                    "type": "events_api",
                    "accepts_response_payload": False,
                    "retry_attempt": 0,
                    "retry_reason": "",
                }
            )
            assert await self.socket_mode.ack_for(envelope_id) == {"envelope_id": envelope_id}
        await self.edge.settle()

    async def alert(self, case: str, *, channel: str = WATCHED, **changes: Any) -> str:
        """The app of ``case`` posts it in ``channel`` (stored in the fake Slack, then its
        event delivered); returns the post's ``ts``."""
        body = alert_body(case, channel=channel, **changes)
        event = body["event"]
        fields = {k: v for k, v in event.items() if k not in ("type", "channel", "channel_type")}
        fields = {k: v for k, v in fields.items() if k not in ("ts", "event_ts")}
        stored = self.edge.slack_api.add_bot_message(channel, fields)
        event.update(ts=stored["ts"], event_ts=stored["ts"])
        await self.deliver(body)
        return str(stored["ts"])


@asynccontextmanager
async def watched_channel(
    tmp_path: Path,
    transport: str,
    *,
    policy: WatchPolicy | None = None,
    database_url: str | None = None,
    **edge_options: Any,
) -> AsyncIterator[Channel]:
    """The Slack edge with ``WATCHED`` watched by default (``policy``), and a
    ``Channel`` delivering over ``transport`` (``http`` or ``socket``)."""
    policy = policy or WatchPolicy(default_channels=frozenset({WATCHED}))
    edge_options.setdefault("alert_policy", AlertPolicy(burst_window_s=0))
    async with running_edge(
        tmp_path, database_url=database_url, watch_policy=policy, **edge_options
    ) as edge:
        if transport == "http":
            yield Channel(edge, None)
            return
        socket_mode = FakeSocketMode()
        await socket_mode.start()
        opener = AsyncWebClient(base_url=socket_mode.base_url)
        connection = await start(edge.app, SocketMode(socket_mode.app_token, web_client=opener))
        try:
            yield Channel(edge, socket_mode)
        finally:
            await connection.close()
            await socket_mode.stop()


async def until(
    probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], *, timeout_s: float = 10.0
) -> T:
    """``await probe()`` until ``done`` of its result; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = await probe()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s: last {result!r}")
        await asyncio.sleep(0.02)


async def session_on(edge: SlackEdge, ts: str, *, channel: str = WATCHED) -> Session:
    """The session of the thread ``ts``, once the taker has opened it and woken a worker
    for it (the last thing a start does)."""
    found = await until(lambda: edge.sessions.find(SessionKey(TEAM_ID, channel, ts)), bool)
    assert found is not None

    async def woken() -> bool:
        return any(session_id == found.id for session_id, _ in edge.enqueued.calls)

    await until(woken, bool)
    return found
