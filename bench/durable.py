"""Durable sessions end to end: step overhead, resume after SIGKILL, duplicates, parking.

Prints one JSON line:

- ``step_overhead_p50_ms`` / ``step_overhead_p99_ms``: one ``StepDriver.run`` in this
  process (claim, harness step, commit, progress, enqueue to Redis) over PostgreSQL,
  minus the model's and the tool's own time. The model is an in-process ``Model``
  that answers at once (always a ``TodoWrite`` call); its time is measured inside
  ``complete``. The tool is ``TodoWrite`` (no I/O); its time is the median of the
  same call run alone, subtracted from every tool step. Also per kind (``_model_``,
  ``_tool_``).
- ``carried_step_overhead_p50_ms``: the same, when the worker carries the session on
  (``carry_on_s``, as the production worker does for quick steps): one ``run`` takes a
  session's steps back to back for ``CARRY_ON_S``, each claimed by the previous commit;
  the median over runs of (wall − model and tool time) / steps.
- ``resume_after_sigkill_s``: median over ``--kills`` rounds, with production settings
  (lease, sweep interval, broker tuning): two ``dramatiq bot.durable.worker_main`` processes;
  the one holding a session is SIGKILLed while its Bash command runs; time from the
  kill to the commit of that step by the other worker (the event's database time).
- ``duplicates``: over those rounds, Slack posts beyond one per outbox key plus runs
  of the side-effecting command beyond one per session (must be 0).
- ``parked_sessions`` / ``parked_worker_threads_busy``: ``--parked`` sessions are
  parked (opened, one step claimed and committed as ``Wait``, as after an answer);
  with the workers running, Redis is sampled for 3 s (three sweep intervals): the
  most messages ever queued or fetched-but-unacked (a busy worker thread holds one
  such message; parked sessions must hold none). ``parked_leases_held`` counts their
  leases; ``sweep_ms_with_parked`` is one sweep's time with them in the table.

- ``worker_model_step_p50_ms`` / ``worker_tool_step_p50_ms``: queued steps of sessions
  run by the real workers (25 ``TodoWrite`` calls and their results each, one session
  per round): the median time from a step's commit to the next one's, by the kind of
  the later (the events' database times), the Dramatiq hop included; a model step
  includes the model, which answers after ``--model-latency-ms`` (a proxy in front of
  the fake Messages API waits that long before forwarding each call, as a real model
  takes real time). ``worker_step_ms`` is the mean over all steps. The workers poll
  Redis with ``--worker-timeout-ms`` (production's ``WORKER_TIMEOUT_MS`` unless told;
  Dramatiq's default is 1,000).
- with ``--dbos-python PATH`` (a Python with ``dbos`` and ``anthropic`` installed, e.g. a
  separate venv: neither is a Warroom dependency here): ``dbos`` holds
  ``durable_dbos_peer.py``'s figures on a fresh database of the same server, run round
  by round between Warroom's own rounds (so the machine's load hits both alike):
  ``in_process_vs_dbos`` is ``step_overhead_p50_ms`` over DBOS's bare step p50,
  ``carried_vs_dbos`` that of ``carried_step_overhead_p50_ms``; ``worker_vs_dbos`` that of
  ``worker_model_step_p50_ms`` to DBOS doing the same work (its agent loop: the same 25
  streamed calls to the same slow fake Messages API answering with the same script, each
  followed by its tool step, in one process with no hop: ``agent_model_step_p50_ms``;
  goal ≤ 2), ``worker_tool_vs_dbos`` that of the tool steps, and
  ``worker_model_step_extra_ms`` what a queued model step costs beyond DBOS's (the hop).
- ``goal``, ``met``, ``unmet``, ``load_avg`` (``bench/goals.py``): the goals are
  ``worker_vs_dbos`` ≤ 2, ``resume_after_sigkill_s`` ≤ 3, ``duplicates`` 0 and
  ``parked_worker_threads_busy`` 0; a part not run (no ``--dbos-python``, ``--kills 0``)
  leaves its goal unmet.

``--kills 0`` and ``--parked 0`` skip those parts; ``--rounds`` (default 3) splits the
in-process steps and the real workers' sessions into rounds.

    .venv/bin/python bench/durable.py [--steps 200] [--rounds 3] [--kills 5]
        [--parked 10000] [--pg-admin-url URL] [--redis-url URL] [--dbos-python PATH]
        [--worker-timeout-ms MS] [--model-latency-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg
import redis
from aiohttp import web
from goals import verdict  # bench/ is on the path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, not bench/*.py

from bot.durable.actors import WORKER_TIMEOUT_MS, declare_actors, make_broker
from bot.durable.driver import StepDriver
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.fakes.slack_api import FakeSlackApi
from harness import (
    Checkpoint,
    Event,
    Message,
    ModelReply,
    Requester,
    SandboxWorkspaces,
    StepKind,
    ToolContext,
    ToolSpec,
    ToolUseBlock,
    Usage,
    run_tool,
)
from memory_store import Database, FileStore, SessionKey, SessionStore, Wait
from sandbox_client import LocalConfig, LocalProvider, SandboxHandle, SandboxManager
from tests import pg_admin

ORG, CHANNEL = "T0BENCH", "C0BENCH"
TODOS = {"todos": [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking"}]}
READY_LINE = "Worker process is ready for action."
CARRY_ON_S = 0.25
"""The carried-on measurement's budget per run (production's default is 1 s)."""
_MARKER = re.compile(r"\[session:([A-Za-z0-9_-]+)\]")
_CHAIN = re.compile(r"\[chain:(\d+)\]")
GOALS = {
    "worker_vs_dbos": ("<=", 2.0),
    "resume_after_sigkill_s": ("<=", 3.0),
    "duplicates": ("==", 0),
    "parked_worker_threads_busy": ("==", 0),
}
CHAIN_TURNS = 25


# --- step overhead -----------------------------------------------------------------------


class InstantModel:
    """A ``harness.Model`` that answers at once with a ``TodoWrite`` call."""

    def __init__(self) -> None:
        self.spent_s = 0.0
        self.calls = 0
        self._ids = itertools.count(1)

    async def complete(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        messages: Sequence[Message],
        max_tokens: int | None = None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> ModelReply:
        started = time.perf_counter()
        call = ToolUseBlock(id=f"toolu_bench{next(self._ids):08d}", name="TodoWrite", input=TODOS)
        reply = ModelReply((call,), "tool_use", Usage(100, 20), "instant", None, 1)
        self.calls += 1
        self.spent_s += time.perf_counter() - started
        return reply


class QuietThread:
    """A ``ThreadPoster`` that posts nothing (the bench measures the durable layer)."""

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        return "0.0"

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        return None


async def _tool_time_s(files: FileStore, workspaces: SandboxWorkspaces, runs: int = 200) -> float:
    """Median time of one ``TodoWrite`` call run alone."""
    cp = Checkpoint("bench-tool", ORG, CHANNEL, Requester("U1"))
    ctx = ToolContext.for_session(cp, files, workspaces.open(cp), "toolu_alone")
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        await run_tool("TodoWrite", TODOS, ctx)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


async def _open(sessions: SessionStore, session_id: str, text: str = "look") -> str:
    opened = await sessions.open_or_join(
        SessionKey(ORG, CHANNEL, f"{time.time():.6f}-{session_id}"),
        requester_id="U1",
        initial_checkpoint=Checkpoint(session_id, ORG, CHANNEL, Requester("U1")).to_json(),
        text=f"[session:{session_id}] {text}",
        source_ts="1.0",
        session_id=session_id,
    )
    assert opened.token is not None
    return opened.token


async def step_overhead(db: Database, redis_url: str, data_dir: Path, steps: int) -> dict[str, Any]:
    """Per-step overhead of ``StepDriver.run`` (see the module docstring): the samples
    (seconds: ``every`` in order, ``model``, ``tool``) and the tool time subtracted."""
    broker = make_broker(redis_url)
    actors = declare_actors(broker, [])
    sessions, files = SessionStore(db), FileStore(db)
    manager = SandboxManager(LocalProvider(LocalConfig(state_dir=data_dir / "sbx-overhead")))
    workspaces = SandboxWorkspaces(manager)
    model, pending = InstantModel(), {}

    async def enqueue(session_id: str, token: str) -> None:
        await actors.enqueue(session_id, token)
        pending[session_id] = token

    driver = StepDriver(
        sessions=sessions,
        files=files,
        model=model,
        workspaces=workspaces,
        poster=QuietThread(),
        enqueue=enqueue,
        worker_id="bench:0:overhead",
    )
    tool_s = await _tool_time_s(files, workspaces)
    run_id = uuid.uuid4().hex[:6]
    per_session = 20
    by_kind: dict[str, list[float]] = {"model": [], "tool": []}
    in_order: list[float] = []
    try:
        for n in range(-(-steps // per_session) + 1):  # the first session warms up
            session_id = f"overhead-{run_id}-{n}"
            pending[session_id] = await _open(sessions, session_id)
            for _ in range(per_session):
                calls, spent = model.calls, model.spent_s
                started = time.perf_counter()
                await driver.run(session_id, pending.pop(session_id))
                elapsed = time.perf_counter() - started
                if n == 0:
                    continue
                kind = "model" if model.calls > calls else "tool"
                own_s = model.spent_s - spent if kind == "model" else tool_s
                by_kind[kind].append(elapsed - own_s)
                in_order.append(elapsed - own_s)
    finally:
        await manager.aclose()
        broker.close()
    return {"every": in_order[:steps], "tool_s": tool_s} | by_kind


async def carried_overhead(db: Database, data_dir: Path, steps: int) -> dict[str, Any]:
    """Per-step overhead when the worker carries a session on (``carry_on_s``): one
    ``StepDriver.run`` runs a session's steps back to back, each claimed by the previous
    commit; per run, (wall − the model's and the tool's own time) / steps taken: those
    (``carried``, seconds) and the steps taken."""
    sessions, files = SessionStore(db), FileStore(db)
    manager = SandboxManager(LocalProvider(LocalConfig(state_dir=data_dir / "sbx-carried")))
    workspaces = SandboxWorkspaces(manager)
    model, reports = InstantModel(), []

    async def enqueue(session_id: str, token: str) -> None:
        return None  # the run ends when its budget does; the bench opens a new session

    driver = StepDriver(
        sessions=sessions,
        files=files,
        model=model,
        workspaces=workspaces,
        poster=QuietThread(),
        enqueue=enqueue,
        worker_id="bench:0:carried",
        carry_on_s=CARRY_ON_S,
        observe=reports.append,
    )
    tool_s = await _tool_time_s(files, workspaces)
    run_id = uuid.uuid4().hex[:6]
    per_step: list[float] = []
    taken = 0
    try:
        for n in itertools.count():
            if taken >= steps:
                break
            session_id = f"carried-{run_id}-{n}"
            token = await _open(sessions, session_id)
            before, spent = len(reports), model.spent_s
            started = time.perf_counter()
            await driver.run(session_id, token)
            elapsed = time.perf_counter() - started
            kinds = [r.kind for r in reports[before:] if r.kind is not None]
            tools = sum(1 for k in kinds if k is StepKind.TOOL)
            own_s = (model.spent_s - spent) + tools * tool_s
            if n == 0:
                continue  # warm-up
            per_step.append((elapsed - own_s) / len(kinds))
            taken += len(kinds)
    finally:
        await manager.aclose()
    return {"carried": per_step, "carried_steps": taken}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# --- real workers ------------------------------------------------------------------------


class Script:
    """The fake model's replies: Bash side effect, then an answer, per session; a session
    whose request says ``[chain:N]`` calls ``TodoWrite`` N times, then answers."""

    def __call__(self, request: RecordedRequest) -> Reply:
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        chain = _CHAIN.search(json.dumps(request.messages[0]))
        if chain is not None:
            return Reply.tool("TodoWrite", TODOS) if turn < int(chain[1]) else Reply.text("Done.")
        if turn == 0:
            command = "sleep 1; echo ran >> effects.log; echo effect-done"
            return Reply.tool("Bash", {"command": command, "description": "side effect"})
        return Reply.text("Done.")


class SlowModelApi:
    """A Messages API that takes ``latency_s`` per call: waits, then forwards to ``upstream``
    (the fake) and streams its answer back unchanged. Other paths are forwarded at once."""

    def __init__(self, upstream: str, latency_s: float) -> None:
        self.upstream, self.latency_s = upstream.rstrip("/"), latency_s
        self.base_url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> SlowModelApi:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._session = aiohttp.ClientSession(auto_decompress=False)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        if request.method == "POST" and request.path == "/v1/messages":
            await asyncio.sleep(self.latency_s)
        skip = {"host", "content-length", "transfer-encoding"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
        url = self.upstream + request.path_qs
        async with self._session.request(request.method, url, data=body, headers=headers) as up:
            response = web.StreamResponse(status=up.status)
            for name, value in up.headers.items():
                if name.lower() not in skip | {"connection"}:
                    response.headers[name] = value
            await response.prepare(request)
            async for chunk in up.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


@dataclass
class Worker:
    """One ``dramatiq bot.durable.worker_main`` parent (one worker process), in its own group."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def ready(self) -> bool:
        return self.process.poll() is None and READY_LINE in self.log_path.read_text("utf-8")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


def spawn(env: dict[str, str], log_dir: Path, n: int) -> Worker:
    """Start a worker with production settings (whatever ``env`` does not set)."""
    log_path = log_dir / f"worker-{n}.log"
    argv = [sys.executable, "-m", "dramatiq", "bot.durable.worker_main", "--processes", "1"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*argv, "--threads", "2"],
            env=env,
            cwd=log_dir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Worker(process, log_path)


async def poll(check: Callable[[], Awaitable[Any]], *, timeout_s: float, what: str) -> Any:
    """Await ``check()`` until it returns a true value, or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (value := await check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
    return value


async def wait_ready(workers: list[Worker]) -> None:
    async def ready() -> bool:
        return all(w.ready() for w in workers)

    await poll(ready, timeout_s=60, what="workers to start")


async def resume_rounds(
    sessions: SessionStore,
    workers: list[Worker],
    respawn: Callable[[], Worker],
    sender: Callable[[str, str], object],
    data_dir: Path,
    kills: int,
) -> tuple[list[float], list[str]]:
    """Kill the session's worker mid-command ``kills`` times; return the resume times."""
    resumes, session_ids = [], []
    provider = LocalProvider(LocalConfig(state_dir=data_dir / "sbx"))
    for n in range(kills):
        await wait_ready(workers)
        session_id = f"kill-{n}-{uuid.uuid4().hex[:6]}"
        session_ids.append(session_id)
        sender(session_id, await _open(sessions, session_id))
        name = await _running_command(sessions, provider, session_id)
        owner = (await sessions.get(session_id)).lease_owner  # type: ignore[union-attr]
        victim_pid = int(str(owner).split(":")[1])
        victim = next(w for w in workers if victim_pid in _children(w.process.pid))
        killed_at = datetime.now(UTC)
        os.kill(victim_pid, signal.SIGKILL)

        async def committed(sid: str = session_id) -> Any:
            events = await sessions.events(sid)
            done = [e for e in events if e.kind in ("tool_result", "tool_unknown")]
            return done[0] if done else None

        event = await poll(committed, timeout_s=120, what=f"{name} to be recovered")
        resumes.append((event.created_at - killed_at).total_seconds())
        await _answered(sessions, session_id)
        victim.kill()
        workers.remove(victim)
        workers.append(respawn())
    return resumes, session_ids


async def _running_command(sessions: SessionStore, provider: LocalProvider, sid: str) -> str:
    """The session's Bash call's name, once its process runs in the sandbox."""

    async def intent() -> Any:
        events = await sessions.events(sid)
        return next((e for e in events if e.kind == "tool_intent"), None)

    name = str(
        json.loads((await poll(intent, timeout_s=60, what="intent")).payload_json)["tool_use_id"]
    )
    cp = Checkpoint.from_json((await sessions.get(sid)).checkpoint)  # type: ignore[union-attr]
    assert cp.sandbox is not None
    client = provider.connect(SandboxHandle.from_json(cp.sandbox))
    try:

        async def started() -> bool:
            return await client.get_process(name) is not None

        await poll(started, timeout_s=30, what="the command to start")
    finally:
        await client.aclose()
    return name


async def _answered(sessions: SessionStore, session_id: str) -> None:
    async def done() -> bool:
        events = await sessions.events(session_id)
        return any(e.kind == "post_done" for e in events)

    await poll(done, timeout_s=120, what=f"{session_id} to answer")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


async def duplicates(
    sessions: SessionStore, slack: FakeSlackApi, session_ids: list[str], data_dir: Path
) -> int:
    """Posts beyond one per outbox key, plus side-effect runs beyond one per session."""
    keys: Counter[str] = Counter()
    for call in slack.calls_to("chat.postMessage"):
        payload = (call.args.get("metadata") or {}).get("event_payload") or {}
        if call.response.get("ok"):
            keys[str(payload.get("key"))] += 1
    extra = sum(n - 1 for n in keys.values() if n > 1)
    for session_id in session_ids:
        cp = Checkpoint.from_json((await sessions.get(session_id)).checkpoint)  # type: ignore[union-attr]
        assert cp.sandbox is not None
        # /workspace is a tmpfs inside the jail: read it through the jail's root (a frozen
        # jail too), as tests/bot/durable_support.py does
        pid = SandboxHandle.from_json(cp.sandbox).pid
        runs = await asyncio.to_thread(_effect_runs, session_id, pid)
        extra += abs(runs - 1)  # a missing run would be a lost step: count it too
    return extra


def _effect_runs(session_id: str, pid: int | None) -> int:
    """Lines of ``effects.log`` in the jail's tmpfs /workspace (read through its root)."""
    effects = Path(f"/proc/{pid}/root/workspace/effects.log")
    if not effects.exists():
        raise RuntimeError(f"{session_id}: no effects.log in its jail (pid {pid})")
    return len(effects.read_text().splitlines())


# --- parked sessions ---------------------------------------------------------------------


async def park(sessions: SessionStore, count: int, *, concurrency: int = 8) -> float:
    """Park ``count`` sessions as an answered one is parked; returns sessions per second."""
    gate = asyncio.Semaphore(concurrency)
    until = datetime.now(UTC) + timedelta(days=7)

    async def one(n: int) -> None:
        async with gate:
            session_id = f"parked-{n}"
            token = await _open(sessions, session_id)
            claim = await sessions.claim(session_id, token, worker_id="bench:0:park", lease_s=30)
            assert claim is not None
            await sessions.commit(
                claim,
                checkpoint=claim.checkpoint,
                outcome=Wait(until=until),
                consumed_inbox_upto=claim.inbox_upto,
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(count)))
    return count / (time.perf_counter() - started)


async def worker_steps(
    sessions: SessionStore, sender: Callable[[str, str], object], turns: int
) -> dict[str, list[float]]:
    """Steps of one session run by the real workers: ``turns`` model steps each calling
    ``TodoWrite``, then an answer. Returns seconds from each step's commit to the next's
    (the events' times), by the kind of the later, and the mean (``all``)."""
    session_id = f"chain-{uuid.uuid4().hex[:6]}"
    sender(session_id, await _open(sessions, session_id, f"[chain:{turns}] go"))
    await _answered(sessions, session_id)
    events = await sessions.events(session_id)
    steps = [e for e in events if e.kind in ("model_response", "tool_result")]
    gaps: dict[str, list[float]] = {"model": [], "tool": []}
    for before, after in itertools.pairwise(steps):
        kind = "model" if after.kind == "model_response" else "tool"
        gaps[kind].append((after.created_at - before.created_at).total_seconds())
    whole_s = (steps[-1].created_at - steps[0].created_at).total_seconds()
    return gaps | {"all": [whole_s / (len(steps) - 1)]}


class DbosPeer:
    """``durable_dbos_peer.py`` run by ``python`` (which has ``dbos`` and ``anthropic``),
    one round per call, on a database of its own (created by ``open``)."""

    def __init__(self, python: str, admin_url: str) -> None:
        self.python, self.admin_url = python, admin_url
        self.name = f"warroom_bench_dbos_{uuid.uuid4().hex[:8]}"
        self.rounds: list[dict[str, Any]] = []

    async def open(self) -> None:
        await asyncio.to_thread(pg_admin.create_database, self.admin_url, self.name)

    async def close(self) -> None:
        await asyncio.to_thread(pg_admin.drop_database, self.admin_url, self.name)

    async def bare(self, steps: int) -> None:
        """One workflow of ``steps`` bare steps (off this event loop)."""
        await asyncio.to_thread(self._run, ["--steps", str(steps)])

    async def agent(self, model_url: str, turns: int) -> None:
        """One agent workflow against ``model_url`` (served by this event loop)."""
        command = ["--agent-only", "--model-url", model_url, "--turns", str(turns)]
        await asyncio.to_thread(self._run, command)

    def _run(self, arguments: list[str]) -> None:
        peer = Path(__file__).with_name("durable_dbos_peer.py")
        url = _with_path(self.admin_url, f"/{self.name}")
        command = [self.python, str(peer), "--database-url", url, "--rounds", "1", *arguments]
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
        self.rounds.append(json.loads(done.stdout.strip().splitlines()[-1]))

    def figures(self) -> dict[str, Any]:
        """The medians over rounds of each figure the rounds printed."""
        names = {k for r in self.rounds for k in r if k.endswith("_ms")}
        return {
            name: round(statistics.median(r[name] for r in self.rounds if name in r), 3)
            for name in sorted(names)
        } | {"rounds": len(self.rounds)}


def in_flight(client: redis.Redis) -> int:
    """Messages queued or fetched-but-unacked in the ``warroom`` queue."""
    acks = client.keys("dramatiq:__acks__.*")
    return sum(int(client.scard(k)) for k in acks) + int(client.llen("dramatiq:warroom"))


async def parked_figures(
    sessions: SessionStore, pg_url: str, client: redis.Redis, count: int
) -> dict[str, Any]:
    rate = await park(sessions, count)
    busiest, deadline = 0, time.monotonic() + 3.0
    while time.monotonic() < deadline:
        busiest = max(busiest, in_flight(client))
        await asyncio.sleep(0.1)  # sampling interval of the 3 s measurement window
    started = time.perf_counter()
    swept = await sessions.sweep(max_crashes=3, stale_after_s=30)
    sweep_ms = _ms(time.perf_counter() - started)
    conn = await asyncpg.connect(pg_url)
    try:
        waiting = await conn.fetchval(
            "SELECT count(*) FROM sessions WHERE status = 'waiting' AND id LIKE 'parked-%'"
        )
        leased = await conn.fetchval(
            "SELECT count(*) FROM sessions WHERE id LIKE 'parked-%' AND lease_owner IS NOT NULL"
        )
    finally:
        await conn.close()
    return {
        "parked_sessions": waiting,
        "parked_worker_threads_busy": busiest,
        "parked_leases_held": leased,
        "parked_requeued_by_sweep": len(swept.requeue),
        "sweep_ms_with_parked": sweep_ms,
        "park_rate_per_s": round(rate, 1),
    }


# --- the run -----------------------------------------------------------------------------


def _with_path(url: str, path: str, scheme: str | None = None) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=path, scheme=scheme or parts.scheme))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    name = f"warroom_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(args.pg_admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    pg_url = _with_path(args.pg_admin_url, f"/{name}")
    sa_url = _with_path(pg_url, f"/{name}", "postgresql+asyncpg")
    data_dir = Path(tempfile.mkdtemp(prefix="wr-b-"))
    client = redis.Redis.from_url(args.redis_url)
    client.flushdb()
    db = Database.from_url(sa_url, data_dir=data_dir)
    workers: list[Worker] = []
    dbos = DbosPeer(args.dbos_python, args.pg_admin_url) if args.dbos_python else None
    try:
        if dbos is not None:
            await dbos.open()
        await db.migrate()
        figures = await in_process_rounds(db, args, data_dir, dbos)
        client.flushdb()
        sessions = SessionStore(db)
        async with (
            FakeAnthropicAPI(Script()) as fake_api,
            SlowModelApi(fake_api.base_url, args.model_latency_ms / 1000) as model_api,
        ):
            slack = FakeSlackApi()
            await slack.start()
            env = {
                k: v for k, v in os.environ.items() if not k.startswith(("WARROOM_", "dramatiq_"))
            }
            env |= {
                "DATABASE_URL": sa_url,
                "REDIS_URL": args.redis_url,
                "ANTHROPIC_API_KEY": "sk-ant-bench",
                "ANTHROPIC_BASE_URL": model_api.base_url,
                "SLACK_BOT_TOKEN": slack.token,
                "SLACK_API_URL": slack.base_url,
                "WARROOM_DATA_DIR": str(data_dir),
                "dramatiq_worker_timeout": str(args.worker_timeout_ms),
            }
            count = itertools.count(1)
            workers += [spawn(env, data_dir, next(count)) for _ in range(2)]
            broker = make_broker(args.redis_url)
            actors = declare_actors(broker, [])
            try:
                await wait_ready(workers)
                figures |= await worker_rounds(
                    sessions, actors.advance.send, args.rounds, dbos, model_api.base_url
                )
                if args.kills:
                    resumes, ids = await resume_rounds(
                        sessions,
                        workers,
                        lambda: spawn(env, data_dir, next(count)),
                        actors.advance.send,
                        data_dir,
                        args.kills,
                    )
                    figures["resume_after_sigkill_s"] = round(statistics.median(resumes), 3)
                    figures["resume_after_sigkill_all_s"] = [round(r, 3) for r in resumes]
                    figures["duplicates"] = await duplicates(sessions, slack, ids, data_dir)
                    await wait_ready(workers)
                if args.parked:
                    figures |= await parked_figures(sessions, pg_url, client, args.parked)
            finally:
                broker.close()
                for worker in workers:
                    worker.kill()
                await slack.stop()
    finally:
        for worker in workers:
            worker.kill()
        await db.dispose()
        await _destroy_sandboxes(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
        client.flushdb()
        client.close()
        if dbos is not None:
            await dbos.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    if dbos is not None:
        figures |= _against(figures, dbos.figures())
    return figures | verdict(figures, GOALS)


async def in_process_rounds(
    db: Database, args: argparse.Namespace, data_dir: Path, dbos: DbosPeer | None
) -> dict[str, Any]:
    """The in-process and carried step overheads, then DBOS's bare steps, round by round;
    the rounds' samples pooled."""
    steps = max(1, args.steps // args.rounds)
    rounds = []
    for _ in range(args.rounds):
        rounds.append(await step_overhead(db, args.redis_url, data_dir, steps))
        rounds[-1] |= await carried_overhead(db, data_dir, steps)
        if dbos is not None:
            await dbos.bare(steps)
    pooled = {k: [x for r in rounds for x in r[k]] for k in ("every", "model", "tool", "carried")}
    every = sorted(pooled["every"])
    return {
        "step_overhead_p50_ms": _ms(statistics.median(every)),
        "step_overhead_p99_ms": _ms(every[min(len(every) - 1, int(len(every) * 0.99))]),
        "step_overhead_model_p50_ms": _ms(statistics.median(pooled["model"])),
        "step_overhead_tool_p50_ms": _ms(statistics.median(pooled["tool"])),
        "tool_time_subtracted_ms": _ms(statistics.median(r["tool_s"] for r in rounds)),
        "steps": len(every),
        "carried_step_overhead_p50_ms": _ms(statistics.median(pooled["carried"])),
        "carried_steps": sum(r["carried_steps"] for r in rounds),
        "carried_runs": len(pooled["carried"]),
        "rounds": args.rounds,
    }


async def worker_rounds(
    sessions: SessionStore,
    sender: Callable[[str, str], object],
    rounds: int,
    dbos: DbosPeer | None,
    model_url: str,
) -> dict[str, Any]:
    """A session on the real workers, then DBOS's agent loop, round by round."""
    gaps: dict[str, list[float]] = {"model": [], "tool": [], "all": []}
    for _ in range(rounds):
        for kind, values in (await worker_steps(sessions, sender, CHAIN_TURNS)).items():
            gaps[kind] += values
        if dbos is not None:
            await dbos.agent(model_url, CHAIN_TURNS)
    return {
        "worker_model_step_p50_ms": _ms(statistics.median(gaps["model"])),
        "worker_tool_step_p50_ms": _ms(statistics.median(gaps["tool"])),
        "worker_step_ms": _ms(statistics.median(gaps["all"])),
    }


def _against(figures: dict[str, Any], dbos: dict[str, Any]) -> dict[str, Any]:
    """DBOS's figures and Warroom's against them (p50 against p50)."""

    def ratio(ours: str, theirs: str) -> float | None:
        if ours not in figures or not dbos.get(theirs):
            return None
        return round(figures[ours] / dbos[theirs], 2)

    return {
        "dbos": dbos,
        "in_process_vs_dbos": ratio("step_overhead_p50_ms", "step_p50_ms"),
        "carried_vs_dbos": ratio("carried_step_overhead_p50_ms", "step_p50_ms"),
        "worker_vs_dbos": ratio("worker_model_step_p50_ms", "agent_model_step_p50_ms"),
        "worker_tool_vs_dbos": ratio("worker_tool_step_p50_ms", "agent_tool_step_p50_ms"),
        "worker_model_step_extra_ms": round(
            figures["worker_model_step_p50_ms"] - dbos["agent_model_step_p50_ms"], 3
        )
        if dbos.get("agent_model_step_p50_ms")
        else None,
    }


async def _destroy_sandboxes(data_dir: Path) -> None:
    for state_dir in (data_dir / "sbx", data_dir / "sbx-overhead"):
        provider = LocalProvider(LocalConfig(state_dir=state_dir))
        for handle_file in list(state_dir.glob("*/handle.json")):
            with contextlib.suppress(Exception):
                await provider.destroy(SandboxHandle.from_json(handle_file.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--parked", type=int, default=10_000)
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--dbos-python", default=None, help="a Python with dbos installed")
    parser.add_argument("--worker-timeout-ms", type=int, default=WORKER_TIMEOUT_MS)
    parser.add_argument("--model-latency-ms", type=float, default=200.0)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
