"""Per-step overhead of the durable session protocol on both backends.

Measures, for a sequence of steps of one session: ``claim`` + ``commit(Continue)``
(a model step's bookkeeping) and ``claim`` + ``save`` + ``commit`` (a tool step:
intent before side effect). Enqueueing the next token is the bot's (Dramatiq) and is
not included. Prints one JSON line: p50/p95 in milliseconds per backend.

    .venv/bin/python bench/session_step.py [--steps 300] [--pg-admin-url URL]

PostgreSQL is skipped (``"postgres": null``) when the server is not reachable.
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
from pathlib import Path
from typing import Any

import asyncpg

# bench/memory_store.py shadows the package when run from bench/: put the repo root first.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_store import Continue, Database, NewEvent, SessionKey, SessionStore

CHECKPOINT = json.dumps({"messages": ["x" * 200] * 20})  # a ~4 KB checkpoint


async def _steps(store: SessionStore, steps: int, *, tool: bool) -> list[float]:
    key = SessionKey("Tbench", "Cbench", uuid.uuid4().hex)
    opened = await store.open_or_join(
        key, requester_id="U1", initial_checkpoint=CHECKPOINT, text="go", source_ts="1.1"
    )
    token = opened.token
    timings: list[float] = []
    for _ in range(steps):
        assert token is not None
        started = time.perf_counter()
        claim = await store.claim(opened.session_id, token, worker_id="bench", lease_s=15)
        assert claim is not None
        if tool:
            await store.save(claim, checkpoint=CHECKPOINT, events=[NewEvent("tool_intent")])
        token = await store.commit(
            claim,
            checkpoint=CHECKPOINT,
            outcome=Continue(),
            events=[NewEvent("tool_result" if tool else "model_response", '{"ok": true}')],
            consumed_inbox_upto=claim.inbox_upto,
        )
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def _summary(timings: list[float]) -> dict[str, float]:
    ordered = sorted(timings)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3),
    }


async def _measure(url: str | None, data_dir: Path, steps: int) -> dict[str, Any]:
    db = Database.from_url(url, data_dir=data_dir)
    try:
        await db.migrate()
        store = SessionStore(db)
        await _steps(store, 20, tool=True)  # warm up pool and statement caches
        model = await _steps(store, steps, tool=False)
        tool = await _steps(store, steps, tool=True)
        return {"claim_commit": _summary(model), "claim_save_commit": _summary(tool)}
    finally:
        await db.dispose()


async def _postgres(admin_url: str, steps: int, data_dir: Path) -> dict[str, Any] | None:
    try:
        admin = await asyncpg.connect(admin_url, timeout=2)
    except (OSError, asyncpg.PostgresError):
        return None
    name = f"warroom_bench_{uuid.uuid4().hex[:12]}"
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = admin_url.rsplit("/", 1)[0] + f"/{name}"
        return await _measure(url, data_dir, steps)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await _measure(None, Path(tmp), args.steps)
        postgres = await _postgres(args.pg_admin_url, args.steps, Path(tmp))
    print(json.dumps({"steps": args.steps, "sqlite": sqlite, "postgres": postgres}))


if __name__ == "__main__":
    asyncio.run(main())
