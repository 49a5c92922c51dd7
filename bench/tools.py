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
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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
            print(json.dumps(await measure(store)))
        finally:
            await db.dispose()


async def measure(store: FileStore) -> dict[str, float]:
    human = Origin("U1")
    body = "".join(f"line {i}: some runbook text about pools and caches\n" for i in range(200))
    for i in range(200):
        await store.write(MEMORY, f"/notes/n{i:03}.md", body, human, expected_version=None)
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
    grep = await timed(
        lambda i: run_tool(
            "Grep",
            {"pattern": "line 1[0-9]?:", "path": "/memory", "output_mode": "content"},
            context(store, 3000 + i, state),
        ),
        10,
    )
    grep_all = await timed(
        lambda i: run_tool(
            "Grep",
            {"pattern": "pools", "path": "/memory", "output_mode": "content", "head_limit": 0},
            context(store, 4000 + i, state),
        ),
        5,
    )
    glob = await timed(
        lambda i: run_tool(
            "Glob", {"pattern": "**/*.md", "path": "/memory"}, context(store, i, state)
        ),
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
    }


if __name__ == "__main__":
    asyncio.run(main())
