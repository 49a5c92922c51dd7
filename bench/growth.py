"""Does a step's cost grow with the session? Overhead and bytes per step at several lengths.

For each session length N (default 10, 100, 1,000 and 3,000 steps) a session is opened
on PostgreSQL already holding an N-step transcript (alternating ``TodoWrite`` calls and
their results, as a long investigation leaves them), three times: a *warm* session, a
*cold* one and a *cold_db* one. The sessions are advanced in turns, one step each per
turn, so the machine's load hits every size and every kind alike: a few warm-up turns,
then ``--steps`` measured ones (half tool steps, half model steps).

- A warm session is always stepped by the same ``StepDriver`` (one worker, in this
  process): each step finds its transcript in the worker's cache and its request's
  history in the model's ``MessagesMemo``.
- A cold session is stepped each time by a new ``StepDriver`` with an empty
  ``TranscriptCache`` and a new model with an empty memo: what a step costs on a
  process that did not run the session's previous step (``warroom worker`` runs two;
  the carry-on window ends at the first real model call), reading the session from
  the database and its transcript from the copy the deployment's Redis keeps of it
  (``bot/durable/shared_transcripts.py``, as every worker does with ``REDIS_URL``; the
  warm and cold drivers add to the copies as workers do).
- A cold_db session is stepped as a cold one with no copy to read (Redis lost it, or
  there is none): its transcript is read from the database. No goal: it shows what the
  copy saves.

Once the sessions are open, what exists is frozen out of the garbage collector's
generations (``gc.freeze``), as a worker does once its runtime is open.

The model is an in-process ``Model`` that builds the real request body
(``build_request`` with a ``MessagesMemo``, as the Anthropic adapter does for every
call) and answers at once with the next ``TodoWrite`` call; only its answer is
subtracted, the request building counts as overhead. Bytes are the payload handed to
and returned by ``SessionStore`` (every string in the arguments of ``save``/``commit``
and in the ``Claim``), so the figure means the same before and after a change of
storage; the time spent counting them is not counted as the step's. Prints one JSON line:

    warm, cold, cold_db: {sizes: {N: {overhead_mean_ms, overhead_p50_ms,
                             model_step_p50_ms, tool_step_p50_ms, written_bytes_per_step,
                             read_bytes_per_step, copy_written_bytes_per_step,
                             copy_read_bytes_per_step}},
                 overhead_ratio, written_ratio, read_ratio}
        the ratios: the largest N against the smallest (goals, on warm AND cold:
        overhead ≤ 1.5, written ≤ 2); ``copy_*``: payload bytes added to and read from
        the Redis copies (none for a transcript shorter than ``MIN_MESSAGES``)
    goal, met, unmet, load_avg   (bench/goals.py)

    .venv/bin/python bench/growth.py [--sizes 10,100,1000,3000] [--steps 20]
        [--pg-admin-url URL] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import itertools
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, not bench/*.py

from goals import verdict  # bench/ is on the path when run as a script

from bot.durable.driver import StepDriver
from bot.durable.shared_transcripts import SharedTranscripts
from bot.durable.transcripts import TranscriptCache
from harness import (
    Checkpoint,
    Limits,
    Message,
    MessagesMemo,
    ModelReply,
    Requester,
    SandboxWorkspaces,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
    build_request,
)
from memory_store import Database, FileStore, SessionKey, SessionStore
from sandbox_client import LocalConfig, LocalProvider, SandboxManager
from tests import pg_admin

ORG, CHANNEL = "T0GROWTH", "C0GROWTH"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TODOS = {"todos": [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking"}]}
RESULT = (
    "Todos have been modified successfully. Ensure that you continue to use the todo list "
    "to track your progress. Please proceed with the current tasks if applicable"
)
CONTEXT = "You are helping with an incident in <#C0GROWTH>.\n" + "- /skills/x.md: a playbook\n" * 40
WARM_UP_STEPS = 3
GOALS = {
    "warm.overhead_ratio": ("<=", 1.5),
    "cold.overhead_ratio": ("<=", 1.5),
    "warm.written_ratio": ("<=", 2.0),
    "cold.written_ratio": ("<=", 2.0),
}
KINDS = ("warm", "cold", "cold_db")
REDIS_URL = "redis://127.0.0.1:6379/11"


class RequestBuildingModel:
    """A ``harness.Model`` that builds the request body, then answers with ``TodoWrite``."""

    def __init__(self) -> None:
        self.answer_s = 0.0
        self.calls = 0
        self._ids = itertools.count(1)
        self._memo = MessagesMemo()  # as the adapter keeps one

    async def complete(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        messages: Sequence[Message],
        max_tokens: int | None = None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> ModelReply:
        build_request(
            model="claude-bench",
            max_tokens=max_tokens or 1024,
            system=system,
            tools=tools,
            messages=messages,
            memo=self._memo,
        )
        started = time.perf_counter()
        self.calls += 1
        call = ToolUseBlock(id=f"toolu_g{next(self._ids):010d}", name="TodoWrite", input=TODOS)
        reply = ModelReply((call,), "tool_use", Usage(100, 20), "instant", None, 1)
        self.answer_s += time.perf_counter() - started
        return reply


@dataclasses.dataclass(frozen=True)
class Sample:
    """One measured step: its kind, overhead, and payload bytes to and from the store
    and the copies."""

    kind: str
    overhead_s: float
    written: int
    read: int
    copy_written: int
    copy_read: int


class QuietThread:
    """A ``ThreadPoster`` that posts nothing."""

    async def post_answer(self, **_: Any) -> str:
        return "0.0"

    async def show_progress(self, **_: Any) -> None:
        return None


def payload_bytes(value: Any) -> int:
    """UTF-8 bytes of every string inside ``value`` (dataclasses, sequences, mappings)."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes):
        return len(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(payload_bytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(payload_bytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(payload_bytes(v) for v in value)
    return 0


class CountingStore(SessionStore):
    """``SessionStore`` that counts the payload bytes it is given and gives back.

    ``counting_s`` is the time spent counting (walking a 3,000-message claim is not the
    step's cost): it is subtracted from the step, as the model's answer is."""

    written = 0
    read = 0
    counting_s = 0.0

    @staticmethod
    def _count(value: Any) -> int:
        started = time.perf_counter()
        n = payload_bytes(value)
        CountingStore.counting_s += time.perf_counter() - started
        return n

    async def claim(self, *args: Any, **kwargs: Any) -> Any:
        claim = await super().claim(*args, **kwargs)
        CountingStore.read += self._count(claim)
        return claim

    async def save(self, claim: Any, **kwargs: Any) -> None:
        CountingStore.written += self._count(kwargs)
        await super().save(claim, **kwargs)

    async def commit(self, claim: Any, **kwargs: Any) -> Any:
        CountingStore.written += self._count(kwargs)
        return await super().commit(claim, **kwargs)


def transcript(steps: int) -> tuple[Message, ...]:
    """``steps`` steps' worth of messages, ending with a call still to run."""
    messages = [Message("user", (TextBlock(CONTEXT), TextBlock("pods are down")))]
    for n in range(steps // 2):
        call = ToolUseBlock(f"toolu_seed{n:08d}", "TodoWrite", TODOS)
        messages.append(Message("assistant", (TextBlock("Checking."), call)))
        messages.append(Message("user", (ToolResultBlock(call.id, RESULT),)))
    call = ToolUseBlock("toolu_seedlast", "TodoWrite", TODOS)
    return (*messages, Message("assistant", (call,)))


class Bench:
    """One warm driver (one worker) and, for each cold step, a new driver and model."""

    def __init__(self, db: Database, data_dir: Path, shared: SharedTranscripts) -> None:
        self.db = db
        self.sessions = CountingStore(db)
        self.shared = shared
        self.manager = SandboxManager(LocalProvider(LocalConfig(state_dir=data_dir / "sbx")))
        self.pending: dict[str, str] = {}
        self.warm_model = RequestBuildingModel()
        self.warm_driver = self._driver(self.warm_model, TranscriptCache(), shared)

    def _driver(
        self,
        model: RequestBuildingModel,
        transcripts: TranscriptCache,
        shared: SharedTranscripts | None,
    ) -> StepDriver:
        return StepDriver(
            sessions=self.sessions,
            files=FileStore(self.db),
            model=model,
            workspaces=SandboxWorkspaces(self.manager),
            poster=QuietThread(),
            enqueue=self._enqueue,
            worker_id="bench:0:growth",
            limits=Limits(max_steps=10**6, max_session_tokens=10**12),
            transcripts=transcripts,
            shared=shared,
        )

    async def _enqueue(self, session_id: str, token: str) -> None:
        self.pending[session_id] = token

    async def open(self, size: int) -> str:
        """A session already ``size`` steps long (as ``Checkpoint.to_json`` writes it)."""
        session_id = f"growth-{size}-{uuid.uuid4().hex[:8]}"
        seeded = Checkpoint(
            session_id, ORG, CHANNEL, Requester("U1"), messages=transcript(size), steps=size
        )
        opened = await self.sessions.open_or_join(
            SessionKey(ORG, CHANNEL, session_id),
            requester_id="U1",
            initial_checkpoint=seeded.to_json(),
            text="also check the pool",
            source_ts="1.0",
            session_id=session_id,
        )
        assert opened.token is not None
        self.pending[session_id] = opened.token
        return session_id

    async def step(self, session_id: str, *, kind: str) -> Sample:
        """One step of a ``kind`` session (``KINDS``): its kind of step, overhead (s), and
        payload bytes written to and read from the store and the copies.

        ``cold``, ``cold_db``: on a new driver and model (empty transcript cache, empty
        memo), with the copies or without."""
        if kind == "warm":
            model, driver = self.warm_model, self.warm_driver
        else:
            model = RequestBuildingModel()
            shared = self.shared if kind == "cold" else None
            driver = self._driver(model, TranscriptCache(), shared)
        answer_s, calls = model.answer_s, model.calls
        w0, r0, counting_s = CountingStore.written, CountingStore.read, CountingStore.counting_s
        copy_w0, copy_r0 = self.shared.io.written_bytes, self.shared.io.read_bytes
        started = time.perf_counter()
        await driver.run(session_id, self.pending.pop(session_id))
        elapsed = time.perf_counter() - started - (model.answer_s - answer_s)
        elapsed -= CountingStore.counting_s - counting_s
        return Sample(
            "model" if model.calls > calls else "tool",
            elapsed,
            CountingStore.written - w0,
            CountingStore.read - r0,
            self.shared.io.written_bytes - copy_w0,
            self.shared.io.read_bytes - copy_r0,
        )


async def measure(url: str, redis_url: str, sizes: list[int], steps: int) -> dict[str, Any]:
    """Step the sessions of every size and kind in turns (so load hits all alike)."""
    runs = [(kind, n) for n in sizes for kind in KINDS]
    prefix = f"warroom:bench:growth:{uuid.uuid4().hex[:8]}:"
    shared = SharedTranscripts(redis_url, prefix=prefix)
    with tempfile.TemporaryDirectory(prefix="wr-growth-") as tmp:
        db = Database.from_url(url, data_dir=Path(tmp))
        try:
            await db.migrate()
            bench = Bench(db, Path(tmp), shared)
            ids = {run: await bench.open(run[1]) for run in runs}
            gc.freeze()  # as a worker does once its runtime is open (``RuntimeHolder.get``)
            samples: dict[tuple[str, int], list[Sample]] = {run: [] for run in runs}
            for turn in range(WARM_UP_STEPS + steps):
                for run in runs:
                    sample = await bench.step(ids[run], kind=run[0])
                    if turn >= WARM_UP_STEPS:
                        samples[run].append(sample)
            await bench.manager.aclose()
        finally:
            await db.dispose()
            await _forget(redis_url, prefix)
            await shared.aclose()
    figures: dict[str, Any] = {
        kind: _ratios({n: _figures(samples[kind, n]) for n in sizes}, sizes) for kind in KINDS
    }
    figures |= {"steps_measured": steps, "backend": "postgresql"}
    return figures | verdict(figures, GOALS)


def _ratios(results: dict[int, dict[str, float]], sizes: list[int]) -> dict[str, Any]:
    small, large = results[sizes[0]], results[sizes[-1]]
    return {
        "sizes": {str(n): r for n, r in results.items()},
        "overhead_ratio": round(large["overhead_mean_ms"] / small["overhead_mean_ms"], 2),
        "written_ratio": round(
            large["written_bytes_per_step"] / small["written_bytes_per_step"], 2
        ),
        "read_ratio": round(large["read_bytes_per_step"] / max(1, small["read_bytes_per_step"]), 2),
    }


def _figures(samples: list[Sample]) -> dict[str, float]:
    def ms(values: list[float], average: Callable[[list[float]], float]) -> float:
        return round(average(values) * 1000, 3)

    by_kind = {k: [s.overhead_s for s in samples if s.kind == k] for k in ("model", "tool")}
    return {
        "overhead_mean_ms": ms([s.overhead_s for s in samples], statistics.mean),
        "overhead_p50_ms": ms([s.overhead_s for s in samples], statistics.median),
        "model_step_p50_ms": ms(by_kind["model"], statistics.median),
        "tool_step_p50_ms": ms(by_kind["tool"], statistics.median),
        "written_bytes_per_step": round(statistics.mean(s.written for s in samples)),
        "read_bytes_per_step": round(statistics.mean(s.read for s in samples)),
        "copy_written_bytes_per_step": round(statistics.mean(s.copy_written for s in samples)),
        "copy_read_bytes_per_step": round(statistics.mean(s.copy_read for s in samples)),
    }


async def _forget(redis_url: str, prefix: str) -> None:
    """Delete the copies the bench made."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,3000")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--pg-admin-url", default=PG_ADMIN_URL)
    parser.add_argument("--redis-url", default=REDIS_URL, help="where the copies are kept")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    name = f"warroom_bench_{uuid.uuid4().hex[:12]}"
    pg_admin.create_database(args.pg_admin_url, name)
    try:
        url = urlunsplit(urlsplit(args.pg_admin_url)._replace(path=f"/{name}"))
        figures = asyncio.run(measure(url, args.redis_url, sizes, args.steps))
    finally:
        pg_admin.drop_database(args.pg_admin_url, name)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
