"""Benchmark of the file tools and change notices over the embedded SQLite store.

Prints one JSON line:
    read_ms_p50/p95      Read of a 200-line /memory file (store read + numbering)
    edit_ms_p50/p95      Edit of one line of that file (one write transaction)
    write_ms_p50         Write replacing a fully read file (conditional write)
    grep_ms              Grep content mode over 200 /memory files of 200 lines (~10 KiB
                         each), 11 matching lines per file, default head_limit (250)
    grep_all_lines_ms    the same with every line matching and head_limit 0 (40,000 lines)
    glob_ms              Glob `**/*.md` over the same 200 files
    notices_ms_quiet     change notices for 50 read files, none changed (one query)
    notices_ms_5_changed same, 5 of them changed by another session (diffs built)
    rg_ms, rg_all_lines_ms, rg_files_ms
                         the floors: ``rg -n`` with the same patterns and ``rg --files``
                         over the same 200 files written to a temporary directory, one run
                         after each run of their tool, round by round (process start
                         included, as a Bash call would pay it); figures are medians
    grep_vs_rg, grep_all_lines_vs_rg, glob_vs_rg
                         the tools against their floors (goal ≤ 2 each: on par with ``rg``)

The tools run in this process after its set-up is frozen out of the collector's
generations (``gc.freeze``), as in a worker once its runtime is open: a full collection
then walks what the tool made, not every module and row of the set-up (a Grep of 40,000
lines made collections over the whole heap most of its time).
    goal, met, unmet, load_avg   (bench/goals.py)
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from goals import verdict  # bench/ is on the path when run as a script

from harness import (
    Checkpoint,
    CommandResult,
    ReadRecord,
    Requester,
    ToolContext,
    change_notices,
    run_tool,
)
from memory_store import Database, FileStore, Namespace, Origin, Scope

ORG = "T-BENCH"
MEMORY = Namespace(ORG, Scope.MEMORY)
ROUNDS = 40
GOALS = {"grep_vs_rg": ("<=", 2.0), "grep_all_lines_vs_rg": ("<=", 2.0), "glob_vs_rg": ("<=", 2.0)}


class NoSandbox:
    """The tools benchmarked here run no command; a result too long for the model is
    kept in a file (as in a real sandbox), here in memory."""

    def __init__(self) -> None:
        self.kept: dict[str, bytes] = {}

    async def exec(self, name: str, command: str, *, timeout_s: float) -> CommandResult:
        raise AssertionError("not used")

    async def lookup(self, name: str, *, timeout_s: float) -> CommandResult | None:
        raise AssertionError("not used")

    async def read_file(self, path: str) -> bytes:
        raise AssertionError("not used")

    async def write_file(self, path: str, data: bytes) -> None:
        self.kept[path] = data


def context(store: FileStore, n: int, read_state: dict[str, ReadRecord]) -> ToolContext:
    return ToolContext(
        store, NoSandbox(), ORG, "C1", "s-bench", "agent", f"toolu_{n}", dict(read_state)
    )


async def timed(action: Callable[[int], Awaitable[object]], rounds: int = ROUNDS) -> list[float]:
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        await action(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def p(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100)[int(q) - 1], 3)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database.from_url(None, data_dir=Path(tmp))
        await db.migrate()
        store = FileStore(db)
        try:
            figures = await measure(store, Path(tmp) / "tree")
            print(json.dumps(figures | verdict(figures, GOALS)))
        finally:
            await db.dispose()


async def side_by_side(
    action: Callable[[int], Awaitable[object]], rg_arguments: list[str], rounds: int
) -> tuple[list[float], list[float]]:
    """Milliseconds of ``action`` and of ``rg`` (run off the event loop), one of each per
    round, alternating: a busy moment of this shared machine slows both, not one."""

    def rg_once() -> float:
        start = time.perf_counter()
        subprocess.run(["rg", *rg_arguments], check=False, capture_output=True)
        return (time.perf_counter() - start) * 1000

    ours: list[float] = []
    theirs: list[float] = []
    for i in range(rounds):
        start = time.perf_counter()
        await action(i)
        ours.append((time.perf_counter() - start) * 1000)
        theirs.append(await asyncio.to_thread(rg_once))
    return ours, theirs


async def measure(store: FileStore, tree: Path) -> dict[str, float]:
    human = Origin("U1")
    body = "".join(f"line {i}: some runbook text about pools and caches\n" for i in range(200))
    (tree / "notes").mkdir(parents=True)
    for i in range(200):
        await store.write(MEMORY, f"/notes/n{i:03}.md", body, human, expected_version=None)
        (tree / "notes" / f"n{i:03}.md").write_text(body)
    gc.freeze()  # as a worker does once its runtime is open (``RuntimeHolder.get``)
    state: dict[str, ReadRecord] = {}

    async def read(i: int) -> None:
        outcome = await run_tool(
            "Read", {"file_path": "/memory/notes/n000.md"}, context(store, i, state)
        )
        state.update(outcome.read_updates)

    async def edit(i: int) -> None:
        line = f"line {i}: some"
        new = f"line {i}: SOME"
        args = {"file_path": "/memory/notes/n000.md", "old_string": line, "new_string": new}
        outcome = await run_tool("Edit", args, context(store, 1000 + i, state))
        state.update(outcome.read_updates)

    async def write(i: int) -> None:
        args = {"file_path": "/memory/notes/n001.md", "content": body + f"v{i}\n"}
        outcome = await run_tool("Write", args, context(store, 2000 + i, state))
        state.update(outcome.read_updates)

    reads = await timed(read)
    edits = await timed(edit)
    await read(0)
    state.update(
        (
            await run_tool("Read", {"file_path": "/memory/notes/n001.md"}, context(store, 9, state))
        ).read_updates
    )
    writes = await timed(write)
    grep, rg = await side_by_side(
        lambda i: run_tool(
            "Grep",
            {"pattern": "line 1[0-9]?:", "path": "/memory", "output_mode": "content"},
            context(store, 3000 + i, state),
        ),
        ["-n", "line 1[0-9]?:", str(tree)],
        10,
    )
    grep_all, rg_all = await side_by_side(
        lambda i: run_tool(
            "Grep",
            {"pattern": "pools", "path": "/memory", "output_mode": "content", "head_limit": 0},
            context(store, 4000 + i, state),
        ),
        ["-n", "pools", str(tree)],
        9,
    )
    glob, rg_files = await side_by_side(
        lambda i: run_tool(
            "Glob", {"pattern": "**/*.md", "path": "/memory"}, context(store, i, state)
        ),
        ["--files", "-g", "*.md", str(tree)],
        10,
    )
    seen = {f"/memory/notes/n{i:03}.md": ReadRecord(1, True, 1) for i in range(10, 60)}
    checkpoint = Checkpoint("s-bench", ORG, "C1", Requester("U1"), read_state=seen)
    quiet = await timed(lambda i: change_notices(store, checkpoint), 10)
    for i in range(10, 15):
        await store.edit(MEMORY, f"/notes/n{i:03}.md", "line 7:", "LINE 7:", Origin("agent", "s-2"))
    changed = await timed(lambda i: change_notices(store, checkpoint), 10)
    return {
        "read_ms_p50": p(reads, 50),
        "read_ms_p95": p(reads, 95),
        "edit_ms_p50": p(edits, 50),
        "edit_ms_p95": p(edits, 95),
        "write_ms_p50": p(writes, 50),
        "grep_ms": round(statistics.median(grep), 3),
        "grep_all_lines_ms": round(statistics.median(grep_all), 3),
        "glob_ms": round(statistics.median(glob), 3),
        "notices_ms_quiet": round(statistics.median(quiet), 3),
        "notices_ms_5_changed": round(statistics.median(changed), 3),
        "rg_ms": round(statistics.median(rg), 3),
        "rg_all_lines_ms": round(statistics.median(rg_all), 3),
        "rg_files_ms": round(statistics.median(rg_files), 3),
        "grep_vs_rg": round(statistics.median(grep) / statistics.median(rg), 2),
        "grep_all_lines_vs_rg": round(statistics.median(grep_all) / statistics.median(rg_all), 2),
        "glob_vs_rg": round(statistics.median(glob) / statistics.median(rg_files), 2),
    }


if __name__ == "__main__":
    asyncio.run(main())
