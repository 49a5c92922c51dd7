"""``warroom serve``: the Slack app, and (without ``REDIS_URL``) an in-process worker.

The embedded default is one process: the bolt app in Socket Mode (or HTTP mode with
``WARROOM_SLACK_MODE=http``) on the main event loop, and Dramatiq worker threads over
the in-memory broker, with their own event loop and ``Runtime`` (local sandboxes,
SQLite under ``WARROOM_DATA_DIR`` unless ``DATABASE_URL`` says otherwise). With
``REDIS_URL`` the process is the bot only: it enqueues to Redis and ``warroom
worker`` processes, on any hosts, run the steps (docs/architecture.md §5).

SIGTERM or SIGINT stops taking Slack input, waits for follow-ups, then lets the
in-process worker finish its running steps before exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncApp

from bot.alerts.watch_wiring import with_watch
from bot.alerts.webhook import start_listener
from bot.alerts.wiring import Alerts, build_alerts
from bot.cli.model_reach import model_unreachable
from bot.durable.actors import STEP_TIME_LIMIT_MS, EmbeddedWorker, setup
from bot.durable.routing import HostRouter, routes_by_host
from bot.durable.sandboxes import make_sandbox_manager
from bot.durable.wiring import (
    cancel_running,
    make_provider,
    make_slack_client,
    surface_budgets,
    update_budget,
)
from bot.errors import slack_call
from bot.metrics import start_metrics_server
from bot.settings import Settings
from bot.slack.agent_surface import AgentSurface
from bot.slack.app import SlackDeps, build_app
from bot.slack.approvals import Approvers
from bot.slack.background import Background
from bot.slack.installation import Installation
from bot.slack.modes import HttpMode, SocketMode
from bot.slack.modes import serve as serve_slack
from bot.slack.poster import SlackPoster
from bot.slack.skills.command import SkillsCommands
from bot.slack.skills.edit_policy import EditPolicy
from harness import IncidentRecord
from memory_store import (
    BackgroundTasks,
    Cancelled,
    Database,
    EgressLog,
    FileStore,
    HostStore,
    InboundDedupe,
    IncidentLog,
    ModelCallLog,
    Outbox,
    RecallStore,
    SessionStore,
)
from sandbox_client import SandboxProvider

__all__ = ["alerts_running", "run_serve", "serve", "slack_deps"]

log = logging.getLogger(__name__)

Enqueue = Callable[[str, str], Awaitable[None]]


def run_serve(settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT (see the module docstring). Blocks.

    Raises:
        MissingSetting: a credential is absent (check ``missing_for_serve`` first).
        SlackCallFailed: Slack refused the bot token (``auth.test``).
        DatabaseUnavailable: the database could not be reached.
    """
    metrics = None
    if settings.metrics_port is not None:
        metrics = start_metrics_server(settings.metrics_port)
    try:
        asyncio.run(serve(settings))
    finally:
        if metrics is not None:
            metrics.close()


async def serve(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Migrate, start the in-process worker (no ``REDIS_URL``), serve Slack until ``stop``
    (default: set by SIGTERM or SIGINT), then stop the worker."""
    stop = stop or _stop_on_signals()
    broker, actors, _holder = setup(settings)
    db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
    provider = make_provider(settings, makes_jails=False)  # the worker makes its own
    worker = None
    try:
        await db.migrate()  # before the worker's runtime migrates too: one writer at a time
        if routes_by_host(settings):  # a thread's new message goes to its sandbox's host
            actors.router = HostRouter(
                HostStore(db), actors.send_to, dead_after_s=settings.host_dead_after_s
            )
        deps = await slack_deps(settings, db, provider, actors.enqueue)
        if settings.redis_url is None:
            worker = EmbeddedWorker(broker, threads=settings.worker_threads)
            worker.start()
        background = Background()
        alerts = build_alerts(settings, deps, db)
        log.info("serving Slack (%s mode); worker %s", settings.slack_mode, _where(settings))
        deps = with_watch(settings, deps, db, alerts)
        app = _quiet(build_app, deps=deps, background=background)
        if worker is not None:  # its steps call the model: say now if they cannot
            background.spawn(_warn_if_model_unreachable(settings), name="model reach")
        async with alerts_running(alerts, settings) as extra_routes:
            mode = _mode(settings, extra_routes)
            await serve_slack(app, mode, stop=stop, background=background)
    finally:
        if worker is not None:
            await asyncio.to_thread(worker.stop, timeout_ms=STEP_TIME_LIMIT_MS)
        await provider.aclose()
        await db.dispose()


async def slack_deps(
    settings: Settings, db: Database, provider: SandboxProvider, enqueue: Enqueue
) -> SlackDeps:
    """What the Slack app needs, as ``serve`` and the drill build it; the bot's user id
    and the workspace come from ``auth.test``.

    Raises:
        MissingSetting: no bot token in ``settings``.
        SlackCallFailed: ``auth.test`` failed.
    """
    client = make_slack_client(settings)
    identity = await slack_call("auth.test", client.auth_test())
    files = FileStore(db)

    manager = make_sandbox_manager(settings, db, provider)  # the workers' shared ledger
    tasks = BackgroundTasks(db)
    sessions = SessionStore(db)

    async def stop_running(cancelled: Cancelled) -> None:
        """Kill the stopped step's command and the session's background processes, and
        destroy its sandbox (errors are logged)."""
        await cancel_running(manager, cancelled, tasks, sessions)

    poster = SlackPoster(client, Outbox(db), update_budget=update_budget(settings))
    surface = AgentSurface(
        poster,
        team_id=str(identity["team_id"]),
        budgets=surface_budgets(settings),
        enabled=settings.agent_surface,
    )
    return SlackDeps(
        sessions=sessions,
        dedupe=InboundDedupe(db),
        files=files,
        client=client,
        signing_secret=(
            settings.slack_signing_secret.get_secret_value()
            if settings.slack_signing_secret
            else ""
        ),
        bot_user_id=str(identity["user_id"]),
        bot_id=str(identity.get("bot_id") or ""),
        enqueue=enqueue,
        cancel_running=stop_running,
        skills=SkillsCommands(files, client, EditPolicy.parse(settings.skill_editors)),
        poster=poster,
        surface=surface,
        egress=EgressLog(db),
        external_may_start=settings.external_users_start,
        approvers=Approvers.parse(
            settings.approvers, not_requester=settings.approval_not_requester
        ),
        installation=Installation(str(identity["team_id"]), identity.get("enterprise_id")),
        ledger=ModelCallLog(db),
        record=IncidentRecord(IncidentLog(db), identity.get("url") or None),
        recall=RecallStore(db),
    )


class _UnusedToken(logging.Filter):
    """Drops bolt's warning that ``token`` is unused: bolt reads ``SLACK_BOT_TOKEN`` from
    the environment itself even though the app is given its client (which has it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


def _quiet(build: Callable[..., AsyncApp], **kwargs: Any) -> AsyncApp:
    """``build(**kwargs)`` without bolt's unused-token warning."""
    bolt_log, quiet = logging.getLogger("slack_bolt.AsyncApp"), _UnusedToken()
    bolt_log.addFilter(quiet)
    try:
        return build(**kwargs)
    finally:
        bolt_log.removeFilter(quiet)


def _mode(settings: Settings, extra_routes: tuple[web.RouteDef, ...] = ()) -> SocketMode | HttpMode:
    if settings.slack_mode == "http":
        return HttpMode(port=settings.slack_http_port, extra_routes=extra_routes)
    return SocketMode(app_token=settings.require("slack_app_token", "Socket Mode needs it"))


@contextlib.asynccontextmanager
async def alerts_running(
    alerts: Alerts, settings: Settings
) -> AsyncIterator[tuple[web.RouteDef, ...]]:
    """Take alerts while serving: the taker always runs (watched channels and leftovers);
    in HTTP mode the Slack listener serves the webhook (the routes yielded), in Socket
    Mode a listener of its own on ``WARROOM_ALERT_HOST``:``WARROOM_ALERT_PORT``."""
    alerts.taker.start()
    runner = None
    try:
        webhook = alerts.webhook
        if webhook is None:
            yield ()
        elif settings.slack_mode == "http":
            yield tuple(webhook.routes_table())
        else:
            if settings.alert_port is not None:
                host = settings.alert_host
                runner, port = await start_listener(webhook, host=host, port=settings.alert_port)
                log.info("alert webhook listening on %s:%d (POST /alerts/<source>)", host, port)
            else:
                log.warning(
                    "the alert webhook is set up but Socket Mode has no listener: "
                    "set WARROOM_ALERT_PORT"
                )
            yield ()
    finally:
        if runner is not None:
            await runner.cleanup()
        await alerts.taker.stop()


def _where(settings: Settings) -> str:
    return "in this process" if settings.redis_url is None else "processes read from Redis"


async def _warn_if_model_unreachable(settings: Settings) -> None:
    if (why := await model_unreachable(settings)) is not None:
        log.warning("%s", why)


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop
