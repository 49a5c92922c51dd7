"""Approvals (docs/architecture.md §13): how fast a click starts the command; what a wait costs.

Prints one JSON line:

- ``click_to_command_p50_ms`` / ``click_to_command_p99_ms``: over ``--rounds`` sessions, the
  time from sending a signed Approve click to the Slack app (real bolt app over HTTP, the
  fake Slack Web API) to the moment the worker commits the approved command's intent and
  starts it in its sandbox (the session's real bubblewrap jail, suspended while it waited:
  resumed first). One idle in-process worker (``StepDriver``, the ``advance`` actor's body,
  with ``WORKER_THREADS`` messages at a time, as a worker's threads: a step waiting on
  Slack's ``chat.update`` limit holds one) takes wake-ups from an in-memory queue at once;
  the store is PostgreSQL; the fake Slack's per-minute limits are off (fifty rounds in a
  minute would otherwise wait on Slack's ``chat.update`` limit, not on Warroom). The issue's goal:
  ≤ 500 ms. ``goal_met`` says whether p99 is under it.
- ``parked_running_sandboxes``: of those sessions' sandboxes, how many were still running
  (not suspended) 2 s after their session began to wait for the click (must be 0).
- ``parked_sessions`` / ``parked_leases_held`` / ``parked_pending_tokens`` /
  ``parked_queued``: ``--parked`` sessions parked awaiting approval the way the driver parks
  them (a checkpoint holding a posted pending approval, committed as a ``Wait`` whose
  ``wake_at`` is the expiry); how many hold a worker lease, a pending step token (a message a
  worker thread would take) or a queued wake-up (all must be 0: nothing holds a worker
  thread), and ``sweep_ms_with_parked``: one sweep's time with them in the table (none due).
- ``policy_p50_us`` / ``policy_p99_us``: the approval policy's time per Bash command
  (``Policy.bash`` with the egress reach of ``tests/harness/approvals/test_disguises.py``: a
  credential rule allowing changes, GET-only rules, a tunnel), over ``--policy-rounds`` passes
  of its corpora (the disguised changes, the reads, the guard's labelled commands); the floor
  in the same run, ``walk_p99_us``, is the guard's walk alone (``program_calls``), which the
  policy runs first. The issue's goal: p99 ≤ 1 ms (``policy_goal_met``); ``load_1m`` is the
  machine's load average when it ran. On a machine with more runnable threads than cores a
  wall-clock p99 measures the scheduler's time slices, so the same figures are also given in
  the thread's CPU time (``policy_cpu_p99_us``, ``walk_cpu_p99_us``), which only the work
  itself advances; ``policy_goal_met_cpu`` judges that one.

Run:
    .venv/bin/python bench/approvals.py [--rounds 30] [--parked 10000] [--policy-rounds 20]
    (``--rounds 0 --parked 0``: the policy's figures only, without PostgreSQL)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slack_sdk.web.async_client import AsyncWebClient

from bot.durable.driver import StepDriver
from bot.durable.wiring import ManagedSandboxes
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.slack.approval_messages import APPROVE_ACTION_ID
from bot.slack.installation import Installation
from bot.slack.poster import SlackPoster
from bot.slack.progress import ThreadReporter
from harness import (
    DEFAULT_MODEL,
    AnthropicModel,
    ApprovalGate,
    Checkpoint,
    Event,
    Message,
    PendingApproval,
    Requester,
    SandboxWorkspaces,
    ToolIntent,
    ToolUseBlock,
    input_sha256,
)
from harness.approvals import EgressReach, default_policy
from harness.approvals.pending import expiry_note
from harness.guard.calls import program_calls
from memory_store import Outbox, SessionKey, SessionStore, Wait
from sandbox_client import LocalConfig, LocalProvider, SandboxHandle, SandboxManager
from sandbox_client.gateway import Rules
from tests.bot.conftest import load_case
from tests.bot.slack_edge import CHANNEL, SlackEdge, event, running_edge
from tests.fakes.slack_api import TEAM_ID
from tests.harness.approvals.test_disguises import RULES

COMMAND = "kubectl rollout restart deployment/payments 2>/dev/null; echo restarted"
GOAL_MS = 500.0
POLICY_GOAL_US = 1000.0
DATA = Path(__file__).resolve().parent.parent / "tests" / "harness" / "data"
CORPORA = ("approval_disguises.jsonl", "approval_reads.jsonl", "bash_guard_public.jsonl")
WORKER_THREADS = 8  # WARROOM_WORKER_THREADS' default: a slow Slack call holds one, not all


def plan(request: RecordedRequest) -> Reply:
    """A change that needs approval, then an answer."""
    turns = sum(1 for m in request.messages if m.get("role") == "assistant")
    if turns == 0:
        return Reply.tool("Bash", {"command": COMMAND, "description": "Restart payments"})
    return Reply.text("Restarted.")


class TimedReporter(ThreadReporter):
    """The Slack thread reporter, noting when each tool call's intent is committed (the
    command starts right after, in the same step)."""

    def __init__(self, poster: SlackPoster) -> None:
        super().__init__(poster)
        self.started: dict[str, float] = {}
        self.start_seen: dict[str, asyncio.Event] = {}

    def step_started(self, *, session_id: str, kind: str) -> None:
        return None

    def events_saved(self, *, session_id: str, events: Sequence[Event]) -> None:
        for e in events:
            if isinstance(e, ToolIntent):
                self.started[session_id] = time.perf_counter()
                self.start_seen.setdefault(session_id, asyncio.Event()).set()


async def _until(check: Callable[[], Awaitable[bool]], *, timeout_s: float = 60.0) -> None:
    """Poll ``check`` every 10 ms until it holds; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the session did not get there in time")
        await asyncio.sleep(0.01)  # polling interval


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(
    edge: SlackEdge, reporter: TimedReporter, manager: SandboxManager,
    running: set[asyncio.Task[None]], rounds: int,
) -> dict[str, Any]:  # fmt: skip
    """Park ``rounds`` sessions on an approval, click Approve on each, time click → start."""
    waits_ms: list[float] = []
    awake = 0  # parked sessions whose sandbox still ran
    for n in range(rounds):
        root = f"17672{n:05d}.000100"
        await edge.post_event(event("event_app_mention_top_level.json", ts=root))
        await _until(lambda root=root: _waiting(edge, root))  # type: ignore[misc]
        session = await edge.session(root)
        assert session is not None
        cp = Checkpoint.from_json(session.checkpoint)
        assert cp.approval is not None
        assert cp.sandbox is not None
        awake += not await _suspended(manager, SandboxHandle.from_json(cp.sandbox))
        value = json.dumps(
            {"s": session.id, "t": cp.approval.tool_use_id, "h": cp.approval.input_sha256},
            separators=(",", ":"),
        )
        payload = load_case("interactive_block_actions.json")
        payload.pop("enterprise")
        payload["team"].pop("enterprise_id")
        payload["actions"][0].update(action_id=APPROVE_ACTION_ID, value=value)
        await _until(functools.partial(_idle, running))  # the condition: worker idle
        seen = reporter.start_seen[session.id] = asyncio.Event()
        clicked = time.perf_counter()
        await edge.post_form({"payload": json.dumps(payload)})
        await asyncio.wait_for(seen.wait(), 60)
        waits_ms.append((reporter.started[session.id] - clicked) * 1000)
        await _until(lambda root=root: _waiting(edge, root))  # type: ignore[misc]
    p50, p99 = statistics.median(waits_ms), _pct(waits_ms, 0.99)
    return {
        "rounds": rounds,
        "click_to_command_p50_ms": round(p50, 1),
        "click_to_command_p99_ms": round(p99, 1),
        "goal_ms": GOAL_MS,
        "goal_met": p99 <= GOAL_MS,
        "parked_running_sandboxes": awake,
    }


async def _idle(running: set[asyncio.Task[None]]) -> bool:
    return not running


async def _waiting(edge: SlackEdge, root: str) -> bool:
    session = await edge.session(root)
    return session is not None and session.status.value == "waiting"


async def _suspended(manager: SandboxManager, handle: SandboxHandle, within_s: float = 2.0) -> bool:
    """Whether the parked session's sandbox is suspended (the driver suspends it right after
    committing the wait: allowed ``within_s``)."""
    deadline = time.monotonic() + within_s
    while True:
        if (await manager.provider.health(handle)).value == "SUSPENDED":
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)  # polling interval


async def park(sessions: SessionStore, count: int, *, concurrency: int = 8) -> float:
    """Park ``count`` sessions awaiting approval as the driver does; returns sessions/s."""
    gate = asyncio.Semaphore(concurrency)
    now = datetime.now(UTC)
    tool_input = {"command": COMMAND, "description": "Restart payments"}

    async def one(n: int) -> None:
        async with gate:
            session_id = f"parked-{n}"
            call = ToolUseBlock(f"toolu_parked_{n}", "Bash", tool_input)
            approval = PendingApproval(
                call.id, "Bash", input_sha256("Bash", tool_input), COMMAND, "changes a service",
                now, now + timedelta(minutes=30), message_ts=f"{n}.000200",
            )  # fmt: skip
            cp = Checkpoint(session_id, TEAM_ID, CHANNEL, Requester("U1"))
            cp = replace(cp, messages=(Message("assistant", (call,)),), approval=approval)
            opened = await sessions.open_or_join(
                SessionKey(TEAM_ID, CHANNEL, f"9{n:09d}.000100"),
                requester_id="U1",
                initial_checkpoint=cp.state_json(),
                text="restart payments",
                source_ts=f"9{n:09d}.000100",
                session_id=session_id,
            )
            assert opened.token is not None
            claim = await sessions.claim(session_id, opened.token, worker_id="b:0:p", lease_s=30)
            assert claim is not None
            wait = Wait(
                until=now + timedelta(days=7),
                wake_at=approval.expires_at,
                wake_note=expiry_note(call.id),
            )
            await sessions.commit(
                claim,
                checkpoint=cp.state_json(),
                outcome=wait,
                consumed_inbox_upto=claim.inbox_upto,
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(count)))
    return count / (time.perf_counter() - started)


async def parked_figures(
    sessions: SessionStore, pg_url: str, queue: asyncio.Queue[tuple[str, str]], count: int
) -> dict[str, Any]:
    rate = await park(sessions, count)
    started = time.perf_counter()
    swept = await sessions.sweep(max_crashes=3, stale_after_s=30)
    sweep_ms = (time.perf_counter() - started) * 1000
    conn = await asyncpg.connect(pg_url)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE status = 'waiting') AS waiting,"
            " count(*) FILTER (WHERE lease_owner IS NOT NULL) AS leased,"
            " count(*) FILTER (WHERE pending_token IS NOT NULL) AS tokens,"
            " count(*) FILTER (WHERE wake_at IS NOT NULL) AS waking"
            " FROM sessions WHERE id LIKE 'parked-%'"
        )
    finally:
        await conn.close()
    assert row is not None
    return {
        "parked_sessions": row["waiting"],
        "parked_with_expiry_wake": row["waking"],
        "parked_leases_held": row["leased"],
        "parked_pending_tokens": row["tokens"],
        "parked_queued": queue.qsize(),
        "parked_woken_by_sweep": len(swept.woken) + len(swept.requeue),
        "sweep_ms_with_parked": round(sweep_ms, 1),
        "park_rate_per_s": round(rate, 1),
    }


def policy_figures(rounds: int) -> dict[str, Any]:
    """Time ``Policy.bash`` per command over the corpora, and the guard's walk alone."""
    commands = [
        json.loads(line)["command"]
        for name in CORPORA
        for line in (DATA / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    policy, reach = default_policy(), EgressReach(Rules.parse(RULES))

    def timed(run: Callable[[str], object]) -> tuple[list[float], list[float]]:
        for command in commands:  # warm-up: parser, caches
            run(command)
        wall, cpu = [], []
        for _ in range(rounds):
            for command in commands:
                started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
                run(command)
                cpu.append((time.thread_time_ns() - started_cpu) / 1000)
                wall.append((time.perf_counter_ns() - started) / 1000)
        return wall, cpu

    gc.collect()
    gc.freeze()  # the corpus's garbage is not the policy's cost
    walk, walk_cpu = timed(program_calls)
    decided, decided_cpu = timed(lambda command: policy.bash(command, reach=reach))
    p99, p99_cpu = _pct(decided, 0.99), _pct(decided_cpu, 0.99)
    return {
        "policy_commands": len(commands),
        "policy_p50_us": round(statistics.median(decided), 1),
        "policy_p99_us": round(p99, 1),
        "walk_p99_us": round(_pct(walk, 0.99), 1),
        "policy_cpu_p99_us": round(p99_cpu, 1),
        "walk_cpu_p99_us": round(_pct(walk_cpu, 0.99), 1),
        "policy_goal_us": POLICY_GOAL_US,
        "policy_goal_met": p99 <= POLICY_GOAL_US,
        "policy_goal_met_cpu": p99_cpu <= POLICY_GOAL_US,
        "load_1m": round(os.getloadavg()[0], 2),
    }


def _with_path(url: str, path: str, scheme: str | None = None) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=path, scheme=scheme or parts.scheme))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {"bench": "approvals"}
    if args.policy_rounds:
        figures |= policy_figures(args.policy_rounds)
    if args.rounds or args.parked:
        figures |= await flow_figures(args)
    return figures


async def flow_figures(args: argparse.Namespace) -> dict[str, Any]:
    """The click-to-command and parked-session figures (PostgreSQL, jails, fake Slack)."""
    name = f"warroom_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(args.pg_admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    pg_url = _with_path(args.pg_admin_url, f"/{name}")
    data_dir = Path(tempfile.mkdtemp(prefix="wr-bap-"))  # jail socket paths stay short
    queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

    async def enqueue(session_id: str, token: str) -> None:
        queue.put_nowait((session_id, token))

    figures: dict[str, Any] = {}
    try:
        async with (
            running_edge(
                data_dir,
                database_url=_with_path(pg_url, f"/{name}", "postgresql+asyncpg"),
                installation=Installation(TEAM_ID),
                enqueue=enqueue,
            ) as edge,
            FakeAnthropicAPI(plan) as fake,
        ):
            # Slack's per-minute limits would make the rounds wait on Slack, not on us
            # (benchmarks measure our code: the fake's own switch for them)
            edge.slack_api.limits.enabled = False
            manager = SandboxManager(LocalProvider(LocalConfig(state_dir=data_dir / "sbx")))
            model = AnthropicModel(api_key="sk-test", model=DEFAULT_MODEL, base_url=fake.base_url)
            client = AsyncWebClient(token=edge.slack_api.token, base_url=edge.slack_api.base_url)
            reporter = TimedReporter(SlackPoster(client, Outbox(edge.database)))
            driver = StepDriver(
                sessions=edge.sessions,
                files=edge.files,
                model=model,
                workspaces=SandboxWorkspaces(manager),
                poster=reporter,
                enqueue=enqueue,
                worker_id="bench:0:w",
                sandboxes=ManagedSandboxes(manager),
                approvals=ApprovalGate(),
            )

            threads = asyncio.Semaphore(WORKER_THREADS)
            running: set[asyncio.Task[None]] = set()

            async def step(session_id: str, token: str) -> None:
                async with threads:
                    await driver.run(session_id, token)

            async def worker() -> None:  # a worker's threads: one message each
                while True:
                    session_id, token = await queue.get()
                    task = asyncio.create_task(step(session_id, token))
                    running.add(task)
                    task.add_done_callback(running.discard)

            task = asyncio.create_task(worker())
            try:
                if args.rounds:
                    figures |= await latency(edge, reporter, manager, running, args.rounds)
                if args.parked:
                    figures |= await parked_figures(edge.sessions, pg_url, queue, args.parked)
            finally:
                task.cancel()
                await model.aclose()
                await manager.aclose()
    finally:
        admin = await asyncpg.connect(args.pg_admin_url)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
        shutil.rmtree(data_dir, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--parked", type=int, default=10_000)
    parser.add_argument("--policy-rounds", type=int, default=20)
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
