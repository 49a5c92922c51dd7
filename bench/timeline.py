"""Benchmark of the incident timeline (§15) on PostgreSQL.

Builds an incident of 20 sessions whose event logs hold 5,000 events in all (commands with
their results, model responses, notices, answers and their posts), with the people's
messages, egress requests and status posts that go with them, beside 4 times as much of
other incidents of the same org; then times ``IncidentRecord.timeline_markdown`` (the one
query over the event log, the entries, the Markdown) end to end.

Prints one JSON line:
    timeline_p50_ms / _p95_ms   one timeline of the incident, read and rendered (goal: p50 ≤ 200)
    entries, events             the timeline's entries; the incident's logged events

    .venv/bin/python bench/timeline.py [--samples 50] [--pg-admin-url URL]

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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# Scripts here are named like the packages they measure (bench/memory_store.py): drop this folder
# from the path, and put the repository root first, so imports find the real packages.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
sys.path.append(str(_HERE))  # last, for bench/goals.py alone

import asyncpg  # noqa: E402
from goals import verdict  # noqa: E402

from harness import (  # noqa: E402
    Answered,
    Checkpoint,
    IncidentRecord,
    ModelResponded,
    Notice,
    NoticeTopic,
    Requester,
    ToolFinished,
    ToolIntent,
    Usage,
)
from memory_store import (  # noqa: E402
    Continue,
    Database,
    EgressEntry,
    EgressLog,
    IncidentLog,
    NewEvent,
    Outbox,
    SessionKey,
    SessionStore,
)

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ORG, CHANNEL = "T0BENCH", "C0INCIDENT"
SESSIONS, EVENTS = 20, 5_000
OTHER_INCIDENTS = 4  # as many events again, four times, in other channels of the org
WARMUP = 5


def _step_events(session: int, step: int) -> list[NewEvent]:
    """One tool round of a session: model response, intent, result (and now and then more)."""
    tool_use_id = f"toolu_{session:02d}_{step:04d}"
    command = f"kubectl logs deploy/checkout-api --since=10m | grep -c ' 500 ' # {step}"
    made = [
        ModelResponded(
            "tool_use",
            "Looking at the logs.",
            (f"Bash: {command}",),
            Usage(900, 80, 40_000, 600),
            1,
        ),
        ToolIntent(tool_use_id, "Bash", f"Bash: {command}", command),
        ToolFinished(
            tool_use_id, "Bash", f"Bash: {command}", step % 7 == 0, 1200, "x" * 500, command
        ),
    ]
    if step % 10 == 0:
        made.append(Notice(NoticeTopic.FILES, "New shared files since your last step: …"))
    return [NewEvent(e.kind, e.to_json()) for e in made]


async def _session(
    sessions: SessionStore, egress: EgressLog, outbox: Outbox, channel: str, n: int, events: int
) -> None:
    thread_ts = f"1796100{n:03d}.000100"
    key = SessionKey(ORG, channel, thread_ts)
    session_id = f"{channel}-{n:02d}"
    cp = Checkpoint(session_id, ORG, channel, Requester(f"U{n:04d}"))
    opened = await sessions.open_or_join(
        key,
        requester_id=f"U{n:04d}",
        initial_checkpoint=cp.to_json(),
        text="checkout-api 500s",
        source_ts=thread_ts,
        session_id=session_id,
    )
    token = opened.token
    step, written = 0, 0
    while written < events:
        assert token is not None
        claim = await sessions.claim(session_id, token, worker_id="bench", lease_s=30)
        assert claim is not None
        batch: list[NewEvent] = []
        while written + len(batch) < events and len(batch) < 60:
            batch += _step_events(n, step)
            step += 1
        batch = batch[: events - written]
        if written + len(batch) == events and len(batch) >= 2:  # the turn ends: an answer, posted
            batch[-2:] = [
                NewEvent("answer", Answered("The pool is exhausted since 14:02.").to_json()),
                NewEvent(
                    "post_done",
                    json.dumps({"key": f"{session_id}:answer:1", "ts": f"{thread_ts[:-3]}999"}),
                ),
            ]
        token = await sessions.commit(
            claim, checkpoint=cp.state_json(), outcome=Continue(), events=batch
        )
        written += len(batch)
        await sessions.add_input(
            session_id,
            user_id="U0CAROL",
            text=f"steer {written}",
            source_ts=f"{thread_ts[:-3]}{written % 1000:03d}",
        )
    at = datetime.now(UTC)
    for i in range(20):
        await egress.record(
            EgressEntry(
                session_id,
                f"toolu_{n:02d}_{i:04d}",
                at + timedelta(seconds=i),
                "GET",
                "prometheus.internal",
                443,
                "/api/v1/query?query",
                200,
                512,
                4.0,
                "prom",
                "injected",
            )
        )
    for turn in range(5):
        key_ = f"{session_id}:status:{turn}"
        await outbox.post_intent(
            session_id,
            key_,
            channel_id=channel,
            thread_ts=thread_ts,
            kind="status",
            payload_json="{}",
        )
        await outbox.post_done(key_, f"{thread_ts[:-3]}{500 + turn}")


async def populate(url: str, data_dir: Path) -> None:
    db = Database.from_url(url, data_dir=data_dir, pool_size=SESSIONS, max_overflow=4)
    await db.migrate()
    sessions, egress, outbox = SessionStore(db), EgressLog(db), Outbox(db)
    per = EVENTS // SESSIONS
    try:
        for channel in [CHANNEL, *(f"C0OTHER{k}" for k in range(OTHER_INCIDENTS))]:
            await asyncio.gather(
                *(_session(sessions, egress, outbox, channel, n, per) for n in range(SESSIONS))
            )
        async with db.write() as conn:
            await conn.exec_driver_sql("ANALYZE")
    finally:
        await db.dispose()


async def measure(url: str, data_dir: Path, samples: int) -> dict[str, float]:
    db = Database.from_url(url, data_dir=data_dir)
    record = IncidentRecord(IncidentLog(db), "https://acme.slack.com/")
    try:
        times = []
        for i in range(WARMUP + samples):
            start = time.perf_counter()
            await record.timeline_markdown(ORG, CHANNEL)
            if i >= WARMUP:
                times.append((time.perf_counter() - start) * 1000)
        timeline = await record.timeline(ORG, CHANNEL)
        async with db.read() as conn:
            events = (
                await conn.exec_driver_sql(
                    "SELECT count(*) FROM session_events e JOIN sessions s ON s.id = e.session_id"
                    f" WHERE s.channel_id = '{CHANNEL}'"
                )
            ).scalar()
    finally:
        await db.dispose()
    return {
        "timeline_p50_ms": round(statistics.median(times), 1),
        "timeline_p95_ms": round(statistics.quantiles(times, n=20)[18], 1),
        "entries": len(timeline.entries),
        "events": int(events or 0),
        "sessions": timeline.sessions,
    }


async def main(args: argparse.Namespace) -> dict[str, float]:
    name = f"warroom_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(args.pg_admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(args.pg_admin_url)._replace(path=f"/{name}"))
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            await populate(url, Path(data_dir))
            return await measure(url, Path(data_dir), args.samples)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--pg-admin-url", default=DEFAULT_ADMIN_URL)
    figures = {"backend": "postgresql"} | asyncio.run(main(parser.parse_args()))
    print(json.dumps(figures | verdict(figures, {"timeline_p50_ms": ("<=", 200.0)})))
