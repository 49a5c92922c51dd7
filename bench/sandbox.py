"""Local sandbox latencies: provision, resume from frozen, exec, and a bare subprocess.

Run: ``.venv/bin/python bench/sandbox.py [RUNS]`` (default 30, needs bubblewrap).
Prints one JSON line:

* ``provision_p50_ms``/``_p99_ms``: ``LocalProvider.provision`` until the jailed server
  answers (bwrap + the server's Python start-up).
* ``resume_p50_ms``/``_p99_ms``: a frozen sandbox → ``resume`` (thaw, then its health
  probe answered) → the first data-plane call answered (``get_process`` over the client
  connected before the freeze). ``thaw_p50_ms`` stops when ``resume`` returns;
  ``resume_to_exec_true_p50_ms`` goes on until an ``exec("true")`` has finished.
* ``exec_true_p50_ms``: ``SandboxClient.exec("true")`` on a ready sandbox (name lookup,
  streamed start, ``bash -c true``, result).
* ``subprocess_true_p50_ms``: ``asyncio.create_subprocess_exec("true")`` + wait, in this
  process, for the ratio; ``exec_over_subprocess`` is that ratio.
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

from sandbox_client import LocalConfig, LocalProvider, SandboxClient, SandboxHandle


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


async def _resumes(
    provider: LocalProvider, handle: SandboxHandle, client: SandboxClient, runs: int
) -> dict[str, list[float]]:
    marks: dict[str, list[float]] = {"thaw": [], "first_call": [], "exec_true": []}
    for run in range(runs):
        await provider.suspend(handle)
        start = time.perf_counter()
        await provider.resume(handle)
        marks["thaw"].append((time.perf_counter() - start) * 1000)
        await client.get_process("warm-up")
        marks["first_call"].append((time.perf_counter() - start) * 1000)
        await client.exec(f"resume-{run}", "true", timeout_s=10)
        marks["exec_true"].append((time.perf_counter() - start) * 1000)
    return marks


async def _exec_true(client: SandboxClient, name: str) -> float:
    start = time.perf_counter()
    await client.exec(name, "true", timeout_s=10)
    return (time.perf_counter() - start) * 1000


async def _subprocess_true() -> None:
    process = await asyncio.create_subprocess_exec("true")
    await process.wait()


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
        subprocesses = [await _timed(_subprocess_true) for _ in range(runs)]
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    exec_p50, subprocess_p50 = _percentile(execs, 0.5), _percentile(subprocesses, 0.5)
    return {
        "runs": runs,
        "freezer": provider.freezer.kind,
        "provision_p50_ms": _percentile(provisions, 0.5),
        "provision_p99_ms": _percentile(provisions, 0.99),
        "resume_p50_ms": _percentile(resumes["first_call"], 0.5),
        "resume_p99_ms": _percentile(resumes["first_call"], 0.99),
        "thaw_p50_ms": _percentile(resumes["thaw"], 0.5),
        "resume_to_exec_true_p50_ms": _percentile(resumes["exec_true"], 0.5),
        "exec_true_p50_ms": exec_p50,
        "subprocess_true_p50_ms": subprocess_p50,
        "exec_over_subprocess": round(exec_p50 / subprocess_p50, 1),
        "load_1m": round(os.getloadavg()[0], 2),
        "mean_provision_ms": round(statistics.fmean(provisions), 2),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))))
