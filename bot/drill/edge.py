"""The real Slack app of the drill, in HTTP mode on 127.0.0.1, talking to the fake Web API.

Built as ``warroom serve`` builds it (``SlackDeps`` over the drill's database, its
Web API client from the settings, the bot's user id from ``auth.test``), then served
with ``slack_runtime.start`` on a free port. Requests must carry a valid Slack
signature for the drill's signing secret (``IncidentChannel`` signs them).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from bot.durable.actors import Actors
from bot.durable.wiring import kill_in_flight, make_provider, make_slack_client
from bot.errors import slack_call
from bot.settings import Settings
from bot.slack.app import SlackDeps, build_app
from bot.slack.background import Background
from bot.slack.modes import DEFAULT_PATH, HttpMode, RunningSlack, start
from bot.slack.poster import SlackPoster
from bot.slack.skills.command import SkillsCommands
from bot.slack.skills.edit_policy import EditPolicy
from harness import IncidentRecord
from memory_store import (
    Cancelled,
    Database,
    EgressLog,
    FileStore,
    InboundDedupe,
    IncidentLog,
    ModelCallLog,
    Outbox,
    SessionStore,
)
from sandbox_client import SandboxError

log = logging.getLogger(__name__)


@dataclass
class Edge:
    """The running app: ``url`` is where Slack would POST events."""

    running: RunningSlack
    background: Background

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
        client = make_slack_client(settings)
        identity = await slack_call("auth.test", client.auth_test())
        files = FileStore(db)
        provider = make_provider(settings)

        async def cancel_running(cancelled: Cancelled) -> None:
            with contextlib.suppress(SandboxError):
                await kill_in_flight(provider, cancelled)

        secret = settings.require("slack_signing_secret", "HTTP mode verifies requests")
        deps = SlackDeps(
            sessions=SessionStore(db),
            dedupe=InboundDedupe(db),
            files=files,
            client=client,
            signing_secret=secret,
            bot_user_id=str(identity["user_id"]),
            enqueue=actors.enqueue,
            cancel_running=cancel_running,
            skills=SkillsCommands(files, client, EditPolicy.parse(settings.skill_editors)),
            poster=SlackPoster(client, Outbox(db)),
            ledger=ModelCallLog(db),
            record=IncidentRecord(IncidentLog(db), identity.get("url") or None),
            egress=EgressLog(db),
        )
        background = Background()
        app = build_app(deps=deps, background=background)
        running = await start(app, HttpMode(host="127.0.0.1", port=0))
        return cls(running, background)

    async def close(self) -> None:
        """Stop listening; let started follow-ups finish (≤ 10 s), cancel the rest."""
        await self.running.close()
        with contextlib.suppress(TimeoutError):
            await self.background.drain(timeout_s=10.0)
        await self.background.cancel()
