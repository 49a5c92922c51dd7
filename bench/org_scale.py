"""How Warroom's org files scale: prompt size, change notices, search, the sweeper.

Prints one JSON line (PostgreSQL; a throwaway database made through the admin URL):
    first_message_bytes      the frozen first user message of a session in an org with
                             500 skills and 5,000 memory files (goal <= 32 KB)
    next_message_ms          building a later user message in that org (change notices
                             and the new-files check), p50
    notice_p50_ms            a change notice (with its diff) on a file with 100,000
                             revisions (goal <= 5 ms)
    glob_ms / rg_files_ms    Glob "**/*.md" over 10,000 files through the harness tool vs
                             ``rg --files`` over the same files on disk, p50 (glob_ratio)
    grep_ms / rg_l_ms        Grep (files_with_matches) over those files vs ``rg -l``, p50
                             (grep_ratio; goal for both ratios <= 2)
    sweep_ms                 one sweep with 100,000 parked (waiting) sessions, p50
                             (goal <= 10 ms)

    .venv/bin/python bench/org_scale.py [--runs 15] [--pg-admin-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, not bench/*.py

import asyncpg

from harness import Checkpoint, ReadRecord, Requester, ToolContext, change_notices, run_tool
from harness.loop.turn import build_user_message
from harness.model.messages import Message, TextBlock
from memory_store import Database, FileStore, Limits, Namespace, Origin, Scope, SessionStore

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SEARCH_FILES = 10_000
REVISIONS = 100_000
BIG_LIMITS = Limits(
    max_files_per_org=50_000,
    max_bytes_per_org=2 * 1024**3,
    max_stored_bytes_per_org=8 * 1024**3,
    keep_revisions=REVISIONS + 1,  # the notice's file keeps all its history
)
PARKED = 100_000


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 3)


async def timed(work: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await work()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def write_all(store: FileStore, ns: Namespace, files: dict[str, str]) -> None:
    queue = list(files.items())

    async def writer() -> None:
        while queue:
            path, content = queue.pop()
            await store.write(ns, path, content, Origin("bench"), expected_version=None)

    await asyncio.gather(*(writer() for _ in range(8)))


def skill(i: int) -> str:
    description = f"Runbook {i} shows how to diagnose and mitigate failures of service {i}. " * 3
    body = "\n".join(f"{n}. Step {n} of the runbook for service {i}." for n in range(60))
    return (
        f"---\nname: skill-{i:03d}\ndescription: {description.strip()}\n---\n# Skill {i}\n{body}\n"
    )


def memory_file(i: int) -> str:
    lines = [f"Team {i % 40} owns service {i}; deploys go through release train {i % 7}."]
    lines += [f"- fact {n} about service {i}: timeout after {n * 10}ms" for n in range(30)]
    if i % 100 == 0:
        lines.append("ERROR code 4217 seen during the failover drill")
    return "\n".join(lines) + "\n"


def checkpoint(org: str, **fields: Any) -> Checkpoint:
    return Checkpoint(
        session_id="S-bench", org_id=org, channel_id="C-bench", requester=Requester("U1"), **fields
    )


async def first_message(store: FileStore, runs: int) -> dict[str, float]:
    org = f"T{uuid.uuid4().hex[:10]}"
    skills = {f"/skill-{i:03d}/SKILL.md": skill(i) for i in range(500)}
    await write_all(store, Namespace(org, Scope.SKILLS), skills)
    memory = {f"/team{i % 40}/service-{i}.md": memory_file(i) for i in range(5000)}
    await write_all(store, Namespace(org, Scope.MEMORY), memory)
    message, cp, _ = await build_user_message(checkpoint(org), store)
    size = sum(len(b.text.encode()) for b in message.content if isinstance(b, TextBlock))
    later = checkpoint(
        org,
        messages=(message, Message(role="assistant", content=(TextBlock("ok"),))),
        known_files=cp.known_files,
    )
    samples = await timed(lambda: build_user_message(later, store), runs)
    return {"first_message_bytes": size, "next_message_ms": p50(samples)}


async def notice(store: FileStore, url: str, runs: int) -> dict[str, float]:
    org = f"T{uuid.uuid4().hex[:10]}"
    ns = Namespace(org, Scope.MEMORY)
    body = "".join(f"line {n} of the long-lived status file\n" for n in range(12))
    await store.write(ns, "/status.md", body + "version 1\n", Origin("bench"), expected_version=0)
    conn = await asyncpg.connect(url)
    try:
        file_id = await conn.fetchval("SELECT id FROM files WHERE org_id = $1", org)
        await conn.execute(
            "INSERT INTO file_revisions (file_id, version, base_version, operation, content,"
            " actor, created_at) SELECT $1, g, g - 1, 'write', $2 || 'version ' || g || E'\\n',"
            " 'bench', now() FROM generate_series(2, $3::int) AS g",
            file_id,
            body,
            REVISIONS,
        )
        await conn.execute(
            "UPDATE files SET version = $2, content = $3 WHERE id = $1",
            file_id,
            REVISIONS,
            f"{body}version {REVISIONS}\n",
        )
        await conn.execute("ANALYZE file_revisions")
    finally:
        await conn.close()
    seen = ReadRecord(version=REVISIONS - 1, full=True)
    cp = checkpoint(org, read_state={"/memory/status.md": seen})
    texts, _ = await change_notices(store, cp)
    assert texts, "no notice"
    assert "version 100000" in texts[0], texts
    samples = await timed(lambda: change_notices(store, cp), runs)
    return {"notice_p50_ms": p50(samples)}


class NoWorkspace:
    """Glob and Grep on virtual paths never touch the sandbox."""

    async def exec(self, name: str, command: str, *, timeout_s: float) -> Any:
        raise AssertionError("the sandbox was used")


def rg_ms(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(["rg", *args], check=False, capture_output=True)
    return (time.perf_counter() - start) * 1000


def write_tree(root: Path, files: dict[str, str]) -> None:
    for path, content in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


async def search(store: FileStore, runs: int) -> dict[str, float]:
    org = f"T{uuid.uuid4().hex[:10]}"
    files = {f"/team{i % 40}/service-{i}.md": memory_file(i) for i in range(SEARCH_FILES)}
    await write_all(store, Namespace(org, Scope.MEMORY), files)
    ctx = ToolContext(store, NoWorkspace(), org, "C-bench", "S-bench", "agent", "toolu_b")  # type: ignore[arg-type]
    glob_in = {"pattern": "**/*.md", "path": "/memory"}
    grep_in = {"pattern": r"ERROR code \d+", "path": "/memory"}
    with tempfile.TemporaryDirectory() as tmp:
        await asyncio.to_thread(write_tree, Path(tmp), files)
        figures: dict[str, list[float]] = {"glob": [], "rg_files": [], "grep": [], "rg_l": []}
        found = await run_tool("Grep", grep_in, ctx)
        assert found.content.startswith("Found 100 files"), found.content[:200]
        for _ in range(runs):  # interleaved, so both see the same machine load
            figures["glob"] += await timed(lambda: run_tool("Glob", glob_in, ctx), 1)
            figures["rg_files"].append(rg_ms(["--files", "-g", "*.md", tmp]))
            figures["grep"] += await timed(lambda: run_tool("Grep", grep_in, ctx), 1)
            figures["rg_l"].append(rg_ms(["-l", r"ERROR code \d+", tmp]))
    result = {f"{k}_ms": p50(v) for k, v in figures.items()}
    result["glob_ratio"] = round(result["glob_ms"] / result["rg_files_ms"], 2)
    result["grep_ratio"] = round(result["grep_ms"] / result["rg_l_ms"], 2)
    return result


async def sweep(db: Database, url: str, runs: int) -> dict[str, float]:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO sessions (id, org_id, channel_id, thread_ts, requester_id, status, epoch,"
            " crash_count, wait_until, checkpoint, last_seq, inbox_seq, inbox_consumed,"
            " input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, created_at,"
            " updated_at) SELECT 'park-' || g, 'T-park', 'C' || (g % 500), g::text, 'U1',"
            " 'waiting', 1, 0, $1, '{}', 1, 0, 0, 0, 0, 0, 0, now(), now()"
            " FROM generate_series(1, $2::int) AS g",
            datetime.now(UTC) + timedelta(days=7),
            PARKED,
        )
        await conn.execute("ANALYZE sessions")
    finally:
        await conn.close()
    sessions = SessionStore(db)
    samples = await timed(lambda: sessions.sweep(max_crashes=3, stale_after_s=60), runs)
    return {"sweep_ms": p50(samples)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    name = f"warroom_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(args.pg_admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(args.pg_admin_url)._replace(path=f"/{name}"))
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            db = Database.from_url(url, data_dir=Path(data_dir))
            await db.migrate()
            store = FileStore(db, BIG_LIMITS)
            try:
                figures: dict[str, Any] = {"backend": "postgresql"}
                figures |= await first_message(store, args.runs)
                figures |= await notice(store, url, args.runs)
                figures |= await search(store, args.runs)
                figures |= await sweep(db, url, args.runs)
            finally:
                await db.dispose()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--pg-admin-url", default=DEFAULT_ADMIN_URL)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
