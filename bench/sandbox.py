"""Local sandbox latencies: provision, resume from frozen, exec, and a bare subprocess.

Run: ``.venv/bin/python bench/sandbox.py [RUNS [AFTER_STOP_S]]`` (defaults 30 and 60;
needs bubblewrap). Prints one JSON line:

* ``resume_p50_ms``/``_p99_ms``, the headline (goal p50 ≤ 3 ms): a frozen sandbox →
  ``resume`` (thaw, then its health probe answered) → ``exec("true")`` answered over
  the client connected before the freeze: what a parked session waits for before its
  first command has run. Its parts: ``thaw_p50_ms`` stops when ``resume`` returns,
  ``resume_to_first_call_p50_ms`` when a first data-plane call (``get_process``)
  has answered instead of the exec (in alternate rounds, so neither warms the other).
* ``provision_p50_ms``/``_p99_ms``: ``LocalProvider.provision`` until the jailed server
  answers (bwrap + the server's Python start-up; goal p50 ≤ 50 ms), with no warm pool.
* ``pooled_provision_p50_ms``/``_p99_ms``: ``provision`` answered from a started warm pool
  of ``POOL_SIZE`` (``LocalConfig.warm_pool``), each run once the pool has refilled (goal p50
  ≤ 5 ms); ``pooled_hits`` how many runs it answered (all, or the figure is not the pool's).
* ``exec_true_p50_ms``: ``SandboxClient.exec("true")`` on a ready sandbox (one get-or-start
  request: the streamed start, ``bash -c true`` through the server's spare process, result).
* ``subprocess_true_p50_ms`` / ``subprocess_bash_true_p50_ms``: ``true`` and
  ``bash -c true`` run by ``asyncio.create_subprocess_exec`` + wait in this process,
  the floors; ``exec_over_subprocess`` and ``exec_over_bash`` are the ratios.

Jail leaks (issue 13: goal 0 for both), through a worker's real ``Runtime`` (SQLite,
local sandboxes, short settings: suspend after 0.3 s idle, destroy after 2 s):

* ``jail_procs_running``: processes of ``LEAK_SESSIONS`` sandboxes (half of them parked,
  as after an answer) while the worker runs; ``procs_per_jail`` the mean.
* ``jail_procs_left_after_stop``: of those, still alive ``AFTER_STOP_S`` after the
  worker's runtime stopped (``Runtime.close``, what ``serve``'s in-process worker and
  ``warroom worker`` run when they stop); ``pool_jails_left_after_stop`` the same for the
  jails its warm pool (the default ``WARROOM_SANDBOX_WARM_POOL``) held at the stop.
* ``jail_procs_left_after_reap``: processes of idle sandboxes still alive after the
  worker swept for the destroy time plus a margin; ``busy_jail_kept`` is whether a
  sandbox running a command all that time was spared (it must be).

``goal``, ``met``, ``unmet`` and ``load_avg`` as every bench (``bench/goals.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from goals import verdict  # bench/ is on the path when run as a script

from sandbox_client import LocalConfig, LocalProvider, SandboxClient, SandboxHandle

GOALS = {
    "resume_p50_ms": ("<=", 3.0),
    "provision_p50_ms": ("<=", 50.0),
    "pooled_provision_p50_ms": ("<=", 5.0),
    "jail_procs_left_after_stop": ("==", 0),
    "pool_jails_left_after_stop": ("==", 0),
    "jail_procs_left_after_reap": ("==", 0),
    "busy_jail_kept": ("==", 1),
}


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))
    return round(ordered[index], 2)


async def _timed(action: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await action()
    return (time.perf_counter() - start) * 1000


async def _provisions(provider: LocalProvider, runs: int) -> list[float]:
    samples = []
    for run in range(runs):
        handle: SandboxHandle | None = None

        async def provision(run: int = run) -> None:
            nonlocal handle
            handle = await provider.provision(f"bench-p{run}")

        samples.append(await _timed(provision))
        assert handle is not None
        await provider.destroy(handle)
    return samples


POOL_SIZE = 2


async def _pooled_provisions(state_dir: Path, runs: int) -> tuple[list[float], int]:
    """Provisions answered from a warm pool, each once it has refilled; and how many hits."""
    provider = LocalProvider(LocalConfig(state_dir=state_dir, warm_pool=POOL_SIZE))
    events: list[str] = []
    provider.pool.start(events.append)
    samples = []
    try:
        for run in range(runs):
            await provider.pool.filled()
            handle: SandboxHandle | None = None

            async def provision(run: int = run) -> None:
                nonlocal handle
                handle = await provider.provision(f"bench-w{run}")

            samples.append(await _timed(provision))
            assert handle is not None
            await provider.destroy(handle)
    finally:
        await provider.aclose()
    return samples, events.count("pool_hit")


async def _resumes(
    provider: LocalProvider, handle: SandboxHandle, client: SandboxClient, runs: int
) -> dict[str, list[float]]:
    """Resume rounds: every one times the thaw; even ones until ``exec("true")`` has
    answered, odd ones until a first ``get_process`` has."""
    marks: dict[str, list[float]] = {"thaw": [], "first_call": [], "exec_true": []}
    for run in range(2 * runs):
        await provider.suspend(handle)
        start = time.perf_counter()
        await provider.resume(handle)
        marks["thaw"].append((time.perf_counter() - start) * 1000)
        if run % 2 == 0:
            await client.exec(f"resume-{run}", "true", timeout_s=10)
            marks["exec_true"].append((time.perf_counter() - start) * 1000)
        else:
            await client.get_process("warm-up")
            marks["first_call"].append((time.perf_counter() - start) * 1000)
    return marks


async def _exec_true(client: SandboxClient, name: str) -> float:
    start = time.perf_counter()
    await client.exec(name, "true", timeout_s=10)
    return (time.perf_counter() - start) * 1000


async def _subprocess_true() -> None:
    process = await asyncio.create_subprocess_exec("true")
    await process.wait()


async def _subprocess_bash_true() -> None:
    process = await asyncio.create_subprocess_exec("bash", "-c", "true")
    await process.wait()


LEAK_SESSIONS = 6
IDLE_SUSPEND_S, IDLE_DESTROY_S = 0.3, 2.0


def _jail_procs(handles: list[SandboxHandle]) -> int:
    """Processes alive in the jails of ``handles`` (each jail's init and its tree)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        stat = _stat(entry)
        if stat is not None and stat[0] not in ("Z", "X"):
            children.setdefault(int(stat[1]), []).append(int(entry))
    total = 0
    for handle in handles:
        init = _stat(str(handle.pid))
        if init is None or init[0] in ("Z", "X") or int(init[19]) != handle.pid_start_ticks:
            continue
        tree = [handle.pid or 0]
        for pid in tree:
            tree.extend(children.get(pid, []))
        total += len(tree)
    return total


def _pooled_handles(state_dir: Path) -> list[SandboxHandle]:
    """The handles recorded for warm pool jails under ``state_dir``."""
    handles = []
    for path in state_dir.glob("pool-*/handle.json"):
        try:
            handles.append(SandboxHandle.from_json(path.read_text()))
        except (OSError, ValueError):
            continue
    return handles


def _stat(pid: str) -> list[str] | None:
    if not pid.isdigit():
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("latin-1")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


async def _runtime(data_dir: Path) -> object:
    """A worker's ``Runtime`` with short sandbox settings (no Slack, no model calls)."""
    os.environ.update(
        WARROOM_DATA_DIR=str(data_dir),
        WARROOM_SANDBOX_IDLE_S=str(IDLE_SUSPEND_S),
        WARROOM_SANDBOX_IDLE_DESTROY_S=str(IDLE_DESTROY_S),
    )
    from bench.durable import QuietThread
    from bot.durable.wiring import Runtime
    from bot.settings import Settings

    async def enqueue(session_id: str, token: str) -> None:
        return None

    return await Runtime.open(
        Settings(),
        enqueue=enqueue,
        reporter=QuietThread(),
        model=object(),  # type: ignore[arg-type]
    )


async def _sandboxes(runtime: object, count: int) -> list[SandboxHandle]:
    manager = runtime.manager  # type: ignore[attr-defined]
    handles = []
    for _ in range(count):
        result = await manager.ensure(None)
        await result.client.exec("warm", "true", timeout_s=10)
        handles.append(result.handle)
    for handle in handles[: count // 2]:
        await manager.release(handle)  # parked, as after an answer
    return handles


async def leaks(after_stop_s: float) -> dict[str, object]:
    """The jail-leak figures (see the module docstring)."""
    data_dir = Path(tempfile.mkdtemp(prefix="wr-leak-"))
    everything: list[SandboxHandle] = []
    try:
        runtime = await _runtime(data_dir)
        handles = await _sandboxes(runtime, LEAK_SESSIONS)
        everything += handles
        running = _jail_procs(handles)
        pool = runtime.manager.provider.inner.pool  # type: ignore[attr-defined]
        await pool.filled()
        pooled = _pooled_handles(data_dir / "sbx")
        await runtime.close()  # type: ignore[attr-defined]
        await asyncio.sleep(after_stop_s)  # the window: processes left 60 s after stop
        left_after_stop = _jail_procs(handles)
        pool_left = _jail_procs(pooled) + len(_pooled_handles(data_dir / "sbx"))

        runtime = await _runtime(data_dir)
        idle = await _sandboxes(runtime, LEAK_SESSIONS)
        started = asyncio.Event()
        busy_handles: list[SandboxHandle] = []

        async def busy_command() -> None:  # a Bash call, as the tools run it
            manager = runtime.manager  # type: ignore[attr-defined]
            async with manager.use(None, busy_s=120) as used:
                busy_handles.append(used.handle)
                started.set()
                await used.client.exec("busy", "sleep 30", timeout_s=60)

        command = asyncio.create_task(busy_command())
        await started.wait()
        everything += [*idle, *busy_handles]
        deadline = time.monotonic() + IDLE_DESTROY_S + 3.0
        while time.monotonic() < deadline:
            await runtime.sweep_once()  # type: ignore[attr-defined]
            await asyncio.sleep(0.2)
        left_after_reap = _jail_procs(idle)
        busy_kept = _jail_procs(busy_handles) > 0 and not command.done()
        command.cancel()
        await runtime.close()  # type: ignore[attr-defined]
    finally:
        provider = LocalProvider(LocalConfig(state_dir=data_dir / "sbx"))
        await provider.destroy_all()
        shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "leak_sessions": LEAK_SESSIONS,
        "jail_procs_running": running,
        "procs_per_jail": round(running / LEAK_SESSIONS, 1),
        "after_stop_s": after_stop_s,
        "jail_procs_left_after_stop": left_after_stop,
        "pool_jails_at_stop": len(pooled),
        "pool_jails_left_after_stop": pool_left,
        "idle_destroy_s": IDLE_DESTROY_S,
        "jail_procs_left_after_reap": left_after_reap,
        "busy_jail_kept": busy_kept,
    }


async def main(runs: int) -> dict[str, object]:
    state_dir = Path(tempfile.mkdtemp(prefix="wr-bench-"))
    provider = LocalProvider(LocalConfig(state_dir=state_dir))
    try:
        await provider.destroy(await provider.provision("bench-warm-up"))
        provisions = await _provisions(provider, runs)
        handle = await provider.provision("bench-main")
        async with provider.connect(handle) as client:
            await client.exec("warm-up", "true", timeout_s=10)
            execs = [await _exec_true(client, f"true-{n}") for n in range(runs)]
            resumes = await _resumes(provider, handle, client, runs)
        await provider.destroy(handle)
        pooled, hits = await _pooled_provisions(state_dir / "pool", runs)
        subprocesses = [await _timed(_subprocess_true) for _ in range(runs)]
        bashes = [await _timed(_subprocess_bash_true) for _ in range(runs)]
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    exec_p50, subprocess_p50 = _percentile(execs, 0.5), _percentile(subprocesses, 0.5)
    bash_p50 = _percentile(bashes, 0.5)
    return {
        "resume_p50_ms": _percentile(resumes["exec_true"], 0.5),
        "resume_p99_ms": _percentile(resumes["exec_true"], 0.99),
        "thaw_p50_ms": _percentile(resumes["thaw"], 0.5),
        "resume_to_first_call_p50_ms": _percentile(resumes["first_call"], 0.5),
        "runs": runs,
        "freezer": provider.freezer.kind,
        "provision_p50_ms": _percentile(provisions, 0.5),
        "provision_p99_ms": _percentile(provisions, 0.99),
        "pooled_provision_p50_ms": _percentile(pooled, 0.5),
        "pooled_provision_p99_ms": _percentile(pooled, 0.99),
        "pooled_hits": hits,
        "exec_true_p50_ms": exec_p50,
        "subprocess_true_p50_ms": subprocess_p50,
        "subprocess_bash_true_p50_ms": bash_p50,
        "exec_over_subprocess": round(exec_p50 / subprocess_p50, 1),
        "exec_over_bash": round(exec_p50 / bash_p50, 1),
        "mean_provision_ms": round(statistics.fmean(provisions), 2),
    }


async def _all(runs: int, after_stop_s: float) -> dict[str, object]:
    figures = {**await main(runs), **await leaks(after_stop_s)}
    return figures | verdict(figures, GOALS)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    after_stop_s = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    print(json.dumps(asyncio.run(_all(runs, after_stop_s))))
