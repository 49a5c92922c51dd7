"""What a Bash call's ``timeout`` costs when the command ends in time, in a local sandbox.

A call that gives a ``timeout`` below the max may be moved to the background at it
(``harness/tools/detached.py``): its output goes to its task file, read back (and the file
removed) by one more sandbox call. A call without ``timeout`` runs as before. Run:
``.venv/bin/python bench/bash_timeout.py [ROUNDS]`` (default 40; needs bubblewrap).
Prints one JSON line:

* ``exec_true_p50_ms``: ``SessionWorkspace.exec("true")``, the floor (one sandbox call).
* ``bash_true_p50_ms``: Bash ``true`` without ``timeout`` through ``run_tool`` (guard,
  exec, change check): what every ordinary call pays.
* ``bash_true_timeout_p50_ms``: the same with ``timeout: 60000`` (the movable path).
* ``plain_over_exec`` and ``timeout_over_plain``: the ratios (goals ≤ 1.5 and ≤ 2.5: an
  ordinary call stays one sandbox call; one with a timeout costs at most one more).
* ``goal``, ``met``, ``unmet``, ``load_avg`` (bench/goals.py).

Rounds alternate the three, so none warms the others.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from goals import verdict  # bench/ is on the path when run as a script

from harness import Checkpoint, Requester, ToolContext, run_tool
from harness.sandbox.session import SandboxWorkspaces
from memory_store import BackgroundTasks, Database, FileStore, SandboxLedgerStore
from sandbox_client import LocalConfig, LocalProvider, SandboxHandle, SandboxManager

GOALS = {"plain_over_exec": ("<=", 1.5), "timeout_over_plain": ("<=", 2.5)}


async def main(rounds: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="wr-bt-"))  # Unix socket paths stay short
    db = Database.from_url(None, data_dir=work)
    await db.migrate()
    provider = LocalProvider(LocalConfig(state_dir=work / "s", network="none"))
    manager = SandboxManager(provider, ledger=SandboxLedgerStore(db), idle_suspend_s=0.0)
    cp = Checkpoint("s-bench", "T-BENCH", "C1", Requester("U1"))
    workspace = SandboxWorkspaces(manager).open(cp)
    store, tasks = FileStore(db), BackgroundTasks(db)
    times: dict[str, list[float]] = {"exec": [], "plain": [], "timeout": []}
    try:
        await workspace.exec("warm", "true", timeout_s=30)
        for i in range(rounds):
            for kind in ("exec", "plain", "timeout"):
                started = time.perf_counter()
                if kind == "exec":
                    await workspace.exec(f"e{i}", "true", timeout_s=60)
                else:
                    call = {"command": "true"} | ({"timeout": 60000} if kind == "timeout" else {})
                    ctx = ToolContext.for_session(cp, store, workspace, f"{kind}{i}", tasks=tasks)
                    outcome = await run_tool("Bash", call, ctx)
                    assert not outcome.is_error, outcome.content
                times[kind].append((time.perf_counter() - started) * 1000)
    finally:
        handle = workspace.handle_json()
        await manager.aclose()
        if handle is not None:
            await provider.destroy(SandboxHandle.from_json(handle))
        await provider.aclose()
        await db.dispose()
        shutil.rmtree(work, ignore_errors=True)
    p50 = {kind: statistics.median(values) for kind, values in times.items()}
    figures = {
        "rounds": rounds,
        "exec_true_p50_ms": round(p50["exec"], 2),
        "bash_true_p50_ms": round(p50["plain"], 2),
        "bash_true_timeout_p50_ms": round(p50["timeout"], 2),
        "plain_over_exec": round(p50["plain"] / p50["exec"], 2),
        "timeout_over_plain": round(p50["timeout"] / p50["plain"], 2),
    }
    print(json.dumps(figures | verdict(figures, GOALS)))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
