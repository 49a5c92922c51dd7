"""The peer of ``bench/durable.py``: DBOS Transact's per-step overhead on the same PostgreSQL.

Run with a Python that has ``dbos`` installed (it is not one of Warroom's
dependencies; ``bench/durable.py --dbos-python PATH`` runs this file with it):

    python bench/durable_dbos_peer.py --database-url postgresql://… [--steps 200]

A workflow of ``--steps`` async steps, each returning a state of about the size of a
Warroom checkpoint's state (~1 KB: a todo list and counters), as a durable step
records it: DBOS writes each step's output to its system database before the next
step runs. Per-step time is the workflow's wall time over its steps (after a warm-up
workflow); CPU is this process's. Prints one JSON line: ``step_p50_ms`` (median over
``--rounds`` workflows of the mean step time), ``step_cpu_ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from dbos import DBOS, DBOSConfig

TODOS = [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking"}]


@DBOS.step()
async def tool_step(n: int) -> dict[str, Any]:
    """One step: the state after a TodoWrite call (as a checkpoint's state holds it)."""
    return {
        "steps": n,
        "todos": [dict(t, content=f"{t['content']} {m}") for t in TODOS for m in range(8)],
    }


@DBOS.workflow()
async def session(steps: int) -> int:
    """A session of ``steps`` steps, each recorded before the next."""
    total = 0
    for n in range(steps):
        state = await tool_step(n)
        total += int(state["steps"])
    return total


async def rounds(steps: int, count: int) -> tuple[list[float], list[float]]:
    await session(5)  # warm-up
    walls, cpus = [], []
    for _ in range(count):
        wall, cpu = time.perf_counter(), time.process_time()
        await session(steps)
        walls.append((time.perf_counter() - wall) / steps)
        cpus.append((time.process_time() - cpu) / steps)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    config: DBOSConfig = {"name": "warroom-bench-peer", "system_database_url": args.database_url}
    DBOS(config=config)
    DBOS.launch()
    try:
        walls, cpus = asyncio.run(rounds(args.steps, args.rounds))
    finally:
        DBOS.destroy()
    print(
        json.dumps(
            {
                "step_p50_ms": round(statistics.median(walls) * 1000, 3),
                "step_cpu_ms": round(statistics.median(cpus) * 1000, 3),
                "steps": args.steps,
                "rounds": args.rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
