"""Per-step overhead of the durable session protocol on both backends, as a step writes now.

Measures, for a sequence of steps of one session, what ``StepDriver`` asks of the
``SessionStore`` per step (``bot/durable/driver.py``, ``bot/durable/transcripts.py``):

- ``claim_commit`` (a model step): ``claim`` with the mark of the transcript this
  worker holds (so it carries no rows), then ``commit(Continue)`` of the checkpoint's
  state (``Checkpoint.state_json``: no messages) with the one message the step added
  appended as a transcript row (``TranscriptDelta``), and its event;
- ``claim_save_commit`` (a tool step: intent before side effect): the same with a
  ``save`` of the state and the intent event before the commit of the result.

Each session is opened as the Slack edge opens one (``Checkpoint.to_json``, its first
message inside); its first step, which stores that message as the transcript's first
row (a new generation), is not timed. Enqueueing the next token is the bot's
(Dramatiq) and is not included. Prints one JSON line, per backend and kind:

    p50_ms, p95_ms                  the step's store calls
    late_vs_early                   p50 of the last quarter of the steps against the first
                                    (the transcript has grown by ``--steps`` rows; goal ≤ 1.5)
    written_bytes_per_step          checkpoint state + transcript rows + event payloads
                                    handed to the store (goal ≤ 4,096; issue 13: 2.4 KB)
    goal, met, unmet, load_avg      (bench/goals.py)

    .venv/bin/python bench/session_step.py [--steps 300] [--pg-admin-url URL]

PostgreSQL is skipped (``"postgres": null``, the goal unmet) when the server is not
reachable.
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

from goals import verdict  # bench/ is on the path when run as a script

from harness import Checkpoint, Message, Requester, TextBlock, ToolResultBlock, ToolUseBlock
from memory_store import (
    Claim,
    Continue,
    Database,
    NewEvent,
    SessionKey,
    SessionStore,
    TranscriptDelta,
    TranscriptMark,
)

ORG, CHANNEL = "Tbench", "Cbench"
TODOS = {"todos": [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking"}]}
CALL = Message("assistant", (TextBlock("Checking."), ToolUseBlock("toolu_b", "TodoWrite", TODOS)))
RESULT = Message("user", (ToolResultBlock("toolu_b", "Todos have been modified successfully."),))
GOALS = {
    f"{backend}.{kind}.{figure}": limit
    for backend in ("sqlite", "postgres")
    for kind in ("claim_commit", "claim_save_commit")
    for figure, limit in (
        ("late_vs_early", ("<=", 1.5)),
        ("written_bytes_per_step", ("<=", 4096)),
    )
}


class Session:
    """One session stepped as one worker steps it: it keeps the transcript's mark."""

    def __init__(self, store: SessionStore, session_id: str, token: str) -> None:
        self.store, self.session_id, self.token = store, session_id, token
        self.mark: TranscriptMark | None = None
        self.steps = 0
        self.written = 0

    @classmethod
    async def open(cls, store: SessionStore) -> Session:
        session_id = uuid.uuid4().hex
        first = Message("user", (TextBlock("pods are down"),))
        cp = Checkpoint(session_id, ORG, CHANNEL, Requester("U1"), messages=(first,))
        opened = await store.open_or_join(
            SessionKey(ORG, CHANNEL, session_id),
            requester_id="U1",
            initial_checkpoint=cp.to_json(),
            text="go",
            source_ts="1.1",
            session_id=session_id,
        )
        assert opened.token is not None
        session = cls(store, opened.session_id, opened.token)
        claim = await session._claim()  # the first step stores the opening message as a row
        rewrite = TranscriptDelta(claim.transcript_mark(), 1, (first.to_json(),))
        await session._commit(claim, rewrite, "model_response")
        return session

    async def step(self, *, tool: bool) -> None:
        """One model step (``tool`` False) or tool step, as the driver writes it."""
        claim = await self._claim()
        base = claim.transcript_mark()
        if tool:
            state = self._state()
            await self.store.save(claim, checkpoint=state, events=[NewEvent("tool_intent")])
            self.written += len(state) + len("tool_intent")
            delta = TranscriptDelta(base, base.generation, (RESULT.to_json(),))
        else:
            delta = TranscriptDelta(base, base.generation, (CALL.to_json(),))
        await self._commit(claim, delta, "tool_result" if tool else "model_response")

    async def _claim(self) -> Claim:
        claim = await self.store.claim(
            self.session_id, self.token, worker_id="bench", lease_s=15, cached=self.mark
        )
        assert claim is not None
        return claim

    async def _commit(self, claim: Claim, delta: TranscriptDelta, event: str) -> None:
        self.steps += 1
        state, payload = self._state(), '{"ok": true}'
        token = await self.store.commit(
            claim,
            checkpoint=state,
            outcome=Continue(),
            events=[NewEvent(event, payload)],
            consumed_inbox_upto=claim.inbox_upto,
            transcript=delta,
        )
        assert token is not None
        self.token, self.mark = token, delta.after(claim.epoch)
        self.written += len(state) + sum(map(len, delta.messages)) + len(event) + len(payload)

    def _state(self) -> str:
        cp = Checkpoint(self.session_id, ORG, CHANNEL, Requester("U1"), steps=self.steps)
        return cp.state_json()


async def _steps(store: SessionStore, steps: int, *, tool: bool) -> dict[str, float]:
    session = await Session.open(store)
    written = session.written
    timings: list[float] = []
    for _ in range(steps):
        started = time.perf_counter()
        await session.step(tool=tool)
        timings.append((time.perf_counter() - started) * 1000)
    stored = await store.transcript(session.session_id)
    assert len(stored) == steps + 1, f"{len(stored)} transcript rows after {steps} steps"
    ordered, quarter = sorted(timings), max(1, steps // 4)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3),
        "late_vs_early": round(
            statistics.median(timings[-quarter:]) / statistics.median(timings[:quarter]), 2
        ),
        "written_bytes_per_step": round((session.written - written) / steps),
    }


async def _measure(url: str | None, data_dir: Path, steps: int) -> dict[str, Any]:
    db = Database.from_url(url, data_dir=data_dir)
    try:
        await db.migrate()
        store = SessionStore(db)
        await _steps(store, 20, tool=True)  # warm up pool and statement caches
        model = await _steps(store, steps, tool=False)
        tool = await _steps(store, steps, tool=True)
        return {"claim_commit": model, "claim_save_commit": tool}
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
    figures = {"steps": args.steps, "sqlite": sqlite, "postgres": postgres}
    print(json.dumps(figures | verdict(figures, GOALS)))


if __name__ == "__main__":
    asyncio.run(main())
