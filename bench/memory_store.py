"""Benchmark of the org file store on PostgreSQL.

Prints one JSON line:
    write_visible_p50_ms / _p99_ms   a conditional whole-file write committed through one
                                     Database (its own connection pool), then a read through
                                     another Database until it returns the new version: time
                                     from the write call to that read's answer
    write_p50_ms, read_p50_ms        the two halves of that figure
    floor_write_visible_p50_ms / _p99_ms, floor_write_p50_ms, floor_read_p50_ms
                                     the floor (and its halves), sample for sample
                                     alternating with the above: raw asyncpg, one
                                     connection doing a conditional ``UPDATE … WHERE
                                     version = $n RETURNING version`` of a row holding
                                     the same content, another a ``SELECT`` of it until
                                     it shows the new version
    write_visible_vs_floor           the two p50s' ratio (goal ≤ 1.5)
    same_statements_write_visible_p50_ms, write_visible_vs_same_statements
                                     where the rest of the gap is: the store's own two
                                     statements (its conditional write with the file's
                                     revision, its allowance of the org's quotas and the
                                     retention rule, and its read) sent
                                     as they are on two raw asyncpg connections, to
                                     another file, sample for sample; the ratio is what
                                     the store's Python costs over them
    contended_edits_per_s            N writers (default 20), each making M edits (default 25)
                                     to its own lines of one shared file, all at once
    lost_updates                     edits missing from the final content, plus edits
                                     the final version does not count (goal 0)
    goal, met, unmet, load_avg       (bench/goals.py)

    .venv/bin/python bench/memory_store.py [--samples 500] [--writers 20] [--edits 25]
                                           [--pg-admin-url URL]

It creates a throwaway database through the admin URL and drops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# This file is named like the package it measures: put the repository root first on the
# path so that ``import memory_store`` finds the package, not this script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
from goals import verdict  # bench/ is on the path when run as a script

from memory_store import Database, FileStore, Limits, Namespace, Origin, Scope
from memory_store.files import conditional, retention, rows

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
NS = Namespace("bench-org", Scope.INCIDENT, "C-bench")
WARMUP = 30
GOALS = {"write_visible_vs_floor": ("<=", 1.5), "lost_updates": ("==", 0)}
FLOOR_TABLE = """
CREATE TABLE bench_floor (path text PRIMARY KEY, content text NOT NULL, version int NOT NULL)
"""
FLOOR_WRITE = (
    "UPDATE bench_floor SET content = $1, version = version + 1 "
    "WHERE path = $2 AND version = $3 RETURNING version"
)
FLOOR_READ = "SELECT version, content FROM bench_floor WHERE path = $1"


class Floor:
    """The same write → visible round as ``write_visible``, on two raw asyncpg connections."""

    def __init__(self, writer: asyncpg.Connection, reader: asyncpg.Connection) -> None:
        self.writer, self.reader, self.version = writer, reader, 0
        self.halves: list[tuple[float, float]] = []  # (write, read) seconds of each sample

    @classmethod
    async def connect(cls, url: str) -> Floor:
        writer, reader = await asyncpg.connect(url), await asyncpg.connect(url)
        await writer.execute(FLOOR_TABLE)
        await writer.execute("INSERT INTO bench_floor VALUES ('/v.md', 'start', 0)")
        return cls(writer, reader)

    async def sample(self, content: str) -> float:
        """One write, then reads until it shows: seconds."""
        start = time.perf_counter()
        self.version = await self.writer.fetchval(FLOOR_WRITE, content, "/v.md", self.version)
        committed = time.perf_counter()
        while (await self.reader.fetchrow(FLOOR_READ, "/v.md"))["version"] != self.version:
            pass  # never expected, as above
        seen = time.perf_counter()
        self.halves.append((committed - start, seen - committed))
        return seen - start

    async def close(self) -> None:
        await self.writer.close()
        await self.reader.close()


class SameStatements:
    """The store's own write and read statements, sent on two raw asyncpg connections
    with their parameters built inline: the round without the store's Python."""

    def __init__(self, db: Database, writer: asyncpg.Connection, reader: asyncpg.Connection):
        # the incident scope's statements (NS), as the store picks them
        self.write = db.precompiled(conditional._STATEMENTS[False, False])
        self.write_dropping = db.precompiled(conditional._STATEMENTS[True, False])
        self.read = db.precompiled(rows._READ_CURRENT)
        self.writer, self.reader, self.version = writer, reader, 2
        self.at = datetime.now(UTC)

    async def sample(self, i: int, content: str) -> float:
        """One write of ``content``, then reads until it shows: seconds."""
        oldest_dropped = self.version + 1 - retention.keeps(Limits().keep_revisions)
        due = oldest_dropped >= 1 and oldest_dropped % retention.FAST_PATH_EVERY == 0
        params = {
            **rows.ns_params(NS),
            "b_size": len(content.encode()),
            "b_path": "/same.md",
            "b_version": self.version,
            "n_version": self.version + 1,
            "n_content": content,
            "n_summary": "",
            "n_listed": True,
            "n_at": self.at,
            "n_actor": "bench",
            "n_session": "S1",
            "r_operation": "write",
            "r_tool_use_id": f"toolu_same_{i}",
            "r_oldest_dropped": oldest_dropped,
        }
        write = self.write_dropping if due else self.write
        read_args = self.read.args({**rows.ns_params(NS), "path": "/same.md"})
        start = time.perf_counter()
        if await self.writer.fetchval(write.sql, *write.args(params)) is None:
            raise RuntimeError("the store's write statement wrote nothing")
        self.version += 1
        while (await self.reader.fetchrow(self.read.sql, *read_args))["version"] != self.version:
            pass  # never expected, as above
        return time.perf_counter() - start


async def write_visible(url: str, data_dir: Path, samples: int) -> dict[str, float]:
    """Latency from a committed write on one pool to a read that sees it on another, and
    the floor's, sample for sample (so the machine's load hits both alike)."""
    raw_url = url.replace("postgresql+asyncpg://", "postgresql://")
    floor = await Floor.connect(raw_url)
    floors: list[float] = []
    writer_db = Database.from_url(url, data_dir=data_dir)
    reader_db = Database.from_url(url, data_dir=data_dir)
    writer, reader = FileStore(writer_db), FileStore(reader_db)
    ns = NS
    same = SameStatements(writer_db, await asyncpg.connect(raw_url), await asyncpg.connect(raw_url))
    sames: list[float] = []
    try:
        version = (
            await writer.write(ns, "/v.md", "start", Origin("bench"), expected_version=0)
        ).version
        await writer.write(ns, "/same.md", "start", Origin("bench"), expected_version=0)
        # a conditional write tops the file's allowance up (the store's statement draws on it)
        await writer.write(ns, "/same.md", "start again", Origin("bench"), expected_version=1)
        total, writes, reads = [], [], []
        for i in range(WARMUP + samples):
            origin = Origin("bench", session_id="S1", tool_use_id=f"toolu_{i}")
            start = time.perf_counter()
            version = (
                await writer.write(ns, "/v.md", f"sample {i}\n", origin, expected_version=version)
            ).version
            committed = time.perf_counter()
            while (await reader.read(ns, "/v.md")).version != version:
                pass  # never expected: a committed write is visible to the next statement
            seen = time.perf_counter()
            floor_s = await floor.sample(f"sample {i}\n")
            same_s = await same.sample(i, f"sample {i}\n")
            if i >= WARMUP:
                floors.append(floor_s * 1000)
                sames.append(same_s * 1000)
                total.append((seen - start) * 1000)
                writes.append((committed - start) * 1000)
                reads.append((seen - committed) * 1000)
    finally:
        await writer_db.dispose()
        await reader_db.dispose()
        await floor.close()
        await same.writer.close()
        await same.reader.close()
    halves = floor.halves[WARMUP:]
    return {
        "write_visible_p50_ms": round(statistics.median(total), 3),
        "write_visible_p99_ms": round(statistics.quantiles(total, n=100)[98], 3),
        "write_p50_ms": round(statistics.median(writes), 3),
        "read_p50_ms": round(statistics.median(reads), 3),
        "floor_write_visible_p50_ms": round(statistics.median(floors), 3),
        "floor_write_p50_ms": round(statistics.median(w for w, _ in halves) * 1000, 3),
        "floor_read_p50_ms": round(statistics.median(r for _, r in halves) * 1000, 3),
        "floor_write_visible_p99_ms": round(statistics.quantiles(floors, n=100)[98], 3),
        "write_visible_vs_floor": round(statistics.median(total) / statistics.median(floors), 2),
        "same_statements_write_visible_p50_ms": round(statistics.median(sames), 3),
        "write_visible_vs_same_statements": round(
            statistics.median(total) / statistics.median(sames), 2
        ),
    }


def line(writer: int, edit: int, state: str) -> str:
    return f"writer {writer:03d} item {edit:03d}: {state}\n"


async def contended_edits(url: str, data_dir: Path, writers: int, edits: int) -> dict[str, float]:
    """Edits per second with ``writers`` sessions editing their own lines of one file."""
    db = Database.from_url(url, data_dir=data_dir, pool_size=writers, max_overflow=4)
    store = FileStore(db)
    ns = Namespace("bench-org", Scope.MEMORY)
    cells = [(w, e) for w in range(writers) for e in range(edits)]
    try:
        board = "".join(line(w, e, "todo") for w, e in cells)
        await store.write(ns, "/board.md", board, Origin("bench"), expected_version=0)

        async def session(w: int) -> None:
            for e in range(edits):
                origin = Origin("bench", session_id=f"S{w}", tool_use_id=f"toolu_{w}_{e}")
                await store.edit(ns, "/board.md", line(w, e, "todo"), line(w, e, "done"), origin)

        start = time.perf_counter()
        await asyncio.gather(*(session(w) for w in range(writers)))
        elapsed = time.perf_counter() - start
        board_now = await store.read(ns, "/board.md")
        final = board_now.content
        # every edit is one version after the first write's (the history itself keeps
        # only the newest revisions: retention, bench/storage.py)
        revisions = board_now.version - 1
    finally:
        await db.dispose()
    missing = sum(line(w, e, "done") not in final for w, e in cells)
    return {
        "contended_edits_per_s": round(len(cells) / elapsed, 1),
        "lost_updates": missing + (len(cells) - revisions),
        "writers": writers,
        "edits": len(cells),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    name = f"warroom_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(args.pg_admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(args.pg_admin_url)._replace(path=f"/{name}"))
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            db = Database.from_url(url, data_dir=Path(data_dir))
            await db.migrate()
            await db.dispose()
            figures = await write_visible(url, Path(data_dir), args.samples)
            figures |= await contended_edits(url, Path(data_dir), args.writers, args.edits)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return figures | verdict(figures, GOALS)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--writers", type=int, default=20)
    parser.add_argument("--edits", type=int, default=25)
    parser.add_argument("--pg-admin-url", default=DEFAULT_ADMIN_URL)
    print(json.dumps({"backend": "postgresql"} | asyncio.run(main(parser.parse_args()))))
