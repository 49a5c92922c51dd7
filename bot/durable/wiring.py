"""The composition root of a worker: builds every collaborator from ``Settings`` once.

A ``Runtime`` is opened on the event loop that will use it (a Dramatiq worker's
loop thread, or the ``chat``/``drill`` loop) and closed on the same loop; nothing
is built at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

from bot.durable.background import BackgroundWatcher, kill_session_tasks
from bot.durable.crash_points import Crasher, no_crash
from bot.durable.driver import ApprovalPoster, Enqueue, StepDriver, ThreadPoster
from bot.durable.failures import tell_failed
from bot.durable.queue_watch import QueueWatch
from bot.durable.routing import HostPresence, routes_by_host
from bot.durable.sandboxes import SandboxKeeping, make_sandbox_manager
from bot.durable.shared_transcripts import SharedTranscripts
from bot.egress import WorkerEgress, jail_egress, remote_setup
from bot.mcp_servers import open_mcp_servers
from bot.metrics import CountingProvider, default_metrics
from bot.settings import Settings
from bot.slack import retries
from bot.slack.agent_surface import (
    APPEND_PER_MINUTE,
    DEFERRED_KIND,
    STATUS_PER_MINUTE,
    STREAM_ENDS_PER_MINUTE,
    AgentSurface,
    SurfaceBudgets,
)
from bot.slack.budget import CHAT_UPDATE_PER_MINUTE, CallBudget, SharedCallBudget
from bot.slack.installation import slack_workspace_url
from bot.slack.poster import SlackPoster, Thread
from bot.slack.progress import ThreadReporter
from bot.slack.status_board import FINAL_KIND, StatusBoard
from harness import (
    AnthropicModel,
    ApprovalGate,
    Checkpoint,
    EgressReach,
    IncidentRecord,
    Limits,
    McpServers,
    Model,
    NoNetwork,
    OpenNetwork,
    Policy,
    PolicyError,
    Reach,
    Recall,
    SandboxWorkspaces,
    WorkspaceCannotStart,
    WorkspaceUnavailable,
    default_policy,
    in_flight_tool,
    with_org_policy,
)
from memory_store import (
    LIVE_MARK,
    BackgroundTasks,
    Cancelled,
    CronJobs,
    Database,
    DatabaseUnavailable,
    FileStore,
    HostStore,
    IncidentLog,
    ModelCallLog,
    Outbox,
    OutboxItem,
    OwnerLiveness,
    RecallStore,
    SessionOrigin,
    SessionStore,
    process_host,
)
from sandbox_client import (
    BlaxelConfig,
    BlaxelProvider,
    Health,
    JailLimits,
    LocalConfig,
    LocalProvider,
    ProcessNotFound,
    SandboxCannotStart,
    SandboxClient,
    SandboxError,
    SandboxGone,
    SandboxHandle,
    SandboxManager,
    SandboxProvider,
    SandboxUnavailable,
    SetupStep,
)

log = logging.getLogger(__name__)


UNSENT_FINALS_EVERY_S = 60.0
"""How often a worker looks for final status views recorded but never sent."""
UNSENT_FINAL_AFTER_S = 120.0
"""A final view unsent this long is taken as left by a stopped worker: longer than a
budget window, so a live board that waits for its turn is not doubled (a doubled one
would only repeat the same content)."""
UNSENT_CLOSE_AFTER_S = 180.0
"""A close of the agent surface left waiting this long was left by a process that died or
stopped (a live one gets a turn of Slack's budget within a window or three)."""
FRESH_SWEEPS = 3
"""Sweeps that take every wake-up as lost once the queue was: a sweep finding another
process's sweep under way does nothing, so one alone might miss its turn (a duplicate
wake-up claims nothing)."""


def make_provider(settings: Settings, *, makes_jails: bool = True) -> SandboxProvider:
    """The sandbox provider the settings name (no secrets enter a sandbox's env).

    With egress rules, the gateway's CA is made on first use and local jails get its trust
    files (blocking file I/O: call at start-up). ``makes_jails`` False: a provider that only
    stops and destroys existing sandboxes (the Slack edge's, the chat's clean-up), which
    needs no gateway trust, so a data directory where it cannot be made does not stop it.

    Raises:
        OSError: the gateway's CA or trust files could not be made (``makes_jails``).
    """
    if settings.sandbox_provider == "blaxel":
        return BlaxelProvider(
            BlaxelConfig(
                api_key=settings.require("bl_api_key", "the Blaxel provider needs an API key"),
                workspace=settings.require("bl_workspace", "the Blaxel provider needs a workspace"),
            )
        )
    return LocalProvider(
        LocalConfig(
            state_dir=settings.data_dir / "sbx",
            network=settings.sandbox_network,
            egress=jail_egress(settings) if makes_jails else None,
            limits=jail_limits(settings),
            warm_pool=settings.sandbox_warm_pool if makes_jails else 0,
        )
    )


def jail_limits(settings: Settings) -> JailLimits:
    """Each local sandbox's limits, from the ``WARROOM_SANDBOX_*`` settings.

    Raises:
        ValueError: a limit too small to start a sandbox (16 MiB of memory, 8 processes).
    """
    mib = 1024 * 1024
    return JailLimits(
        memory_max_bytes=settings.sandbox_memory_mb * mib,
        pids_max=settings.sandbox_pids_max,
        cpus=settings.sandbox_cpus,
        workspace_max_bytes=settings.sandbox_workspace_mb * mib,
        tmp_max_bytes=settings.sandbox_tmp_mb * mib,
        shm_max_bytes=settings.sandbox_shm_mb * mib,
    )


def make_model(settings: Settings) -> AnthropicModel:
    """The Anthropic adapter. Raises MissingSetting without ``ANTHROPIC_API_KEY``."""
    return AnthropicModel(
        api_key=settings.require("anthropic_api_key", "the agent needs a model"),
        model=settings.model,
        base_url=settings.anthropic_base_url,
        max_tokens=settings.max_tokens,
        effort=settings.model_effort,
    )


def make_small_model(settings: Settings) -> AnthropicModel | None:
    """The adapter of ``WARROOM_SMALL_MODEL`` (WebFetch reads pages with it, without
    thinking, up to its own ``max_tokens``), or None without ``ANTHROPIC_API_KEY``."""
    if not settings.anthropic_api_key:
        return None
    return AnthropicModel(
        api_key=settings.require("anthropic_api_key", "WebFetch reads pages with a model"),
        model=settings.small_model,
        base_url=settings.anthropic_base_url,
        max_tokens=SMALL_MODEL_MAX_TOKENS,
    )


SMALL_MODEL_MAX_TOKENS = 4_096


def shared_transcripts(
    settings: Settings, closers: list[Callable[[], Awaitable[None]]]
) -> SharedTranscripts | None:
    """With ``REDIS_URL`` (several worker processes, maybe hosts), the copies of long
    transcripts every worker reads (``shared_transcripts``), closed with the runtime;
    without it (one process) none: its own cache serves every step."""
    if not settings.redis_url:
        return None
    shared = SharedTranscripts(settings.redis_url)
    closers.append(shared.aclose)
    return shared


def update_budget(settings: Settings) -> CallBudget:
    """The ``chat.update`` budget of this workspace: with ``REDIS_URL``, shared by every
    process through Redis (N workers then never send N times Slack's limit); without it,
    or with ``WARROOM_SLACK_SHARED_BUDGET=false``, this process's own."""
    return _method_budget(settings, "chat.update", CHAT_UPDATE_PER_MINUTE, tier=50)


def surface_budgets(settings: Settings) -> SurfaceBudgets:
    """The agent surface's budgets of this workspace (``agents.sessions.setStatus``,
    ``chat.startStream``, ``chat.stopStream``, ``chat.appendStream``), shared as
    ``update_budget`` is: each process keeping its own would let three workers send three
    times Slack's Tier 2 (196 HTTP 429s in a 60-session round of ``bench/load.py``)."""
    return SurfaceBudgets(
        status=_method_budget(settings, "agents.sessions.setStatus", STATUS_PER_MINUTE, tier=50),
        start=_method_budget(settings, "chat.startStream", STREAM_ENDS_PER_MINUTE, tier=20),
        stop=_method_budget(settings, "chat.stopStream", STREAM_ENDS_PER_MINUTE, tier=20),
        append=_method_budget(settings, "chat.appendStream", APPEND_PER_MINUTE, tier=100),
    )


async def new_workspace_budgets(settings: Settings) -> None:
    """Mark the workspace's shared Slack budgets (``update_budget``, ``surface_budgets``)
    as having no history to fear: for a workspace nothing posted to before (the drill's
    and the tests' fake ones), whose first window would otherwise start nearly full.

    Raises:
        redis.RedisError: Redis could not be reached.
    """
    update, surface = update_budget(settings), surface_budgets(settings)
    try:
        if isinstance(update, SharedCallBudget):
            await update.known_empty()
        await surface.known_empty()
    finally:
        if isinstance(update, SharedCallBudget):
            await update.aclose()
        await surface.aclose()


def _method_budget(settings: Settings, method: str, calls: int, *, tier: int) -> CallBudget:
    """``calls`` a minute of ``method`` in this workspace, shared through Redis when it
    can be (see ``update_budget``). A shared window whose history Redis lost grants only
    what ``calls`` leaves of Slack's ``tier`` (its limit a minute) in its first minute: the
    minute before may have used all of ``calls``."""
    if not settings.shared_update_budget or not settings.redis_url:
        return CallBudget(calls)
    if settings.slack_bot_token is None:
        return CallBudget(calls)
    token = settings.slack_bot_token.get_secret_value()
    workspace = hashlib.sha256(token.encode()).hexdigest()[:16]  # the token names the install
    return SharedCallBudget(
        settings.redis_url, f"{method}:{workspace}", calls, after_reset_calls=tier - calls
    )


def make_slack_client(settings: Settings) -> AsyncWebClient:
    """A Web API client that never re-sends a post by itself (``retries``) and waits out
    429s. Raises MissingSetting without ``SLACK_BOT_TOKEN``."""
    token = settings.require("slack_bot_token", "Warroom posts to Slack with the bot token")
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url)
    retries.install(client)
    return client


def workspace_seed(directory: Path | None) -> tuple[SetupStep, ...]:
    """Set-up steps placing each file under ``directory`` at the same relative path in
    ``/workspace`` (``WARROOM_WORKSPACE_SEED``), in path order; none for None.

    Symbolic links and other non-regular files are left out. The files are read once,
    when the runtime opens, and replayed on every new sandbox (a replacement too).

    Raises:
        OSError: a file could not be read.
    """
    if directory is None:
        return ()
    files = sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink())
    return tuple(
        SetupStep.file(f"/workspace/{path.relative_to(directory).as_posix()}", path.read_bytes())
        for path in files
    )


def approval_policy(settings: Settings) -> Policy:
    """The approval policy in force for every org without its own: the shipped rules,
    extended by ``WARROOM_APPROVAL_POLICY`` (a file; or, for a directory, its
    ``default.toml`` if any) (blocking I/O: call it in a thread).

    Raises:
        PolicyError: the file is malformed (start-up stops, naming the problem).
        OSError: the file could not be read.
    """
    return approval_policies(settings)[0]


ORG_ID = re.compile(r"[TE][A-Z0-9]+")
"""A Slack ``team_id`` or ``enterprise_id``, as a policy file in a directory is named."""


def approval_policies(settings: Settings) -> tuple[Policy, dict[str, Policy]]:
    """The deployment's approval policy and each org's own (org id → policy).

    ``WARROOM_APPROVAL_POLICY`` is a file (one policy for every org) or a directory: there
    ``default.toml`` is the policy of every org without its own, and ``<org id>.toml``
    (``T…`` or ``E…``: the Slack ``enterprise_id or team_id``) that org's; each extends
    or tightens the shipped rules in the same format (harness/approvals/README.md).
    Blocking I/O: call it in a thread.

    Raises:
        PolicyError: a file is malformed (start-up stops, naming the file and problem).
        OSError: a file could not be read.
    """
    path = settings.approval_policy
    if path is None:
        return default_policy(), {}
    if not path.is_dir():
        return with_org_policy(path.read_text(encoding="utf-8"), source=str(path)), {}
    policies = {}
    for file in sorted(f for f in path.glob("*.toml") if f.is_file()):
        if file.stem != "default" and not ORG_ID.fullmatch(file.stem):
            raise PolicyError(
                f"{file}: a policy file here is named after the org it is for, as Slack writes "
                "its id (T… or E…, upper case: T0123ABCD.toml), or default.toml"
            )
        policies[file.stem] = with_org_policy(file.read_text(encoding="utf-8"), source=str(file))
    default = policies.pop("default", None) or default_policy()
    return default, policies


def sandbox_reach(settings: Settings, egress: WorkerEgress | None) -> Reach:
    """What a session's sandbox can reach, for the approval policy (§13): a local jail
    without the host's network reaches the gateway's rules, or nothing without them; the
    host's network, or a remote sandbox (its own network is not ours to know), reaches
    everything."""
    if settings.sandbox_network == "host" or settings.sandbox_provider != "local":
        return OpenNetwork()
    return EgressReach(egress.gateway.rules) if egress is not None else NoNetwork()


def make_worker_id(*, live: bool = False) -> str:
    """``<host>@<PID namespace>:<pid>:<random>`` (``memory_store.process_host``): who holds
    a lease, readable by an operator; with ``live``, ending in ``LIVE_MARK`` (the process
    holds its liveness lock: ``memory_store.OwnerLiveness``)."""
    made = f"{process_host()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    return made + LIVE_MARK if live else made


class ManagedSandboxes:
    """The driver's ``SandboxKeeper`` over the process's ``SandboxManager``."""

    def __init__(self, manager: SandboxManager, setup: tuple[SetupStep, ...] = ()) -> None:
        self.manager = manager
        self.setup = setup

    async def provision(self, session_id: str) -> str:
        """A new ready sandbox's handle (JSON), recorded as ``session_id``'s.

        Raises:
            WorkspaceCannotStart: no sandbox will start until someone fixes the host.
            WorkspaceUnavailable: none could be made now (transient).
        """
        try:
            result = await self.manager.ensure(None, self.setup, session_id=session_id)
        except SandboxCannotStart as exc:
            raise WorkspaceCannotStart(exc.reason) from exc
        except SandboxError as exc:
            raise WorkspaceUnavailable(str(exc)) from exc
        return result.handle.to_json()

    async def park(self, handle_json: str) -> None:
        """Suspend the sandbox (its session waits for a human). Raises SandboxError."""
        await self.manager.release(SandboxHandle.from_json(handle_json))


class CrashHookOutbox:
    """The poster's outbox, calling ``before_record(key)`` between a Slack post and the
    record of its ``ts`` (where crash tests kill the worker: ``CrashPoint.DURING_POST``).

    ``before_record`` may be set after construction (the driver is built later).
    """

    def __init__(self, inner: Outbox) -> None:
        self._inner = inner
        self.before_record: Callable[[str], None] | None = None

    async def post_intent(
        self,
        session_id: str,
        key: str,
        *,
        channel_id: str,
        thread_ts: str,
        kind: str,
        payload_json: str,
    ) -> OutboxItem:
        """``Outbox.post_intent``."""
        return await self._inner.post_intent(
            session_id,
            key,
            channel_id=channel_id,
            thread_ts=thread_ts,
            kind=kind,
            payload_json=payload_json,
        )

    async def post_done(self, key: str, ts: str) -> OutboxItem:
        """The hook, then ``Outbox.post_done``."""
        if self.before_record is not None:
            self.before_record(key)
        return await self._inner.post_done(key, ts)

    async def get_post(self, key: str) -> OutboxItem | None:
        """``Outbox.get_post``."""
        return await self._inner.get_post(key)


async def kill_in_flight(
    provider: SandboxProvider,
    cancelled: Cancelled,
    *,
    appear_timeout_s: float = 3.0,
    forgotten: Callable[[str], Awaitable[bool]] | None = None,
) -> str | None:
    """Kill the sandbox process of a cancelled session's running tool call, if any.

    The process is named after the ``tool_use`` id in ``Checkpoint.in_flight``
    (docs/architecture.md §8). Returns that name when a kill was sent, or when the
    sandbox is gone and ``forgotten(sandbox_id)`` says the ledger forgot it (a sweep
    destroyed it: the process went with it); else None (no tool call was running, no
    sandbox, or the process had already ended).

    Raises:
        SandboxError: the sandbox did not answer.
    """
    cp = Checkpoint.from_json(cancelled.checkpoint)
    handle_json = cp.sandbox or cancelled.sandbox
    if cp.in_flight is None or handle_json is None:
        return None
    if in_flight_tool(cancelled.checkpoint) != "Bash":
        appear_timeout_s = 0.0  # only Bash is worth waiting for: the rest end in moments
    handle = SandboxHandle.from_json(handle_json)
    client = provider.connect(handle)
    try:
        return await _kill_when_started(
            provider, handle, client, cp.in_flight, appear_timeout_s, forgotten
        )
    except SandboxGone:
        return None
    finally:
        await client.aclose()


async def _forgotten(manager: SandboxManager, sandbox_id: str) -> bool:
    """Whether the ledger no longer records ``sandbox_id`` (it was destroyed)."""
    return sandbox_id not in await manager.ledger.known([sandbox_id])


async def _kill_when_started(
    provider: SandboxProvider,
    handle: SandboxHandle,
    client: SandboxClient,
    name: str,
    appear_timeout_s: float,
    forgotten: Callable[[str], Awaitable[bool]] | None = None,
) -> str | None:
    """Kill process ``name``; the intent is committed just before the process starts, so
    a stop that lands in between waits up to ``appear_timeout_s`` for it to appear. A
    sandbox that does not answer yet (its jail still starting: no socket) is tried again
    within the same window; one that is gone and that the ledger forgot (the stopped step
    let go of it and a sweep destroyed it, as the session ended) took the process with
    it: ``name`` is returned. Gone alone is not enough: a jail another host or container
    runs is GONE to this one, while its command runs on.

    Raises:
        SandboxUnavailable: the sandbox never answered within the window.
    """
    poll_s = 0.05
    unreachable: SandboxUnavailable | None = None
    for _ in range(max(1, int(appear_timeout_s / poll_s))):
        try:
            await client.kill(name)
            return name
        except ProcessNotFound:
            unreachable = None
        except SandboxUnavailable as error:
            if (
                forgotten is not None
                and await forgotten(handle.sandbox_id)
                and await provider.health(handle) is Health.GONE
            ):
                return name  # destroyed and forgotten: nothing of it runs any more
            unreachable = error
        await asyncio.sleep(poll_s)  # the worker starts the process: look again
    if unreachable is not None:
        raise unreachable
    return None


async def cancel_running(
    manager: SandboxManager,
    cancelled: Cancelled,
    tasks: BackgroundTasks | None = None,
    sessions: SessionStore | None = None,
) -> str | None:
    """After ``SessionStore.cancel`` (``stop``): cancel the session's running subagents
    (with ``sessions``), kill the stopped step's sandbox process and the session's
    background processes (``tasks``), then destroy the sandbox (not a subagent's: it is
    its parent's); the step's own commit is fenced off by the cancel.

    Returns the killed process's name (the ``tool_use`` id), or None when none ran.
    Sandbox failures are logged, not raised: the session is cancelled either way.
    """
    cp = Checkpoint.from_json(cancelled.checkpoint)
    if sessions is not None:
        for child in (a for a in cp.agents if a.running):
            try:
                stopped = await sessions.cancel(child.session_id, actor="parent stopped")
            except DatabaseUnavailable:
                log.exception("session %s: could not stop subagent", cancelled.session_id)
                continue
            if stopped is not None:
                await cancel_running(manager, stopped, tasks, sessions)
    if tasks is not None:
        try:
            await kill_session_tasks(tasks, manager, cancelled.session_id)
        except DatabaseUnavailable:
            log.exception("session %s: could not end its background tasks", cancelled.session_id)
    killed = None
    try:
        killed = await kill_in_flight(
            manager.provider, cancelled, forgotten=functools.partial(_forgotten, manager)
        )
    except SandboxError:
        log.exception("session %s: could not kill its running command", cancelled.session_id)
    handle_json = cp.sandbox or cancelled.sandbox
    if handle_json is not None and cp.parent is None:  # it ends: its sandbox goes
        try:
            await manager.retire(SandboxHandle.from_json(handle_json))
        except SandboxError:
            log.exception("session %s: could not destroy its sandbox", cancelled.session_id)
    return killed


@dataclass
class Runtime:
    """Every long-lived collaborator of a worker process.

    ``slack`` is the Slack poster for notices outside a step (a session failed); None
    when the runtime was given its own ``reporter``. The runtime's sweeps and steps
    touch only sessions of ``driver.origin``, and with ``owned`` only those ids (a
    chat's own session: a live view of the set, which its owner fills). ``mcp`` is the
    process's MCP servers (``WARROOM_MCP_CONFIG``), started once and shared by every
    step; None without one.
    """

    settings: Settings
    db: Database
    files: FileStore
    sessions: SessionStore
    outbox: Outbox
    manager: SandboxManager
    model: Model
    reporter: ThreadPoster
    driver: StepDriver
    slack: SlackPoster | None = None
    egress: WorkerEgress | None = None
    mcp: McpServers | None = None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    keeping: SandboxKeeping | None = None
    owned: Collection[str] | None = None
    tasks: BackgroundTasks | None = None
    watcher: BackgroundWatcher | None = None
    queue_watch: QueueWatch | None = None
    hosts: HostStore | None = None
    presence: HostPresence | None = None
    enqueue_shared: Enqueue | None = None

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        enqueue: Enqueue,
        enqueue_shared: Enqueue | None = None,
        crash: Crasher = no_crash,
        reporter: ThreadPoster | None = None,
        model: Model | None = None,
        setup: tuple[SetupStep, ...] = (),
        migrate: bool = True,
        origin: SessionOrigin = SessionOrigin.SLACK,
        owned: Collection[str] | None = None,
        host: bool = False,
    ) -> Runtime:
        """Build and connect everything. ``setup`` replaces the workspace set-up read
        from ``WARROOM_WORKSPACE_SEED`` (``workspace_seed``). ``enqueue_shared`` sends a
        wake-up to the shared queue (the sweeper's re-enqueues; default ``enqueue``);
        ``host``: this process is a worker host's, registered in ``worker_hosts`` when
        steps are routed by host (``routing``).

        Raises:
            MissingSetting: a credential the configuration needs is absent.
            DatabaseUnavailable: the database could not be reached.
            OSError: a file of the workspace seed or the MCP configuration could not be read.
            McpConfigError: ``WARROOM_MCP_CONFIG`` is not a valid configuration.
            Exception: whatever else building a collaborator raised (a file changed since
                start-up, a data directory that cannot be written); what was opened
                before it is closed again (the gateway, MCP servers, the database pool).
        """
        async with contextlib.AsyncExitStack() as undo:
            runtime = await cls._open(
                settings,
                undo,
                enqueue,
                crash,
                reporter,
                model,
                setup,
                migrate,
                origin,
                owned,
                enqueue_shared=enqueue_shared,
                host=host,
            )
            undo.pop_all()  # opened: the runtime's close undoes it from now on
        return runtime

    @classmethod
    async def _open(
        cls,
        settings: Settings,
        undo: contextlib.AsyncExitStack,
        enqueue: Enqueue,
        crash: Crasher,
        reporter: ThreadPoster | None,
        model: Model | None,
        setup: tuple[SetupStep, ...],
        migrate: bool,
        origin: SessionOrigin,
        owned: Collection[str] | None,
        *,
        enqueue_shared: Enqueue | None,
        host: bool,
    ) -> Runtime:
        """``open``'s work; each thing opened is pushed on ``undo``."""
        setup = setup or await asyncio.to_thread(workspace_seed, settings.workspace_seed)
        if settings.sandbox_provider != "local":  # remote sandboxes get the gateway's trust
            setup = (*setup, *await asyncio.to_thread(remote_setup, settings))
        db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
        undo.push_async_callback(db.dispose)
        if migrate:
            await db.migrate()
        files, sessions, outbox = FileStore(db), SessionStore(db), Outbox(db)
        tasks = BackgroundTasks(db)
        provider = await asyncio.to_thread(make_provider, settings)
        undo.push_async_callback(_quietly, provider.aclose)  # the warm pool's jails
        worker_id = make_worker_id(live=db.is_postgres)
        manager = make_sandbox_manager(settings, db, CountingProvider(provider), owner=worker_id)
        undo.push_async_callback(_quietly, manager.aclose)
        egress = await WorkerEgress.open(settings, db, default_metrics())
        if egress is not None:
            undo.push_async_callback(_quietly, egress.aclose)
        mcp = await open_mcp_servers(settings)
        if mcp is not None:
            undo.push_async_callback(_quietly, mcp.aclose)
        the_model = model
        if the_model is None:
            made = the_model = make_model(settings)
            undo.push_async_callback(_quietly, made.aclose)
        slack, hook, workspace_url = None, None, None
        closers: list[Callable[[], Awaitable[None]]] = []
        undo.push_async_callback(_close_all, closers)
        if db.is_postgres:  # a SIGKILLed worker's steps resume at the next sweep
            alive = OwnerLiveness(db, worker_id)
            await alive.start()
            closers.append(alive.aclose)
        small_model = make_small_model(settings)
        if small_model is not None:
            closers.append(small_model.aclose)
        if reporter is None:
            posts: Outbox | CrashHookOutbox = outbox
            if crash is not no_crash:
                posts = hook = CrashHookOutbox(outbox)
            budget = update_budget(settings)
            if isinstance(budget, SharedCallBudget):
                closers.append(budget.aclose)
            client = make_slack_client(settings)
            slack = SlackPoster(client, posts, update_budget=budget)
            budgets = surface_budgets(settings)
            closers.append(budgets.aclose)
            surface = AgentSurface(slack, budgets=budgets, enabled=settings.agent_surface)
            reporter = ThreadReporter(slack, model=settings.model, surface=surface)
            closers.append(functools.partial(_close_board, reporter.board))
            closers.append(functools.partial(_close_surface, surface))
            workspace_url = await slack_workspace_url(client)
        approvals = None
        if settings.approvals and isinstance(reporter, ApprovalPoster):
            policies = await asyncio.to_thread(approval_policies, settings)
            approvals = ApprovalGate(
                policy=policies[0],
                org_policies=policies[1],
                timeout_s=settings.approval_timeout_s,
                reach=sandbox_reach(settings, egress),
            )
        driver = StepDriver(
            sessions=sessions,
            files=files,
            model=the_model,
            workspaces=SandboxWorkspaces(manager, setup, egress),
            poster=reporter,
            enqueue=enqueue,
            worker_id=worker_id,
            limits=Limits(
                max_steps=settings.max_steps,
                max_tokens=settings.max_tokens,
                agent_may_write_skills=settings.agent_may_write_skills,
                max_session_cost_usd=settings.max_session_cost_usd,
                max_org_day_cost_usd=settings.max_org_day_cost_usd,
                services=egress.services() if egress is not None else (),
                min_wakeup_s=settings.min_wakeup_s,
                cron_seconds=settings.cron_seconds,
            ),
            lease_s=settings.lease_s,
            wait_s=settings.wait_s,
            carry_on_s=settings.carry_on_s,
            crash=crash,
            sandboxes=ManagedSandboxes(manager, setup),
            origin=origin,
            mcp=mcp,
            ledger=ModelCallLog(db),
            record=IncidentRecord(IncidentLog(db), workspace_url),
            recall=Recall(
                RecallStore(db),
                private_org_wide=settings.recall_private == "org",
                record=IncidentRecord(IncidentLog(db), workspace_url),
            ),
            approvals=approvals,
            tasks=tasks,
            cron=CronJobs(db),
            small_model=small_model,
            shared=shared_transcripts(settings, closers),
        )
        if hook is not None:
            hook.before_record = driver.crash_hooks.before_post_recorded
        runtime = cls(
            settings,
            db,
            files,
            sessions,
            outbox,
            manager,
            the_model,
            reporter,
            driver,
            slack,
            egress,
            keeping=SandboxKeeping(manager, sessions),
            mcp=mcp,
        )
        runtime.owned = owned
        runtime.closers = closers
        runtime.tasks = tasks
        runtime.hosts = HostStore(db)
        runtime.enqueue_shared = enqueue_shared
        if host and routes_by_host(settings):
            runtime.presence = HostPresence(
                runtime.hosts,
                settings.host_id,
                scope=manager.scope,
                beat_s=settings.host_beat_s,
                enqueue_shared=enqueue_shared or enqueue,
            )
            await runtime.presence.start()
        if settings.redis_url:
            runtime.queue_watch = QueueWatch(settings.redis_url)
            closers.append(runtime.queue_watch.aclose)
        runtime.watcher = BackgroundWatcher(
            tasks,
            sessions,
            manager,
            enqueue,
            interval_s=settings.background_poll_s,
            monitor_batch_s=settings.monitor_batch_s,
            hosts=runtime.hosts if routes_by_host(settings) else None,
            host_dead_after_s=settings.host_dead_after_s,
        )
        if isinstance(provider, LocalProvider):  # fresh jails kept ready for new sessions
            provider.pool.start(default_metrics().count_sandbox)
        return runtime

    async def cancel_running(self, cancelled: Cancelled) -> None:
        """``cancel_running`` with this process's sandbox manager (the Slack edge's hook)."""
        await cancel_running(self.manager, cancelled, self.tasks, self.sessions)

    async def sweep_once(
        self, *, stale_after_s: float | None = None, sent_before: datetime | None = None
    ) -> int:
        """One recovery sweep: re-enqueue what was lost, fail crash loops (telling the
        thread), end the background processes of sessions failed or whose wait ran out
        (closing their Slack agent sessions), suspend idle sandboxes and destroy those no
        session needs.

        ``stale_after_s`` overrides the setting: an unclaimed wake-up older than this
        is enqueued again; so is one sent before ``sent_before`` (on the lease clock,
        ``SessionStore.lease_now``: a queue lost what was sent before then).

        Returns how many sessions were re-enqueued.
        """
        result = await self.sessions.sweep(
            max_crashes=self.settings.max_crashes,
            stale_after_s=stale_after_s or self.settings.stale_after_s,
            sent_before=sent_before,
            origin=self.driver.origin,
            session_ids=self.owned,
        )
        # a stale wake-up goes to the shared queue (its host may have stopped taking
        # messages: it holds nobody hostage); after a lost queue, and for timers, routed
        lost_queue = stale_after_s is not None or sent_before is not None
        shared = None if lost_queue else self.enqueue_shared
        for wakeup in result.requeue:
            await (shared or self.driver.enqueue)(wakeup.session_id, wakeup.token)
        for wakeup in result.woken:
            await self.driver.enqueue(wakeup.session_id, wakeup.token)
        if self.tasks is not None:  # a session that is over keeps no process running
            for session_id in (*result.failed, *result.expired_waits):
                await kill_session_tasks(self.tasks, self.manager, session_id)
        for session_id in result.failed:
            log.error(
                "session %s failed: its step failed %d times", session_id, self.settings.max_crashes
            )
            await self._tell_failed(session_id)
        for session_id in result.expired_waits:
            await self._close_ended(session_id)
        if self.keeping is not None:  # suspend idle, destroy ended and long-idle sandboxes
            await self.keeping.sweep(result.expired_waits)
        return len(result.requeue)

    async def _tell_failed(self, session_id: str) -> None:
        """Say in the thread, once per failure, that the session was given up (best
        effort; ``failures.tell_failed``) and close its Slack agent session, then end its
        sandbox."""
        crashes = self.settings.max_crashes
        reporter = self.reporter if isinstance(self.reporter, ThreadReporter) else None
        cp = await tell_failed(
            self.sessions,
            self.slack,
            self.driver.enqueue,
            session_id,
            crashes=crashes,
            end_session=reporter.end_session if reporter is not None else None,
        )
        told_in_thread = cp is not None and cp.parent is None and self.slack is not None
        if cp is not None and told_in_thread and self.keeping is not None:
            await self.keeping.end(cp.sandbox)

    async def _close_ended(self, session_id: str) -> None:
        """A session whose wait ran out is over: its Slack agent session, left ``active``
        or ``suspended`` by its last step, is ``closed`` (best effort: the sweep that
        ended it is the only one to see it; a subagent has no agent session)."""
        reporter = self.reporter if isinstance(self.reporter, ThreadReporter) else None
        if reporter is None or reporter.surface is None:
            return
        try:
            session = await self.sessions.get(session_id)
            if session is None or Checkpoint.from_json(session.checkpoint).parent is not None:
                return
            thread = Thread(session_id, session.key.channel_id, session.key.thread_ts)
            await reporter.end_session(thread)
        except Exception:  # the session is over either way
            log.exception("session %s: its agent session was not closed", session_id)

    async def sweep_forever(self, *, queue_lost_at: float | None = None) -> None:
        """``sweep_once`` every ``sweep_interval_s`` until cancelled; errors are logged.

        ``queue_lost_at`` (``time.monotonic()``): the broker lost every message sent
        before then (an in-memory broker: when its process started), so the first
        ``FRESH_SWEEPS`` sweeps enqueue every runnable session nobody holds whose last
        wake-up was sent before that moment; so do the sweeps after ``queue_watch``
        finds that Redis lost its queue (``queue_watch.QueueWatch``), for the wake-ups
        sent before it found so. A wake-up sent since is in the queue: a session the
        Slack edge opened a moment ago is left to it, which still adds the thread's
        history before it sends the wake-up (sweeping it early ran its first model call
        without that history).
        """
        fresh = FRESH_SWEEPS if queue_lost_at is not None else 0
        lost_line: datetime | None = None  # the loss on the lease clock, once read
        finals_due = time.monotonic() + UNSENT_FINALS_EVERY_S
        while True:
            if time.monotonic() >= finals_due:
                finals_due = time.monotonic() + UNSENT_FINALS_EVERY_S
                await self._resend_unsent_finals()
            try:
                if self.queue_watch is not None and await self.queue_watch.lost():
                    log.warning("the queue lost its messages (Redis restarted?): re-enqueueing")
                    fresh, queue_lost_at, lost_line = FRESH_SWEEPS, time.monotonic(), None
                if fresh and queue_lost_at is not None and lost_line is None:
                    # the loss moved onto the database's clock at once, by one statement:
                    # a later sweep's own delays (a busy loop, a pool wait) cannot move
                    # the line past wake-ups sent since, nor this read's wait for a
                    # connection (timed inside, around the statement alone)
                    lost_line = await self.sessions.lease_now(at=queue_lost_at)
                if fresh and lost_line is not None:
                    await self.sweep_once(sent_before=lost_line)
                else:
                    await self.sweep_once()
            except Exception:
                log.exception("recovery sweep failed")
            else:
                fresh = max(0, fresh - 1)
            await asyncio.sleep(self.settings.sweep_interval_s)

    async def _resend_unsent_finals(self) -> None:
        """Give this process's status board the final views a stopped or dead worker
        recorded but never sent (``StatusBoard.resend``): no status stays "Working"
        after its answer. Errors are logged."""
        if not isinstance(self.reporter, ThreadReporter):
            return
        cutoff = datetime.now(UTC) - timedelta(seconds=UNSENT_FINAL_AFTER_S)
        try:
            self.reporter.board.resend(await self.outbox.unsent(FINAL_KIND, created_before=cutoff))
        except Exception:  # the sweep goes on whatever this finds
            log.exception("unsent final statuses could not be resent")
        surface = self.reporter.surface
        if surface is None or not surface.available:
            return
        cutoff = datetime.now(UTC) - timedelta(seconds=UNSENT_CLOSE_AFTER_S)
        try:  # closes a dead or stopped worker left waiting for Slack's budget
            surface.take_deferred(await self.outbox.unsent(DEFERRED_KIND, created_before=cutoff))
        except Exception:
            log.exception("deferred agent-session closes could not be taken over")

    async def beat_forever(self) -> None:
        """Beat this worker host's heartbeat until cancelled (``routing.HostPresence``);
        returns at once when the process is not a routed host's."""
        if self.presence is not None:
            await self.presence.beat_forever()

    async def watch_forever(self) -> None:
        """Watch the background processes of this host's sandboxes until cancelled
        (``BackgroundWatcher``); returns at once without a watcher."""
        if self.watcher is not None:
            await self.watcher.watch_forever()

    async def close(self) -> None:
        """Destroy the sandboxes this process used and its warm pool's jails (none is left
        behind by a stopped worker), stop the gateway and the MCP servers, release HTTP
        clients and the database pool."""
        if self.keeping is not None:
            await self.keeping.shutdown()
        with contextlib.suppress(Exception):
            await self.manager.aclose()
        with contextlib.suppress(Exception):
            await self.manager.provider.aclose()  # the warm pool's jails
        if self.mcp is not None:
            with contextlib.suppress(Exception):
                await self.mcp.aclose()
        if self.egress is not None:
            with contextlib.suppress(Exception):
                await self.egress.aclose()
        for closer in self.closers:
            with contextlib.suppress(Exception):
                await closer()
        aclose = getattr(self.model, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
        await self.db.dispose()


async def _quietly(close: Callable[[], Awaitable[object]]) -> None:
    """``close()``, its failure logged (undoing a runtime that did not open)."""
    try:
        await close()
    except Exception:
        log.exception("could not close what a runtime that did not open had opened")


async def _close_all(closers: list[Callable[[], Awaitable[None]]]) -> None:
    for close in reversed(closers):
        await _quietly(close)


BOARD_DRAIN_S = 5.0
"""How long a stopping worker waits for its status messages' last views (a final view
takes a turn of the workspace's ``chat.update`` budget; the next process's steps show
the session's progress anyway)."""


async def _close_surface(surface: AgentSurface) -> None:
    """Send the stream chunks the surface holds (within ``BOARD_DRAIN_S``), then stop it."""
    if not await surface.drain(timeout_s=BOARD_DRAIN_S):
        log.warning("streams not all written within %.0f s of stopping", BOARD_DRAIN_S)
    await surface.aclose()


async def _close_board(board: StatusBoard) -> None:
    """Send the views the board holds (within ``BOARD_DRAIN_S``), then stop it."""
    if not await board.drain(timeout_s=BOARD_DRAIN_S):
        log.warning("status messages not all updated within %.0f s of stopping", BOARD_DRAIN_S)
    await board.aclose()
