"""Real-process support for the durable-session tests: dramatiq workers, fakes, probes.

- ``ServiceLoop``: an event loop in a thread, serving the fake Anthropic and Slack
  APIs for the whole module while tests run on their own loops.
- ``ModelScript``: the fake model's replies, per session (the session id travels in
  the first user message as ``[session:<id>]``), by how many assistant turns the
  request already holds.
- ``WorkerPool``/``Worker``: real ``python -m dramatiq bot.durable.worker_main`` processes,
  each in its own process group, sharing one environment (database, Redis, fakes,
  short lease, fast sweeper, crash rules by session id).
- ``Probe``: reads the session, its event log and its sandbox's side-effect file, and
  waits on conditions with deadlines (never a bare sleep).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import redis
from pydantic import SecretStr

from bot.drill.workers import READY_LINE
from bot.drill.workers import Worker as DrillWorker
from bot.durable.actors import declare_actors, make_broker
from bot.durable.wiring import new_workspace_budgets
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.fakes.slack_api import FakeSlackApi, RecordedCall
from bot.settings import Settings
from harness import Checkpoint, Message, Requester
from memory_store import (
    Database,
    Event,
    SandboxLedgerStore,
    Session,
    SessionKey,
    SessionStatus,
    SessionStore,
)
from sandbox_client import LocalConfig, LocalProvider, SandboxHandle
from sandbox_client.providers.local.orphans import unfinished
from tests import leaks, pg_admin
from tests.conftest import PG_ADMIN_URL, require_service

T = TypeVar("T")

ORG = "T0FAKETEAM"
CHANNEL = "C0DURABLE"
USER = "U0FAKEALICE"
EFFECTS_FILE = "effects.log"
FENCED_LINE = "step fenced"
_MARKER = re.compile(r"\[session:([A-Za-z0-9_-]+)\]")


def side_effect(*, sleep_s: float = 0.0) -> Reply:
    """A Bash call that appends one line to ``effects.log`` (after ``sleep_s``)."""
    wait = f"sleep {sleep_s:g}; " if sleep_s else ""
    command = f"{wait}echo ran >> {EFFECTS_FILE}; echo effect-done"
    return Reply.tool("Bash", {"command": command, "description": "record a side effect"})


def standard_plan(
    *, sleep_s: float = 0.0, answer: str = "All done: the effect ran."
) -> list[Reply]:
    """model → Bash side effect → model → answer: steps 0 (model), 1 (tool), 2 (model), 3 (post)."""
    return [side_effect(sleep_s=sleep_s), Reply.text(answer)]


class ModelScript:
    """The fake model's callable script: replies per session, by assistant turns so far.

    A request whose session has no plan, or that is past its plan's end, gets a
    short final text (so a session always ends).
    """

    def __init__(self) -> None:
        self.plans: dict[str, list[Reply]] = {}
        self.requests: dict[str, list[RecordedRequest]] = {}
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.messages
        # The person's text comes last in the first message: a marker before it is an
        # earlier session's, quoted in the context (a related past incident's title).
        found = _MARKER.findall(json.dumps(messages[0])) if messages else []
        session_id = found[-1] if found else ""
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        with self._lock:
            self.requests.setdefault(session_id, []).append(request)
            plan = self.plans.get(session_id, [])
        return plan[turn] if turn < len(plan) else Reply.text("Nothing more to do.")

    def requests_for(self, session_id: str) -> list[RecordedRequest]:
        """The model requests made for ``session_id`` so far, in order."""
        with self._lock:
            return list(self.requests.get(session_id, []))


class ServiceLoop:
    """An event loop in a daemon thread; ``run`` executes a coroutine there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, T], *, timeout_s: float = 30.0) -> T:
        """Run ``work`` on the service loop and return its result."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout_s)

    def close(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class Fakes:
    """The fake model and Slack, served by a ``ServiceLoop`` (None: by the test's loop)."""

    loop: ServiceLoop | None
    model: FakeAnthropicAPI
    slack: FakeSlackApi
    script: ModelScript

    @classmethod
    def start(cls) -> Fakes:
        """Start both fakes on a new service loop."""
        loop, script = ServiceLoop(), ModelScript()
        model, slack = FakeAnthropicAPI(script), FakeSlackApi()
        loop.run(model.__aenter__())
        loop.run(slack.start())
        return cls(loop, model, slack, script)

    def stop(self) -> None:
        """Stop both fakes and the loop (of fakes started by ``start``)."""
        assert self.loop is not None
        self.loop.run(self.model.__aexit__(None, None, None))
        self.loop.run(self.slack.stop())
        self.loop.close()

    def posts(self) -> list[RecordedCall]:
        """Successful ``chat.postMessage`` calls, oldest first."""
        return [
            c
            for c in list(self.slack.calls)
            if c.method == "chat.postMessage" and c.response.get("ok")
        ]

    def post_keys(self) -> Counter[str]:
        """How many successful posts carried each outbox key (message metadata): messages,
        and streamed messages ended with a key (Slack's agent surface carries the answer
        in the turn's stream: ``chat.stopStream`` with its blocks and metadata)."""
        keys: Counter[str] = Counter()
        stops = [
            c
            for c in list(self.slack.calls)
            if c.method == "chat.stopStream" and c.response.get("ok") and c.args.get("metadata")
        ]
        for call in [*self.posts(), *stops]:
            metadata = call.args.get("metadata") or {}
            keys[str((metadata.get("event_payload") or {}).get("key"))] += 1
        return keys


def pid_of_owner(lease_owner: str | None) -> int | None:
    """The worker process id in a lease owner ``<host>:<pid>:<random>``."""
    if not lease_owner:
        return None
    return int(lease_owner.split(":")[1])


class Worker(DrillWorker):
    """One ``dramatiq`` CLI parent with one worker process, in its own session
    (the drill's ``Worker``, plus what the crash tests need)."""

    @property
    def pid(self) -> int:
        """The parent's pid."""
        return self.process.pid

    def ready(self) -> bool:
        """Whether the worker process reported ready."""
        return self.alive() and READY_LINE in self.log()

    def signal_children(self, signum: int) -> None:
        """Send ``signum`` to every worker process of this parent."""
        for child in self.children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signum)

    def kill(self) -> None:
        """SIGKILL to the whole process group, and reap the parent."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait(10)


class WorkerPool:
    """``size`` workers sharing one environment; a keeper thread replaces dead ones at
    once, so a replacement boots while the test that killed a worker goes on."""

    def __init__(self, env: Mapping[str, str], log_dir: Path, *, size: int) -> None:
        self.env = dict(env)
        self.log_dir = log_dir
        self.size = size
        self.history: list[Worker] = []
        self._live: list[Worker] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._keeper = threading.Thread(target=self._keep, daemon=True)

    def start(self) -> None:
        """Start the workers and the keeper."""
        with self._lock:
            self._replace_dead()
        self._keeper.start()

    @property
    def workers(self) -> list[Worker]:
        """The workers alive at the last check (a snapshot)."""
        with self._lock:
            return list(self._live)

    def crashes(self) -> int:
        """Workers that ended with a failure (a worker process was killed)."""
        return sum(w.process.poll() not in (None, 0) for w in self.history)

    def _spawn(self) -> Worker:
        log_path = self.log_dir / f"worker-{len(self.history) + 1}.log"
        argv = [sys.executable, "-m", "dramatiq", "bot.durable.worker_main", "--processes", "1"]
        argv += ["--threads", "2", "--worker-shutdown-timeout", "30000"]
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                argv,
                env=self.env,
                cwd=self.log_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = Worker(process, log_path)
        self.history.append(worker)
        return worker

    def _replace_dead(self) -> None:
        for worker in [w for w in self._live if not w.alive()]:
            worker.kill()
            self._live.remove(worker)
        while len(self._live) < self.size and not self._stopping.is_set():
            self._live.append(self._spawn())

    def _keep(self) -> None:
        while not self._stopping.wait(0.1):
            with self._lock:
                self._replace_dead()

    def wait_ready(self, *, count: int | None = None, timeout_s: float = 60.0) -> None:
        """Block until ``count`` (default: all) workers are alive and ready (a failed start
        raises)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if sum(w.ready() for w in self.workers) >= (count or self.size):
                return
            failed = [w for w in self.history if not w.alive() and _failed_to_start(w.log())]
            if failed:
                raise AssertionError(f"a worker failed to start:\n{failed[0].log()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError("workers not ready in time")
            time.sleep(0.05)  # polling log files from a sync fixture

    def owning(self, lease_owner: str | None) -> Worker:
        """The worker whose worker process holds ``lease_owner``'s lease."""
        pid = pid_of_owner(lease_owner)
        for worker in self.workers:
            if pid in worker.children():
                return worker
        raise AssertionError(f"no live worker holds lease {lease_owner!r}")

    def stop_gracefully(self, *, timeout_s: float = 30.0) -> list[int | None]:
        """Stop the keeper, SIGTERM every live worker's parent (as a deploy does) and wait
        for each to exit; returns their exit codes (None: still running at the deadline)."""
        self._stopping.set()
        if self._keeper.is_alive():
            self._keeper.join(10)
        live = [w for w in self.history if w.alive()]
        for worker in live:
            worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for worker in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(max(0.1, deadline - time.monotonic()))
        return [w.process.poll() for w in live]

    def stop_all(self) -> None:
        """Stop the keeper and kill every worker (tests of graceful stops signal their own)."""
        self._stopping.set()
        if self._keeper.is_alive():
            self._keeper.join(10)
        for worker in self.history:
            worker.kill()


def _failed_to_start(log: str) -> bool:
    return READY_LINE not in log and "Traceback" in log


class Sender:
    """Enqueues ``advance`` messages into the workers' Redis, as the Slack edge would."""

    def __init__(self, redis_url: str) -> None:
        self.broker = make_broker(redis_url)
        self.actors = declare_actors(self.broker, [])
        self.redis = redis.Redis.from_url(redis_url)

    def send(self, session_id: str, token: str) -> None:
        """One ``advance(session_id, token)`` message."""
        self.actors.advance.send(session_id, token)

    def flush(self) -> None:
        """Every queued message, ack set and heartbeat is gone; the workspace's Slack
        budgets stay (``warroom:budget:*``: the fake Slack's own windows last as long)."""
        doomed = [k for k in self.redis.scan_iter(count=1000) if not k.startswith(BUDGET_KEYS)]
        for start in range(0, len(doomed), 500):
            self.redis.delete(*doomed[start : start + 500])

    def wipe(self) -> None:
        """FLUSHDB, as a Redis restart without persistence: every key is gone."""
        self.redis.flushdb()

    def in_flight(self) -> int:
        """Messages queued (on the shared queue or a host's) or fetched-but-unacked (each
        busy worker thread holds one)."""
        acks = self.redis.keys("dramatiq:__acks__.*")
        unacked = sum(int(self.redis.scard(key)) for key in acks)
        found = self.redis.keys("dramatiq:warroom.host.*")
        keys = [k.decode() if isinstance(k, bytes) else str(k) for k in found]
        hosts = [k for k in keys if not k.endswith((".msgs", ".DQ", ".XQ"))]
        queued = sum(int(self.redis.llen(key)) for key in ["dramatiq:warroom", *hosts])
        return unacked + queued

    def size(self) -> int:
        """How many keys the Redis database holds."""
        return int(self.redis.dbsize())

    def close(self) -> None:
        """Close the connections."""
        self.broker.close()
        self.redis.close()


async def poll(check: Callable[[], Awaitable[T | None]], *, timeout_s: float, what: str) -> T:
    """Await ``check()`` until it returns something other than None/False, or fail."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.05)  # polling interval of a condition with a deadline


@dataclass
class Probe:
    """Opens sessions and reads back what the workers did, from the real database."""

    sessions: SessionStore
    fakes: Fakes
    sender: Sender | None
    data_dir: Path
    ledger: SandboxLedgerStore | None = None

    @contextlib.asynccontextmanager
    async def hold_sandbox(self, session_id: str) -> AsyncIterator[SandboxHandle]:
        """Count a use of the session's sandbox in the workers' shared ledger until the
        block ends, as a command running through another worker would: a stopping
        worker then spares the jail, so what the command did can still be read."""
        assert self.ledger is not None, "the probe was built without the ledger"
        handle = await self.sandbox(session_id)
        await self.ledger.begin_use(handle.sandbox_id, busy_s=600)
        try:
            yield handle
        finally:
            await self.ledger.end_use(handle.sandbox_id)

    async def open(
        self, session_id: str, plan: list[Reply], *, text: str = "look", channel: str = CHANNEL
    ) -> str:
        """Script the model for a new session, open it in a seeded Slack thread; returns
        its first token (not enqueued)."""
        self.fakes.script.plans[session_id] = plan
        thread_ts = self.fakes.slack.add_message(channel, f"<@U0FAKEBOT> {text}")
        checkpoint = Checkpoint(session_id, ORG, channel, Requester(USER)).to_json()
        opened = await self.sessions.open_or_join(
            SessionKey(ORG, channel, thread_ts),
            requester_id=USER,
            initial_checkpoint=checkpoint,
            text=f"[session:{session_id}] {text}",
            source_ts=thread_ts,
            session_id=session_id,
        )
        assert opened.token is not None
        return opened.token

    async def start(
        self, session_id: str, plan: list[Reply], *, text: str = "look", channel: str = CHANNEL
    ) -> None:
        """``open`` and enqueue the first step."""
        self.queue.send(session_id, await self.open(session_id, plan, text=text, channel=channel))

    @property
    def queue(self) -> Sender:
        """The Redis sender (only probes of Redis workers have one)."""
        assert self.sender is not None, "this probe has no Redis sender"
        return self.sender

    async def session(self, session_id: str) -> Session:
        """The session row."""
        session = await self.sessions.get(session_id)
        assert session is not None
        return session

    async def events(self, session_id: str, kind: str | None = None) -> list[Event]:
        """The session's logged events (of one ``kind``)."""
        events = await self.sessions.events(session_id)
        return [e for e in events if kind is None or e.kind == kind]

    async def wait_event(self, session_id: str, kind: str, *, timeout_s: float = 20.0) -> Event:
        """The first ``kind`` event, once it is logged."""

        async def found() -> Event | None:
            events = await self.events(session_id, kind)
            return events[0] if events else None

        return await poll(found, timeout_s=timeout_s, what=f"a {kind} event of {session_id}")

    async def wait_answered(
        self, session_id: str, *, posts: int = 1, timeout_s: float = 30.0
    ) -> Session:
        """The session once ``posts`` answers were posted and it waits for a reply."""

        async def answered() -> Session | None:
            session = await self.session(session_id)
            done = await self.events(session_id, "post_done")
            waiting = session.status is SessionStatus.WAITING
            return session if waiting and len(done) >= posts else None

        try:
            return await poll(answered, timeout_s=timeout_s, what=f"{session_id} to answer")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{await self.describe(session_id)}") from None

    async def describe(self, session_id: str) -> str:
        """The session's state and event log, for a failure message."""
        session = await self.session(session_id)
        lines = [f"status={session.status} epoch={session.epoch} owner={session.lease_owner}"]
        for e in await self.events(session_id):
            lines.append(f"  {e.seq} {e.kind} epoch={e.epoch} {e.created_at:%H:%M:%S.%f}")
        return "\n".join(lines)

    async def wait_status(
        self, session_id: str, status: SessionStatus, *, timeout_s: float = 30.0
    ) -> Session:
        """The session once it has ``status``."""

        async def reached() -> Session | None:
            session = await self.session(session_id)
            return session if session.status is status else None

        return await poll(reached, timeout_s=timeout_s, what=f"{session_id} to be {status}")

    async def sandbox(self, session_id: str) -> SandboxHandle:
        """The session's sandbox handle, from its committed checkpoint."""
        cp = Checkpoint.from_json((await self.session(session_id)).checkpoint)
        assert cp.sandbox is not None, "the session has no sandbox"
        return SandboxHandle.from_json(cp.sandbox)

    async def effects(self, session_id: str) -> int:
        """How many times the side-effecting command ran (lines in ``effects.log``)."""
        handle = await self.sandbox(session_id)
        # /workspace is a tmpfs inside the jail: read it through the jail's root, which
        # works while the jail is frozen too
        path = Path(f"/proc/{handle.pid}/root/workspace") / EFFECTS_FILE
        return len(path.read_text().splitlines()) if path.exists() else 0

    async def wait_running_command(self, session_id: str, *, timeout_s: float = 20.0) -> str:
        """The ``tool_use`` id of the session's Bash call once its process runs in the
        sandbox (its intent is committed, and the sandbox knows the process)."""
        intent = await self.wait_event(session_id, "tool_intent", timeout_s=timeout_s)
        name = str(json.loads(intent.payload_json)["tool_use_id"])
        client = self.provider().connect(await self.sandbox(session_id))

        async def started() -> bool:
            return await client.get_process(name) is not None

        try:
            await poll(started, timeout_s=timeout_s, what=f"process {name} to start")
        finally:
            await client.aclose()
        return name

    def provider(self) -> LocalProvider:
        """A local sandbox provider over the workers' sandbox directory."""
        return LocalProvider(LocalConfig(state_dir=self.data_dir / "sbx"))

    async def assert_completed_once(
        self, session_id: str, *, model_steps: int = 2, effects: int | None = 1
    ) -> None:
        """The issue's four properties for a standard-plan session (see the test module).

        ``effects=None`` when the session's jail may be gone (its worker stopped and
        destroyed it): the command is then counted by its committed tool results instead.
        """
        await self.wait_answered(session_id)
        responses = await self.events(session_id, "model_response")
        assert len(responses) == model_steps, "a model response was committed twice"
        messages = [Message.from_json(m) for m in await self.sessions.transcript(session_id)]
        assert sum(1 for m in messages if m.role == "assistant") == model_steps
        assert len(self.fakes.script.requests_for(session_id)) >= model_steps
        if effects is None:
            results = await self.events(session_id, "tool_result")
            assert len(results) == 1, (
                f"{len(results)} tool results\n{await self.describe(session_id)}"
            )
            assert not await self.events(session_id, "tool_unknown")
        else:
            ran = await self.effects(session_id)
            described = await self.describe(session_id)
            assert ran == effects, f"the side effect ran {ran} times\n{described}"
        keys = self.fakes.post_keys()
        mine = {k: n for k, n in keys.items() if k.startswith(f"{session_id}:")}
        assert mine, "nothing was posted"
        assert all(n == 1 for n in mine.values()), f"a post was doubled: {mine}"
        answers = [k for k in mine if ":answer:" in k]
        assert len(answers) == 1, f"expected one answer post, got {answers}"


def destroy_sandboxes(state_dir: Path) -> None:
    """Destroy every local sandbox under ``state_dir`` (jails outlive their workers)."""
    provider = LocalProvider(LocalConfig(state_dir=state_dir))
    handles = [SandboxHandle.from_json(f.read_text()) for f in state_dir.glob("*/handle.json")]
    handles += unfinished(provider, all_makers=True)  # pooled jails a killed worker was starting

    async def destroy_all() -> None:
        for handle in handles:
            with contextlib.suppress(Exception):
                await provider.destroy(handle)

    asyncio.run(destroy_all())


@contextlib.asynccontextmanager
async def frozen(workers: list[Worker], admin_url: str) -> AsyncIterator[None]:
    """SIGSTOP the workers' processes for the block (SIGCONT after), at a moment when
    none of them is inside a database transaction.

    A process stopped mid-transaction would keep its locks (the sweeper's advisory
    lock, a session row) until PostgreSQL's ``idle_in_transaction_session_timeout``:
    then nobody could take over within a test's time. So after each stop the
    processes' PostgreSQL connections are looked up (their TCP ports, from ``/proc``)
    in ``pg_stat_activity``; unless all are idle, they are continued and stopped again.
    """
    pids = [pid for worker in workers for pid in worker.children()]
    conn = await asyncpg.connect(admin_url)
    try:
        deadline = time.monotonic() + 20.0
        while True:
            _signal_all(pids, signal.SIGSTOP)
            ports = [port for pid in pids for port in _postgres_ports(pid)]
            rows = await conn.fetch(
                "SELECT state FROM pg_stat_activity WHERE client_port = ANY($1::int[])", ports
            )
            if all(row["state"] == "idle" for row in rows):
                break
            _signal_all(pids, signal.SIGCONT)
            if time.monotonic() > deadline:
                raise AssertionError("could not stop the workers outside a transaction")
            await asyncio.sleep(0.01)  # let the transaction finish before trying again
    finally:
        await conn.close()
    try:
        yield
    finally:
        _signal_all(pids, signal.SIGCONT)


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


POSTGRES_PORT = 5432


def _postgres_ports(pid: int) -> list[int]:
    """Local TCP ports of ``pid``'s connections to PostgreSQL (``/proc/<pid>/net/tcp``)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                if inode in inodes and int(remote.split(":")[1], 16) == POSTGRES_PORT:
                    ports.append(int(local.split(":")[1], 16))
    return ports


STATUS_MESSAGE = {"WARROOM_AGENT_SURFACE": "false"}
"""Worker settings pinning the status-message path (Slack's agent surface is the default),
for the modules that assert on the status message and its Stop button."""

OWN_VARIABLES = (
    "WARROOM_",
    "SLACK_",
    "ANTHROPIC_",
    "DATABASE_URL",
    "REDIS_URL",
    "BL_",
    "dramatiq_",
)
"""Variables of the test process the workers must not inherit (they get their own)."""


@dataclass
class Cluster:
    """What a module's workers share: a fresh database, the fakes, the running pool."""

    database_url: str
    redis_url: str
    data_dir: Path
    fakes: Fakes
    pool: WorkerPool


def worker_env(
    database_url: str,
    redis_url: str,
    data_dir: Path,
    fakes: Fakes,
    settings: Mapping[str, str],
) -> dict[str, str]:
    """The environment of a worker process: this process's, less ``OWN_VARIABLES``, then
    the database, Redis, the fakes and the data directory, then ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(OWN_VARIABLES)}
    return (
        env
        | {
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": fakes.model.base_url,
            "SLACK_BOT_TOKEN": fakes.slack.token,
            "SLACK_API_URL": fakes.slack.base_url,
            "WARROOM_DATA_DIR": str(data_dir),
            "PYTHONUNBUFFERED": "1",
        }
        | dict(settings)
    )


async def migrate(url: str, data_dir: Path) -> None:
    """Bring the database at ``url`` to the newest schema."""
    db = Database.from_url(url, data_dir=data_dir)
    try:
        await db.migrate()
    finally:
        await db.dispose()


BUDGET_KEYS = b"warroom:budget:"
"""The prefix of the shared Slack budgets' keys in Redis (``bot.slack.budget``)."""


async def new_workspace(redis_url: str, slack_token: str) -> None:
    """Mark the fake workspace's shared Slack budgets as without history (it is new)."""
    token = SecretStr(slack_token)
    settings = Settings(_env_file=None, redis_url=redis_url, slack_bot_token=token)  # type: ignore[call-arg]
    await new_workspace_budgets(settings)


@contextlib.contextmanager
def running_cluster(
    redis_url: str, *, name: str, workers: int, settings: Mapping[str, str]
) -> Iterator[Cluster]:
    """A fresh database ``<name>_<random>``, the fakes and ``workers`` running worker
    processes with ``settings`` (``worker_env``), for a module; all removed after."""
    require_service("PostgreSQL", PG_ADMIN_URL)
    database = leaks.database_name(name)
    pg_admin.create_database(PG_ADMIN_URL, database)
    admin = urlsplit(PG_ADMIN_URL)
    database_url = urlunsplit(admin._replace(scheme="postgresql+asyncpg", path=f"/{database}"))
    data_dir = Path(tempfile.mkdtemp(prefix="wr-"))  # short: sandbox socket paths ≤ 107 bytes
    fakes: Fakes | None = None
    pool: WorkerPool | None = None
    try:
        asyncio.run(migrate(database_url, data_dir))
        fakes = Fakes.start()
        asyncio.run(new_workspace(redis_url, fakes.slack.token))
        env = worker_env(database_url, redis_url, data_dir, fakes, settings)
        pool = WorkerPool(env, data_dir, size=workers)
        pool.start()
        pool.wait_ready()
        yield Cluster(database_url, redis_url, data_dir, fakes, pool)
    finally:
        if pool is not None:
            pool.stop_all()
        if fakes is not None:
            fakes.stop()
        destroy_sandboxes(data_dir / "sbx")
        shutil.rmtree(data_dir, ignore_errors=True)
        pg_admin.drop_database(PG_ADMIN_URL, database)
        sender = Sender(redis_url)
        sender.flush()
        sender.close()
