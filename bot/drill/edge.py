"""The real Slack app of the drill, in HTTP mode on 127.0.0.1, talking to the fake Web API.

Built by ``warroom serve``'s own ``slack_deps`` (over the drill's database, its Web API
client from the settings, the bot's user id from ``auth.test``) with its watched
channels and the alert taker (``bot.alerts.watch_wiring``; the drill sets up no alert
webhook), then served with ``slack_runtime.start`` on a free port. Requests
must carry a valid Slack signature for the drill's signing secret (``IncidentChannel``
signs them).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from bot.alerts.watch_wiring import with_watch
from bot.alerts.webhook import Taker
from bot.alerts.wiring import build_alerts
from bot.cli.serve import slack_deps
from bot.durable.actors import Actors
from bot.durable.wiring import make_provider
from bot.settings import Settings
from bot.slack.app import build_app
from bot.slack.background import Background
from bot.slack.modes import DEFAULT_PATH, HttpMode, RunningSlack, start
from memory_store import (
    Database,
)

log = logging.getLogger(__name__)


@dataclass
class Edge:
    """The running app: ``url`` is where Slack would POST events."""

    running: RunningSlack
    background: Background
    taker: Taker

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/slack/events``."""
        return f"http://127.0.0.1:{self.running.port}{DEFAULT_PATH}"

    @classmethod
    async def start(cls, settings: Settings, db: Database, actors: Actors) -> Edge:
        """Build the app over ``db`` and serve it; wake-ups go through ``actors``.

        Raises:
            MissingSetting: no bot token in ``settings``.
            SlackCallFailed: ``auth.test`` failed.
            OSError: no port could be bound.
        """
        settings.require("slack_signing_secret", "HTTP mode verifies requests")
        provider = make_provider(settings, makes_jails=False)
        deps = await slack_deps(settings, db, provider, actors.enqueue)
        alerts = build_alerts(settings, deps, db)
        deps = with_watch(settings, deps, db, alerts)
        background = Background()
        app = build_app(deps=deps, background=background)
        running = await start(app, HttpMode(host="127.0.0.1", port=0))
        alerts.taker.start()
        return cls(running, background, alerts.taker)

    async def close(self) -> None:
        """Stop listening; let started follow-ups finish (≤ 10 s), cancel the rest."""
        await self.running.close()
        with contextlib.suppress(TimeoutError):
            await self.background.drain(timeout_s=10.0)
        await self.background.cancel()
        await self.taker.stop()
