"""The sweeps after a lost queue (an in-memory broker's start, a Redis that restarted)
send again the wake-ups sent before the loss, and only those: a session the Slack edge
opened since is the edge's to wake, once it has added the thread's history (a sweep that
woke it first ran its first model call without the replies that came before the
mention)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.cli.terminal import TerminalReporter
from bot.durable.wiring import FRESH_SWEEPS, Runtime
from bot.settings import Settings
from harness import Checkpoint, Requester
from memory_store import DatabaseUnavailable, SessionKey, SessionStore, utc_now


@dataclass
class Sweeping:
    """A runtime whose wake-ups are recorded in ``sent`` and whose sweeps are counted:
    ``swept`` is set once the fresh sweeps and a usual one have run."""

    runtime: Runtime
    sent: list[str]
    swept: asyncio.Event


@contextlib.asynccontextmanager
async def _sweeping(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    database_url: str | None = None,
    sweep_interval_s: float = 0.01,
) -> AsyncIterator[Sweeping]:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
        database_url=database_url,
        redis_url=None,
        anthropic_api_key=SecretStr("unused"),
        data_dir=tmp_path / "data",
        sweep_interval_s=sweep_interval_s,
    )
    sent: list[str] = []

    async def enqueue(session_id: str, token: str) -> None:
        sent.append(session_id)

    runtime = await Runtime.open(
        settings, enqueue=enqueue, enqueue_shared=enqueue, reporter=TerminalReporter(io.StringIO())
    )
    swept = asyncio.Event()
    sweeps = 0
    sweep_once = runtime.sweep_once

    async def counted(
        *, stale_after_s: float | None = None, sent_before: datetime | None = None
    ) -> int:
        nonlocal sweeps
        if sent_before is None:
            requeued = await sweep_once(stale_after_s=stale_after_s)
        else:
            requeued = await sweep_once(stale_after_s=stale_after_s, sent_before=sent_before)
        sweeps += 1
        if sweeps == FRESH_SWEEPS + 1:  # the fresh ones and a usual one
            swept.set()
        return requeued

    monkeypatch.setattr(runtime, "sweep_once", counted)
    try:
        yield Sweeping(runtime, sent, swept)
    finally:
        await runtime.close()


async def _sweep_after(sweeping: Sweeping, queue_lost_at: float) -> None:
    """Run the sweeps after a queue lost at ``queue_lost_at`` until the fresh ones are over."""
    task = asyncio.create_task(sweeping.runtime.sweep_forever(queue_lost_at=queue_lost_at))
    try:
        await asyncio.wait_for(sweeping.swept.wait(), 30)
    finally:
        task.cancel()


async def _open_after_a_loss(sweeping: Sweeping, thread_ts: str) -> str:
    """Lose the queue now, open a session (as the Slack edge does) 0.1 s later, and let
    the sweeps after the loss run; the session's id."""
    queue_lost_at = time.monotonic()
    task = asyncio.create_task(sweeping.runtime.sweep_forever(queue_lost_at=queue_lost_at))
    try:
        await asyncio.sleep(0.1)  # time passing between the loss and the open
        opened = await _open(sweeping.runtime.sessions, thread_ts)
        await asyncio.wait_for(sweeping.swept.wait(), 30)
    finally:
        task.cancel()
    return opened


async def test_the_sweeps_after_a_lost_queue_send_again_only_what_was_sent_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _sweeping(tmp_path, monkeypatch) as sweeping:
        runtime = sweeping.runtime
        # Given a queue that lost everything a second ago, a session whose wake-up was
        # sent two seconds ago (lost with it)
        queue_lost_at = time.monotonic() - 1.0
        two_seconds_ago = SessionStore(runtime.db, clock=lambda: utc_now() - timedelta(seconds=2))
        before = await _open(two_seconds_ago, "1700000000.000100")
        # and a session the Slack edge opens now (still adding its thread's history)
        after = await _open(runtime.sessions, "1700000000.000200")
        # When the sweeps after the loss run
        await _sweep_after(sweeping, queue_lost_at)
        # Then the lost wake-up is sent again, once, and the new session is left alone
        sent = sweeping.sent
        assert sent == [before], f"sent {sent}; the edge's own session was {after}"


async def _open(sessions: SessionStore, thread_ts: str) -> str:
    key = SessionKey("T0FAKE", "C0FAKEINC", thread_ts)
    session_id = f"s-{thread_ts[-3:]}"
    checkpoint = Checkpoint.initial_json(session_id, "T0FAKE", "C0FAKEINC", Requester("U0FAKE"))
    opened = await sessions.open_or_join(
        key,
        requester_id="U0FAKE",
        initial_checkpoint=checkpoint,
        text="<@U0FAKEBOT> payments-api p99 is 4s",
        source_ts=thread_ts,
        session_id=session_id,
    )
    assert opened.created
    assert opened.token is not None
    return opened.session_id


@pytest.mark.parametrize("edge_clock_s", [+0.3, -0.3], ids=["edge-ahead", "edge-behind"])
async def test_the_sweeps_after_a_lost_queue_judge_wake_ups_by_one_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str, edge_clock_s: float
) -> None:
    """On PostgreSQL the sweep judges ``enqueued_at`` by the database's ``now()``; the Slack
    edge opens sessions with its own host's clock, here 0.3 s off (NTP keeps hosts within
    milliseconds; VMs resumed from a pause or containers without NTP do not). The line
    between "sent before the loss" and "sent since" must not move with it."""
    async with _sweeping(
        tmp_path, monkeypatch, database_url=postgres_url, sweep_interval_s=0.5
    ) as sweeping:
        edge = SessionStore(
            sweeping.runtime.db, clock=lambda: utc_now() + timedelta(seconds=edge_clock_s)
        )
        suffix = "3" if edge_clock_s > 0 else "4"
        if edge_clock_s > 0:
            # Given an edge 0.3 s ahead that sent a wake-up 0.1 s before the queue lost it
            lost = await _open(edge, f"1700000000.000{suffix}00")
            mine = [lost]
            await asyncio.sleep(0.1)  # time passing between the send and the loss
            queue_lost_at = time.monotonic()
            expected = [lost]
        else:
            # Given an edge 0.3 s behind that opens a session 0.1 s after the loss (its
            # wake-up still to come, once it has added the thread's history)
            queue_lost_at = time.monotonic()
            await asyncio.sleep(0.1)  # time passing between the loss and the open
            mine = [await _open(edge, f"1700000000.000{suffix}00")]
            expected = []
        # When the sweeps after the loss run
        await _sweep_after(sweeping, queue_lost_at)
        # Then the lost wake-up is sent again at once, and the edge's new one is not
        assert [s for s in sweeping.sent if s in mine] == expected


async def test_a_sweep_slow_to_start_after_a_lost_queue_still_draws_the_line_at_the_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _sweeping(tmp_path, monkeypatch) as sweeping:
        runtime = sweeping.runtime
        # Given a worker so busy that each sweep's transaction starts 0.3 s late
        store_sweep = runtime.sessions.sweep

        async def late(*args: object, **kwargs: object) -> object:
            await asyncio.sleep(0.3)  # the busy loop, a wait for a pooled connection
            return await store_sweep(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(runtime.sessions, "sweep", late)
        # When a session is opened 0.1 s after the queue lost its messages, and the sweeps
        # after the loss have run
        opened = await _open_after_a_loss(sweeping, "1700000000.000500")
        # Then the edge's session is left to the edge: the line is where the queue lost
        # its messages, not where a late sweep began
        assert opened not in sweeping.sent


async def test_a_wait_for_the_database_clock_does_not_move_the_line_past_the_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _sweeping(tmp_path, monkeypatch) as sweeping:
        runtime = sweeping.runtime
        # Given a read of the lease clock that waits 0.4 s before it reads (a pooled
        # connection busy, a first connection being made)
        lease_now = runtime.sessions.lease_now

        async def waited(*args: object, **kwargs: object) -> datetime:
            await asyncio.sleep(0.4)
            return await lease_now(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(runtime.sessions, "lease_now", waited)
        # When a session is opened 0.1 s after the queue lost its messages, and the sweeps
        # after the loss have run
        opened = await _open_after_a_loss(sweeping, "1700000000.000600")
        # Then the edge's session is left to the edge
        assert opened not in sweeping.sent


async def test_the_sweeps_recover_a_lost_queue_after_the_database_clock_failed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _sweeping(tmp_path, monkeypatch) as sweeping:
        runtime = sweeping.runtime
        # Given a database that cannot be reached at the first read of its clock
        lease_now = runtime.sessions.lease_now
        failures = [DatabaseUnavailable("down")]

        async def flaky(*args: object, **kwargs: object) -> datetime:
            if failures:
                raise failures.pop()
            return await lease_now(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(runtime.sessions, "lease_now", flaky)
        # and a wake-up sent two seconds ago, lost with the queue a second ago
        queue_lost_at = time.monotonic() - 1.0
        two_seconds_ago = SessionStore(runtime.db, clock=lambda: utc_now() - timedelta(seconds=2))
        before = await _open(two_seconds_ago, "1700000000.000700")
        # When the sweeps after the loss run
        await _sweep_after(sweeping, queue_lost_at)
        # Then the lost wake-up is still sent again, once
        assert sweeping.sent == [before]
