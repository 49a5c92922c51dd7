"""Long work: how soon a session hears that its background command ended, and what
waiting sessions cost. Prints one JSON line:

    notification_latency_p50_s, _p90_s   from a background command's end (its last output
        line is the time it ended) to its ``<task-notification>`` being recorded in the
        session's inbox, over ``--commands`` commands in real bubblewrap sandboxes, found by
        a ``BackgroundWatcher`` polling at the default interval (goal p50 ≤ 1 s)
    waiting_sessions                     sessions parked on a background command or a timer
    busy_worker_steps_while_waiting      steps enqueued or leases held while they wait, over
        ``--watch-s`` seconds of the sweeper and the watcher running (goal 0)
    watch_poll_ms, sweep_ms              one watcher poll and one sweep with them all waiting
    subagents_parallel_s, subagents_sequential_s, subagents_parallel_vs_sequential
        a parent session's three subagents, each running a 2 s command then answering, on
        two real ``dramatiq`` worker processes of two threads each (as ``warroom worker``
        runs them, over Redis ``--redis-url``) with the fake model answering at once: the
        three ``Agent`` calls in one message, against one after another (goal ≤ 0.5), after
        one unmeasured parallel run that warms the workers up

The sessions are opened on PostgreSQL and parked the way the driver parks them (a
committed ``Wait``, with ``wake_at`` for the timers). Background commands: ``--commands``
short ones measured for latency, and ``--waiting-commands`` ``sleep`` processes kept
running while the rest of the ``--sessions`` wait on ``ScheduleWakeup`` timers an hour out.

    .venv/bin/python bench/long_work.py [--commands 20] [--sessions 1000]
        [--waiting-commands 50] [--watch-s 5] [--pg-admin-url URL] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, not bench/*.py

from goals import verdict  # bench/ is on the path when run as a script

from bot.durable.agents import child_session_id
from bot.durable.background import BackgroundWatcher
from bot.fakes.anthropic_api import Reply, ToolCall
from harness import Checkpoint, Requester
from harness.tools.background import output_path, task_id_for, wrapped
from memory_store import (
    BackgroundTask,
    BackgroundTasks,
    Database,
    SandboxLedgerStore,
    SessionKey,
    SessionStore,
    Wait,
    utc_now,
)
from sandbox_client import LocalConfig, LocalProvider, SandboxHandle, SandboxManager
from tests import pg_admin
from tests.bot.durable_support import Fakes, Probe, Sender, WorkerPool, destroy_sandboxes

GOALS = {
    "notification_latency_p50_s": ("<=", 1.0),
    "busy_worker_steps_while_waiting": ("==", 0),
    "subagents_parallel_vs_sequential": ("<=", 0.5),
}

ORG, CHANNEL = "T0LONG", "C0LONG"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


async def park(sessions: SessionStore, session_id: str, *, wake_in_s: float | None) -> None:
    """Open a session and commit its first step as a wait (a timer ``wake_in_s`` out)."""
    cp = Checkpoint(session_id, ORG, CHANNEL, Requester("U1"))
    opened = await sessions.open_or_join(
        SessionKey(ORG, CHANNEL, f"{time.time():.6f}-{session_id}"),
        requester_id="U1",
        initial_checkpoint=cp.to_json(),
        text="watch it",
        source_ts=session_id,
        session_id=session_id,
    )
    assert opened.token is not None
    claim = await sessions.claim(session_id, opened.token, worker_id="bench", lease_s=30)
    assert claim is not None
    if wake_in_s is None:
        wait = Wait(until=utc_now() + timedelta(days=7))
    else:
        at = utc_now() + timedelta(seconds=wake_in_s)
        wait = Wait(until=at + timedelta(days=7), wake_at=at, wake_note="check again")
    await sessions.commit(
        claim, checkpoint=cp.state_json(), outcome=wait, consumed_inbox_upto=claim.inbox_upto
    )


async def start(
    tasks: BackgroundTasks,
    manager: SandboxManager,
    handle: SandboxHandle,
    session_id: str,
    command: str,
) -> BackgroundTask:
    """Start ``command`` in the background for the session, as Bash does."""
    tool_use_id = f"toolu_{uuid.uuid4().hex[:20]}"
    task_id = task_id_for(tool_use_id)
    client = manager.provider.connect(handle)
    try:
        await client.start(tool_use_id, wrapped(command, output_path(task_id)))
    finally:
        await client.aclose()
    task = BackgroundTask(
        session_id,
        task_id,
        tool_use_id,
        "bash",
        handle.sandbox_id,
        handle.to_json(),
        command[:60],
        output_path(task_id),
    )
    await tasks.register(task)
    return task


async def measure(url: str, args: argparse.Namespace) -> dict[str, object]:
    state = Path(tempfile.mkdtemp(prefix="wr-lw-"))  # Unix socket paths must stay short
    db = Database.from_url(url, data_dir=state)
    await db.migrate()
    provider = LocalProvider(LocalConfig(state_dir=state / "sbx", network="none"))
    manager = SandboxManager(provider, ledger=SandboxLedgerStore(db), scope="local:bench")
    sessions, tasks = SessionStore(db), BackgroundTasks(db)
    enqueued: list[str] = []

    async def enqueue(session_id: str, token: str) -> None:
        enqueued.append(session_id)

    watcher = BackgroundWatcher(tasks, sessions, manager, enqueue)  # the default interval
    handles: list[SandboxHandle] = []
    try:
        for _ in range(2):
            handles.append((await manager.ensure(None, session_id=None)).handle)
        # 1. latency: commands ending at staggered times, the watcher polling meanwhile
        latency_ids = [f"lat-{i}" for i in range(args.commands)]
        for session_id in latency_ids:
            await park(sessions, session_id, wake_in_s=None)
        started = []
        for i, session_id in enumerate(latency_ids):
            command = f"sleep {1 + (i % 10) * 0.37:.2f}; date +%s.%N"
            started.append(await start(tasks, manager, handles[i % 2], session_id, command))
        watching = asyncio.create_task(watcher.watch_forever())
        latencies: list[float] = []
        deadline = time.monotonic() + 60
        pending = {t.session_id: t for t in started}
        while pending and time.monotonic() < deadline:
            for session_id in list(pending):
                items = [i for i in await sessions.inbox(session_id) if i.kind == "notification"]
                if items:
                    ended_at = float(items[0].text.strip().splitlines()[-1])
                    latencies.append(items[0].created_at.timestamp() - ended_at)
                    del pending[session_id]
            await asyncio.sleep(0.05)
        watching.cancel()
        # 2. many sessions waiting: on running commands and on timers
        waiting = [f"wait-{i}" for i in range(args.sessions)]
        for i, session_id in enumerate(waiting):
            on_command = i < args.waiting_commands
            await park(sessions, session_id, wake_in_s=None if on_command else 3600.0)
            if on_command:
                await start(tasks, manager, handles[i % 2], session_id, "sleep 600")
        enqueued.clear()
        poll_started = time.perf_counter()
        await watcher.poll_once()
        poll_ms = (time.perf_counter() - poll_started) * 1000
        sweep_started = time.perf_counter()
        await sessions.sweep(max_crashes=3, stale_after_s=30)
        sweep_ms = (time.perf_counter() - sweep_started) * 1000
        watching = asyncio.create_task(watcher.watch_forever())
        busy = 0
        stop_at = time.monotonic() + args.watch_s
        while time.monotonic() < stop_at:
            result = await sessions.sweep(max_crashes=3, stale_after_s=30)
            busy += len(result.requeue) + len(result.woken)
            await asyncio.sleep(1.0)  # the sweeper's default interval
        watching.cancel()
        leased = 0
        for session_id in waiting:
            session = await sessions.get(session_id)
            assert session is not None
            leased += session.lease_owner is not None or session.pending_token is not None
        busy += len(enqueued) + leased
        running = await tasks.running_count()
    finally:
        for handle in handles:
            await manager.destroy(handle)
        await manager.aclose()
        await provider.aclose()
        await db.dispose()
        shutil.rmtree(state, ignore_errors=True)
    latencies.sort()
    return {
        "notification_latency_p50_s": round(statistics.median(latencies), 3),
        "notification_latency_p90_s": round(latencies[int(len(latencies) * 0.9) - 1], 3),
        "notifications": len(latencies),
        "waiting_sessions": len(waiting),
        "waiting_on_commands": running,
        "busy_worker_steps_while_waiting": busy,
        "watch_poll_ms": round(poll_ms, 1),
        "sweep_ms": round(sweep_ms, 1),
    }


async def subagent_runs(url: str, redis_url: str) -> dict[str, float]:
    """Wall time of three subagents in parallel and one after another (see the doc)."""
    data_dir = Path(tempfile.mkdtemp(prefix="wr-lw-"))
    fakes = Fakes.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARROOM_", "dramatiq_"))}
    env |= {
        "DATABASE_URL": url,
        "REDIS_URL": redis_url,
        "ANTHROPIC_API_KEY": "sk-ant-bench",
        "ANTHROPIC_BASE_URL": fakes.model.base_url,
        "SLACK_BOT_TOKEN": fakes.slack.token,
        "SLACK_API_URL": fakes.slack.base_url,
        "WARROOM_DATA_DIR": str(data_dir),
        "dramatiq_worker_timeout": "100",  # what `warroom worker` sets
        "dramatiq_queue_prefetch": "2",
    }
    sender = Sender(redis_url)
    sender.flush()
    pool = WorkerPool(env, data_dir, size=2)
    db = Database.from_url(url, data_dir=data_dir)
    try:
        await db.migrate()
        pool.start()
        await asyncio.to_thread(pool.wait_ready)
        probe = Probe(SessionStore(db), fakes, sender, data_dir)
        figures: dict[str, float] = {}
        for mode in ("warm-up", "parallel", "sequential"):  # the first run starts things
            parent = f"bench-{mode}-{uuid.uuid4().hex[:6]}"
            calls = []
            for name in ("pods", "deploys", "database"):
                tool_use_id = f"toolu_{name}_{uuid.uuid4().hex[:8]}"
                child = child_session_id(parent, tool_use_id)
                prompt = f"[session:{child}] Check {name}."
                calls.append(
                    ToolCall("Agent", {"description": name, "prompt": prompt}, id=tool_use_id)
                )
                fakes.script.plans[child] = [
                    Reply.tool("Bash", {"command": "sleep 2"}),
                    Reply.text(f"{name} ok"),
                ]
            if mode != "sequential":
                plan = [Reply(tuple(calls)), Reply.text("done")]
            else:
                plan = [*(Reply((call,)) for call in calls), Reply.text("done")]
            started = time.monotonic()
            await probe.start(parent, plan)
            await probe.wait_answered(parent, timeout_s=120)
            figures[mode] = time.monotonic() - started
    finally:
        pool.stop_all()
        fakes.stop()
        sender.flush()
        sender.close()
        await db.dispose()
        await asyncio.to_thread(destroy_sandboxes, data_dir / "sbx")  # it runs its own loop
        shutil.rmtree(data_dir, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--waiting-commands", type=int, default=50)
    parser.add_argument("--watch-s", type=float, default=5.0)
    parser.add_argument("--pg-admin-url", default=PG_ADMIN_URL)
    parser.add_argument(
        "--redis-url", default=os.environ.get("WARROOM_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    )
    args = parser.parse_args()
    names = [f"warroom_bench_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    for name in names:  # one for the waits, one (fresh) for the workers
        pg_admin.create_database(args.pg_admin_url, name)
    admin = urlsplit(args.pg_admin_url)
    waits_url, agents_url = (
        urlunsplit(admin._replace(scheme="postgresql+asyncpg", path=f"/{name}")) for name in names
    )
    try:
        figures = asyncio.run(measure(waits_url, args))
        runs = asyncio.run(subagent_runs(agents_url, args.redis_url))
        figures |= {
            "subagents_parallel_s": round(runs["parallel"], 2),
            "subagents_sequential_s": round(runs["sequential"], 2),
            "subagents_parallel_vs_sequential": round(runs["parallel"] / runs["sequential"], 2),
        }
    finally:
        for name in names:
            pg_admin.drop_database(args.pg_admin_url, name)
    print(json.dumps(figures | verdict(figures, GOALS)))


if __name__ == "__main__":
    main()
