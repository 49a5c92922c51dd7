"""An alert webhook over the real Slack edge (fake Slack API, real store), for tests and bench."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts.auth import AlertAuth
from bot.alerts.intake import AlertIntake, AlertPolicy
from bot.alerts.routes import Routes
from bot.alerts.webhook import AlertWebhook, Taker, start_listener
from memory_store import AlertStore
from tests.bot.slack_edge import CHANNEL, SlackEdge, running_edge
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID

TOKEN = "alert-token-for-tests"
PD_SECRET = "pagerduty-signing-secret"
DATA = Path(__file__).parent / "data"


def payload(name: str) -> dict[str, Any]:
    """A recorded-shape payload from ``data/``."""
    loaded: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return loaded


@dataclass
class AlertEdge:
    """The Slack edge plus the alert webhook on a listener of its own."""

    edge: SlackEdge
    intake: AlertIntake
    store: AlertStore
    taker: Taker
    runner: web.AppRunner
    port: int
    http: httpx.AsyncClient
    org: str

    def url(self, source: str) -> str:
        return f"http://127.0.0.1:{self.port}/alerts/{source}"

    async def post(
        self,
        source: str,
        body: dict[str, Any] | bytes,
        *,
        token: str | None = TOKEN,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return await self.http.post(self.url(source), content=raw, headers=sent)

    async def settled(self) -> None:
        """Every recorded alert taken (awaited, not slept)."""
        await self.taker.settled()
        await self.intake.flush()


@asynccontextmanager
async def alert_edge(
    tmp_path: Path,
    *,
    database_url: str | None = None,
    policy: AlertPolicy | None = None,
    routes: Routes | None = None,
    taking: bool = True,
) -> AsyncIterator[AlertEdge]:
    """The running Slack edge and the webhook (``start_listener``) with its taker, running
    unless ``taking`` is False (a test that drives the intake itself: the taker would race
    it for the same recorded alert).

    On PostgreSQL (the run's shared database) the alerts belong to an org of their own."""
    org = TEAM_ID if database_url is None else f"T{uuid.uuid4().hex[:10].upper()}"
    async with running_edge(tmp_path, database_url=database_url) as edge:
        store = AlertStore(edge.database)
        intake = AlertIntake(
            store=store,
            sessions=edge.sessions,
            client=AsyncWebClient(token=edge.slack_api.token, base_url=edge.slack_api.base_url),
            poster=edge.poster,
            enqueue=edge.enqueued,
            bot_user_id=BOT_USER_ID,
            policy=policy or AlertPolicy(),
            dedupe=edge.dedupe,
        )
        taker = Taker(intake)
        webhook = AlertWebhook(
            intake=intake,
            taker=taker,
            routes=routes or Routes(default_channel=CHANNEL),
            auth=AlertAuth(token=TOKEN, pagerduty_secret=PD_SECRET),
            org_id=org,
        )
        runner, port = await start_listener(webhook, host="127.0.0.1", port=0)
        if taking:
            taker.start()
        try:
            async with httpx.AsyncClient(timeout=30.0, trust_env=False) as http:
                yield AlertEdge(edge, intake, store, taker, runner, port, http, org)
        finally:
            await taker.stop()
            await runner.cleanup()
