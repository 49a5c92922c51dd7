"""The composition root of a worker: builds every collaborator from ``Settings`` once.

A ``Runtime`` is opened on the event loop that will use it (a Dramatiq worker's
loop thread, or the ``chat``/``drill`` loop) and closed on the same loop; nothing
is built at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field

from slack_sdk.web.async_client import AsyncWebClient

from harness import AnthropicModel, Limits, Model, SandboxWorkspaces
from memory_store import Database, FileStore, Outbox, SessionStore
from sandbox_client import (
    BlaxelConfig,
    BlaxelProvider,
    LocalConfig,
    LocalProvider,
    SandboxManager,
    SandboxProvider,
    SetupStep,
)

from .poster import SlackPoster
from .progress import ThreadReporter
from .runner import Crasher, Enqueue, StepDriver, ThreadPoster, no_crash
from .settings import Settings

log = logging.getLogger(__name__)


def make_provider(settings: Settings) -> SandboxProvider:
    """The sandbox provider the settings name (no secrets enter a sandbox's env)."""
    if settings.sandbox_provider == "blaxel":
        return BlaxelProvider(
            BlaxelConfig(
                api_key=settings.require("bl_api_key", "the Blaxel provider needs an API key"),
                workspace=settings.require("bl_workspace", "the Blaxel provider needs a workspace"),
            )
        )
    return LocalProvider(
        LocalConfig(state_dir=settings.data_dir / "sbx", network=settings.sandbox_network)
    )


def make_model(settings: Settings) -> AnthropicModel:
    """The Anthropic adapter. Raises MissingSetting without ``ANTHROPIC_API_KEY``."""
    return AnthropicModel(
        api_key=settings.require("anthropic_api_key", "the agent needs a model"),
        model=settings.model,
        base_url=settings.anthropic_base_url,
        max_tokens=settings.max_tokens,
    )


def make_slack_client(settings: Settings) -> AsyncWebClient:
    """A Web API client. Raises MissingSetting without ``SLACK_BOT_TOKEN``."""
    token = settings.require("slack_bot_token", "Warroom posts to Slack with the bot token")
    return AsyncWebClient(token=token, base_url=settings.slack_api_url)


@dataclass
class Runtime:
    """Every long-lived collaborator of a worker process."""

    settings: Settings
    db: Database
    files: FileStore
    sessions: SessionStore
    outbox: Outbox
    manager: SandboxManager
    model: Model
    reporter: ThreadPoster
    driver: StepDriver
    closers: list[object] = field(default_factory=list)

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        enqueue: Enqueue,
        crash: Crasher = no_crash,
        reporter: ThreadPoster | None = None,
        model: Model | None = None,
        setup: tuple[SetupStep, ...] = (),
        migrate: bool = True,
    ) -> Runtime:
        """Build and connect everything.

        Raises:
            MissingSetting: a credential the configuration needs is absent.
            DatabaseUnavailable: the database could not be reached.
        """
        db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
        if migrate:
            await db.migrate()
        files, sessions, outbox = FileStore(db), SessionStore(db), Outbox(db)
        manager = SandboxManager(
            make_provider(settings), idle_suspend_s=settings.sandbox_idle_suspend_s
        )
        the_model = model or make_model(settings)
        the_reporter = reporter or ThreadReporter(SlackPoster(make_slack_client(settings), outbox))
        driver = StepDriver(
            sessions=sessions,
            files=files,
            model=the_model,
            workspaces=SandboxWorkspaces(manager, setup),
            poster=the_reporter,
            enqueue=enqueue,
            worker_id=f"worker-{uuid.uuid4().hex[:8]}",
            limits=Limits(max_steps=settings.max_steps, max_tokens=settings.max_tokens),
            lease_s=settings.lease_s,
            crash=crash,
        )
        return cls(settings, db, files, sessions, outbox, manager, the_model, the_reporter, driver)

    async def sweep_once(self) -> int:
        """One recovery sweep: re-enqueue what was lost, suspend idle sandboxes.

        Returns how many sessions were re-enqueued.
        """
        result = await self.sessions.sweep(
            max_crashes=self.settings.max_crashes, stale_after_s=self.settings.stale_after_s
        )
        for wakeup in result.requeue:
            await self.driver.enqueue(wakeup.session_id, wakeup.token)
        for session_id in result.failed:
            log.error("session %s failed: its step crashed its worker repeatedly", session_id)
        await self.manager.suspend_idle()
        return len(result.requeue)

    async def sweep_forever(self) -> None:
        """``sweep_once`` every ``sweep_interval_s`` until cancelled; errors are logged."""
        while True:
            try:
                await self.sweep_once()
            except Exception:
                log.exception("recovery sweep failed")
            await asyncio.sleep(self.settings.sweep_interval_s)

    async def close(self) -> None:
        """Release sandboxes' clients, HTTP clients and the database pool."""
        with contextlib.suppress(Exception):
            await self.manager.aclose()
        aclose = getattr(self.model, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
        await self.db.dispose()
