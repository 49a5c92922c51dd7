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
    subagents_parallel_vs_sequential     null: subagents (``Agent``) are not built yet

The sessions are opened on PostgreSQL and parked the way the driver parks them (a
committed ``Wait``, with ``wake_at`` for the timers). Background commands: ``--commands``
short ones measured for latency, and ``--waiting-commands`` ``sleep`` processes kept
running while the rest of the ``--sessions`` wait on ``ScheduleWakeup`` timers an hour out.

    .venv/bin/python bench/long_work.py [--commands 20] [--sessions 1000]
        [--waiting-commands 50] [--watch-s 5] [--pg-admin-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from bot.durable.background import BackgroundWatcher
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
        "subagents_parallel_vs_sequential": None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--waiting-commands", type=int, default=50)
    parser.add_argument("--watch-s", type=float, default=5.0)
    parser.add_argument("--pg-admin-url", default=PG_ADMIN_URL)
    args = parser.parse_args()
    name = f"warroom_bench_{uuid.uuid4().hex[:12]}"
    pg_admin.create_database(args.pg_admin_url, name)
    try:
        url = urlunsplit(
            urlsplit(args.pg_admin_url)._replace(scheme="postgresql+asyncpg", path=f"/{name}")
        )
        figures = asyncio.run(measure(url, args))
    finally:
        pg_admin.drop_database(args.pg_admin_url, name)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
