"""Everything the drill runs, started in order and stopped in reverse.

- the fake Slack Web API and the fake Anthropic Messages API (serving
  ``IncidentPolicy``) on 127.0.0.1, with a generated key and signing secret;
- the drill's ``Settings``: exactly the values below, whatever the environment says
  (``Settings.model_construct``), with short leases and a fast sweeper so recovery
  takes seconds, the scenario's workspace seed (``WARROOM_WORKSPACE_SEED``) and, when
  it is installed, server-everything as the MCP server (``mcp_scene``);
- a real Prometheus holding the incident's request counters, behind TLS and basic auth, and
  the egress rule that lets the sandboxes reach it through the gateway (``egress``; skipped,
  with the reason, where Prometheus or curl is not installed);
- the database, migrated and seeded with the playbook (imported as
  ``warroom skills import`` imports it) and an older memory note, in an org of its
  own (``T0DRILL…``) so drills can share a database;
- the workers: embedded — Dramatiq worker threads in this process over the in-memory
  broker (as ``warroom serve`` without ``REDIS_URL``); full — ``workers`` real
  ``dramatiq bot.durable.worker_main`` processes over Redis (as ``warroom worker``), whose
  shared ``chat.update`` budget starts with an empty window (the fake workspace is new);
- the real Slack app in HTTP mode, and the channel its people write in.

While it runs, this process's warnings and errors (a retried step's traceback, say)
go to ``drill.log`` in the drill's directory, not to the terminal, so the live log
stays readable; the full mode's workers log to ``logs/worker-<n>.log`` there.
Stopping destroys every sandbox the drill made (jails outlive their workers), deletes the
Redis keys the full drill made (``redis_keys``) and, unless ``keep`` is set, the drill's
directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from redis.exceptions import RedisError

from bot.cli.skills_io import import_skills
from bot.drill import mcp_scene, scenario
from bot.drill.agent import IncidentPolicy
from bot.drill.channel import IncidentChannel
from bot.drill.edge import Edge
from bot.drill.egress import DrillEgress, start_egress, why_skipped
from bot.drill.errors import DrillError
from bot.drill.narrator import Narrator
from bot.drill.redis_keys import RedisBefore
from bot.drill.workers import WorkerPool
from bot.durable.actors import Actors, EmbeddedWorker, declare_actors, make_broker, setup
from bot.durable.wiring import make_provider, new_workspace_budgets
from bot.fakes.anthropic_api import FakeAnthropicAPI
from bot.fakes.slack_api import FakeSlackApi
from bot.logs import LOG_FORMAT, ContextFilter
from bot.settings import Settings, child_environment
from memory_store import Database, EgressLog, FileStore, RecallStore, SessionStore
from sandbox_client import LocalProvider, SandboxProvider

LEASE_S = 2.0
SWEEP_INTERVAL_S = 0.25
STALE_AFTER_S = 2.0
EMBEDDED_THREADS = 4
WORKER_THREADS = 2
BOOT_TIMEOUT_S = 90.0
STOP_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class DrillOptions:
    """How to run the drill.

    Attributes:
        database_url: None: SQLite in the drill's directory.
        redis_url: None: the embedded mode (one process); set: the full mode.
        workers: worker processes of the full mode.
        data_dir: the drill's directory (None: a new temporary one). Keep its path
            short: sandbox socket paths are at most 107 bytes.
        keep: leave the directory (worker logs, SQLite file) behind.
        timeout_s: the longest any one awaited event may take.
    """

    database_url: str | None = None
    redis_url: str | None = None
    workers: int = 2
    data_dir: Path | None = None
    keep: bool = False
    timeout_s: float = 60.0

    @property
    def mode(self) -> str:
        """``full`` with Redis, else ``embedded``."""
        return "full" if self.redis_url else "embedded"


@dataclass
class Stage:
    """The running parts the story and the checks use. ``egress`` is None when the
    Prometheus scene is skipped (``egress_skipped`` says why)."""

    options: DrillOptions
    settings: Settings
    data_dir: Path
    slack: FakeSlackApi
    model: FakeAnthropicAPI
    policy: IncidentPolicy
    sessions: SessionStore
    files: FileStore
    provider: SandboxProvider
    channel: IncidentChannel
    narrator: Narrator
    edge: Edge
    pool: WorkerPool | None
    egress_log: EgressLog
    egress: DrillEgress | None
    egress_skipped: str | None
    mcp_missing: str | None = None
    db: Database | None = None  # the drill's database (the incident record reads it)


def drill_settings(
    options: DrillOptions,
    data_dir: Path,
    *,
    slack: FakeSlackApi,
    model: FakeAnthropicAPI,
    model_key: str,
    egress: DrillEgress | None = None,
) -> Settings:
    """The drill's settings (see the module docstring)."""
    values: dict[str, Any] = {
        "slack_bot_token": SecretStr(slack.token),
        "slack_signing_secret": SecretStr(secrets.token_hex(16)),
        "slack_mode": "http",
        "slack_api_url": slack.base_url,
        "anthropic_api_key": SecretStr(model_key),
        "anthropic_base_url": model.base_url,
        "database_url": options.database_url,
        "redis_url": options.redis_url,
        "data_dir": data_dir,
        "workspace_seed": data_dir / "seed",
        "lease_s": LEASE_S,
        "sweep_interval_s": SWEEP_INTERVAL_S,
        "stale_after_s": STALE_AFTER_S,
        "worker_threads": WORKER_THREADS if options.redis_url else EMBEDDED_THREADS,
        "mcp_config": mcp_scene.write_config(data_dir),
    }
    if egress is not None:
        values |= {"egress_rules": egress.rules, "egress_upstream_ca": egress.upstream_ca}
    return Settings.model_construct(**values)


@contextlib.asynccontextmanager
async def staged(options: DrillOptions, say: Callable[[str], None]) -> AsyncIterator[Stage]:
    """Start everything; stop it all when the block ends (see the module docstring).

    Raises:
        DrillError: a part did not start (the message says which).
        DatabaseUnavailable: the database could not be reached.
    """
    async with contextlib.AsyncExitStack() as stack:
        data_dir = options.data_dir or Path(tempfile.mkdtemp(prefix="wr-drill-"))
        if not options.keep:
            stack.callback(shutil.rmtree, data_dir, True)
        stack.enter_context(_logging_to(data_dir / "drill.log"))
        if options.redis_url is not None:  # pushed first: undone once the workers stopped
            stack.push_async_callback((await _redis_before(options.redis_url)).restore)
        scenario.write_workspace(data_dir / "seed")
        scenario.write_skills(data_dir / "skills")
        policy = IncidentPolicy()
        skipped = why_skipped()
        db = Database.from_url(options.database_url, data_dir=data_dir)
        stack.push_async_callback(db.dispose)
        org_id = f"T0DRILL{secrets.token_hex(3).upper()}"
        async with asyncio.TaskGroup() as starting:  # Prometheus starts while the db is seeded
            seeding = starting.create_task(_seeded(db, org_id, data_dir / "skills"))
            egress = None if skipped else await start_egress(stack, data_dir)
        files = seeding.result()
        slack, model, settings = await _fakes(stack, options, data_dir, policy, egress)
        provider = make_provider(settings)
        stack.push_async_callback(_destroy_sandboxes, provider)
        actors, pool = await _workers(stack, options, settings, data_dir)
        edge = await Edge.start(settings, db, actors)
        stack.push_async_callback(edge.close)
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=10.0))
        channel = IncidentChannel(
            http=http,
            url=edge.url,
            secret=settings.require("slack_signing_secret", "HTTP mode verifies requests"),
            slack=slack,
            org_id=org_id,
            channel_id=scenario.CHANNEL,
        )
        sessions = SessionStore(db)
        narrator = Narrator(sessions, slack, say)
        follower = asyncio.create_task(narrator.run(), name="drill narrator")
        stack.push_async_callback(_cancel, follower)
        yield Stage(
            options,
            settings,
            data_dir,
            slack,
            model,
            policy,
            sessions,
            files,
            provider,
            channel,
            narrator,
            edge,
            pool,
            EgressLog(db),
            egress,
            skipped,
            mcp_missing=mcp_scene.missing(),
            db=db,
        )


async def _fakes(
    stack: contextlib.AsyncExitStack,
    options: DrillOptions,
    data_dir: Path,
    policy: IncidentPolicy,
    egress: DrillEgress | None,
) -> tuple[FakeSlackApi, FakeAnthropicAPI, Settings]:
    """Start both fakes (their stop is pushed on ``stack``); the settings pointing at them."""
    slack = FakeSlackApi()
    await slack.start()
    stack.push_async_callback(slack.stop)
    for person in scenario.PEOPLE:
        slack.add_user(person.user_id, person.name)
    model_key = f"drill-{secrets.token_hex(8)}"
    model = FakeAnthropicAPI(policy, api_key=model_key)
    await stack.enter_async_context(model)
    settings = drill_settings(
        options, data_dir, slack=slack, model=model, model_key=model_key, egress=egress
    )
    return slack, model, settings


async def _seeded(db: Database, org_id: str, skills_dir: Path) -> FileStore:
    """Migrate, import the playbook, write the older memory note and last month's incident
    of another channel (the past incident alice's session is given)."""
    await db.migrate()
    files = FileStore(db)
    reports = await import_skills(files, org_id, skills_dir, actor="drill")
    if not reports or not all(r.ok for r in reports):
        problems = [p for r in reports for p in r.problems]
        raise DrillError(f"the drill's playbook did not import: {problems}")
    await scenario.seed_memory(files, org_id)
    await scenario.seed_past_incident(files, RecallStore(db), org_id)
    return files


async def _workers(
    stack: contextlib.AsyncExitStack, options: DrillOptions, settings: Settings, data_dir: Path
) -> tuple[Actors, WorkerPool | None]:
    """Start the mode's workers; their stop is pushed on ``stack``."""
    if options.redis_url is None:
        broker, actors, _holder = setup(settings)
        worker = EmbeddedWorker(broker, threads=settings.worker_threads)
        worker.start()
        stack.push_async_callback(asyncio.to_thread, worker.stop, timeout_ms=STOP_TIMEOUT_MS)
        return actors, None
    await new_workspace_budgets(settings)  # the fake workspace is new: no history to fear
    broker = make_broker(options.redis_url)
    stack.callback(broker.close)
    actors = declare_actors(broker, [])
    extra = {"dramatiq_worker_timeout": "100", "PYTHONUNBUFFERED": "1"}
    pool = WorkerPool(
        child_environment(settings, extra),
        data_dir / "logs",
        size=options.workers,
        threads=settings.worker_threads,
    )
    stack.push_async_callback(asyncio.to_thread, pool.stop)
    pool.start()
    await pool.wait_ready(timeout_s=BOOT_TIMEOUT_S)
    return actors, pool


async def _redis_before(url: str) -> RedisBefore:
    """What the drill's Redis database holds now (``redis_keys``).

    Raises:
        DrillError: Redis did not answer.
    """
    try:
        return await RedisBefore.take(url)
    except RedisError as exc:
        raise DrillError(f"Redis at {url} did not answer: {exc}") from exc


@contextlib.contextmanager
def _logging_to(path: Path) -> Iterator[None]:
    """Send the root logger's records to ``path`` for the block (the terminal shows the
    live log; Python prints unhandled records to stderr only when no handler exists)."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


async def _destroy_sandboxes(provider: SandboxProvider) -> None:
    if isinstance(provider, LocalProvider):
        await provider.destroy_all()
    await provider.aclose()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
