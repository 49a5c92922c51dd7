"""What an org stores when one /memory file is rewritten many times (issue #24, item 8).

Rewrites one 100 kB file 300 times through ``FileStore.write`` (the conditional write an
agent's Write makes: PostgreSQL's one-statement path), once keeping every revision (the
behaviour before the retention rule: ``keep_revisions`` unbounded) and once with the
default retention, each in its own org of one throwaway PostgreSQL database. Prints one
JSON line:
    kept_bytes_all / kept_bytes_retained     content bytes of the file's kept revisions
    table_bytes_all / table_bytes_retained   growth of ``file_revisions`` (heap, TOAST and
                                             indexes) measured after ``VACUUM FULL``
    counter_exact                            the org's ``stored_bytes`` counter equals the
                                             bytes counted afresh, both runs
    write_p50_ms_all / write_p50_ms_retained one rewrite, p50 (the retention rule's cost)
    goal_met                                 kept_bytes_retained <= keep_revisions x 100 kB
                                             and the write p50 at most 1.5x that without it

    .venv/bin/python bench/storage.py [--rewrites 300] [--pg-admin-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, not bench/*.py

import asyncpg

from memory_store import Database, FileStore, Limits, Namespace, Origin, Scope

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
FILE_BYTES = 100_000
KEEP_ALL = Limits(keep_revisions=10**9, max_stored_bytes_per_org=10**12)
RETAINED = Limits()


def content(i: int) -> str:
    """100 kB that compress about as much as prose (random words of hex)."""
    words = os.urandom(FILE_BYTES // 2).hex()
    return (f"{i:06d} " + " ".join(words[n : n + 8] for n in range(0, len(words), 8)))[:FILE_BYTES]


async def rewrite(db: Database, limits: Limits, rewrites: int) -> tuple[str, list[float]]:
    """Rewrite one file ``rewrites`` times in a new org; its id and each write's ms."""
    org = f"T-bench-{uuid.uuid4().hex[:8]}"
    store, ns = FileStore(db, limits), Namespace(org, Scope.MEMORY)
    samples = []
    for i in range(rewrites):
        text = content(i)
        start = time.perf_counter()
        await store.write(ns, "/big.md", text, Origin("bench"), expected_version=i)
        samples.append((time.perf_counter() - start) * 1000)
    return org, samples


async def measure(conn: asyncpg.Connection, org: str) -> tuple[int, bool]:
    """(content bytes of the org's kept revisions, whether its counter equals them)."""
    counted = await conn.fetchval(
        "SELECT COALESCE(SUM(octet_length(r.content)), 0) FROM file_revisions r"
        " JOIN files f ON f.id = r.file_id WHERE f.org_id = $1",
        org,
    )
    counter = await conn.fetchval("SELECT stored_bytes FROM org_usage WHERE org_id = $1", org)
    return int(counted), int(counter) == int(counted)


async def table_bytes(conn: asyncpg.Connection) -> int:
    await conn.execute("VACUUM FULL file_revisions")
    return int(await conn.fetchval("SELECT pg_total_relation_size('file_revisions')"))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    name = f"warroom_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(args.pg_admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(args.pg_admin_url)._replace(path=f"/{name}"))
    figures: dict[str, Any] = {"backend": "postgresql", "rewrites": args.rewrites}
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            db = Database.from_url(url, data_dir=Path(data_dir))
            await db.migrate()
            conn = await asyncpg.connect(args.pg_admin_url.rsplit("/", 1)[0] + f"/{name}")
            try:
                exact = True
                for label, limits in (("all", KEEP_ALL), ("retained", RETAINED)):
                    before = await table_bytes(conn)
                    org, samples = await rewrite(db, limits, args.rewrites)
                    figures[f"table_bytes_{label}"] = await table_bytes(conn) - before
                    kept, counter_exact = await measure(conn, org)
                    figures[f"kept_bytes_{label}"] = kept
                    figures[f"write_p50_ms_{label}"] = round(statistics.median(samples), 3)
                    exact = exact and counter_exact
                figures["counter_exact"] = exact
            finally:
                await conn.close()
                await db.dispose()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    figures["goal_met"] = (
        figures["kept_bytes_retained"] <= RETAINED.keep_revisions * FILE_BYTES
        and figures["write_p50_ms_retained"] <= 1.5 * figures["write_p50_ms_all"]
        and figures["counter_exact"]
    )
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rewrites", type=int, default=300)
    parser.add_argument("--pg-admin-url", default=DEFAULT_ADMIN_URL)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
