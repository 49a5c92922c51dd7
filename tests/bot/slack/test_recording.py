"""Recording before the ack under pressure: bounded, within Slack's deadline, never half-done.

The database is made slow for real: another connection holds a lock on the sessions
table, so every new thread's recording waits (PostgreSQL).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from bot.slack.recording import MAX_CONCURRENT_INPUTS
from memory_store import Limits
from tests.bot.slack_edge import SlackEdge, event, running_edge

pytestmark = pytest.mark.postgres

TOP = "event_app_mention_top_level.json"
_ts = itertools.count(int(time.time()) * 1000)


def new_mention() -> tuple[dict[str, object], str]:
    """A top-level mention on a thread no other test uses; returns (body, its ts)."""
    ts = f"{next(_ts) / 1000:.6f}"
    return event(TOP, ts=ts), ts


@asynccontextmanager
async def sessions_locked(url: str) -> AsyncIterator[asyncpg.Connection]:
    """Another connection holds the sessions table until the block ends (rolled back): a
    new thread's recording (its session row) waits on it."""
    conn = await asyncpg.connect(_plain(url))
    transaction = conn.transaction()
    await transaction.start()
    try:
        await conn.execute("LOCK TABLE sessions IN EXCLUSIVE MODE")
        yield conn
    finally:
        await transaction.rollback()
        await conn.close()


@pytest.fixture
async def edge(tmp_path: Path, postgres_url: str) -> AsyncIterator[SlackEdge]:
    # Statements wait on locks longer than Slack's deadline, as under heavy load.
    limits = Limits(lock_timeout_ms=20_000)
    async with running_edge(tmp_path, database_url=postgres_url, limits=limits) as running:
        yield running


async def test_an_input_not_recorded_within_the_deadline_is_unacked_then_recorded_once(
    edge: SlackEdge, postgres_url: str
) -> None:
    body, ts = new_mention()
    async with sessions_locked(postgres_url):
        # Given a database that cannot record the mention before Slack's deadline
        response = await edge.post_event(body)
        # Then the event is not acked (Slack retries it)
        assert response.status_code != 200
    # When the database recovers, the recording that had started finishes on its own
    await edge.settle()
    session = await edge.session(ts)
    assert session is not None
    assert edge.enqueued.calls == [(session.id, session.pending_token)]
    # And Slack's retry is acked as the duplicate it is, waking nothing more
    retry = await edge.post_event(body, headers={"X-Slack-Retry-Num": "1"})
    await edge.settle()
    assert retry.status_code == 200
    assert len(edge.enqueued.calls) == 1


async def test_no_more_than_the_bound_of_recordings_wait_on_the_database_at_once(
    edge: SlackEdge, postgres_url: str
) -> None:
    watcher = await asyncpg.connect(_plain(postgres_url))
    try:
        async with sessions_locked(postgres_url):
            # Given a burst of mentions while the database is stuck
            mentions = [new_mention() for _ in range(MAX_CONCURRENT_INPUTS + 4)]
            posts = [asyncio.create_task(edge.post_event(body)) for body, _ in mentions]
            # Then the recordings waiting on the database never exceed the bound
            most = 0
            while not all(p.done() for p in posts):
                most = max(most, await _waiting_on_locks(watcher))
                await asyncio.wait(posts, timeout=0.05)
            assert most == MAX_CONCURRENT_INPUTS
            # And none of the burst is acked before the deadline passes
            assert all(p.result().status_code != 200 for p in posts)
        await edge.settle()
        # And once the database recovers, exactly the recordings that had started are kept
        recorded = [ts for _, ts in mentions if await edge.session(ts) is not None]
        assert len(recorded) == MAX_CONCURRENT_INPUTS
        assert len(edge.enqueued.calls) == MAX_CONCURRENT_INPUTS
    finally:
        await watcher.close()


async def _waiting_on_locks(conn: asyncpg.Connection) -> int:
    count: int = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return count


def _plain(url: str) -> str:
    """A SQLAlchemy URL as asyncpg takes it (no ``+asyncpg`` driver suffix)."""
    return url.replace("postgresql+asyncpg://", "postgresql://")
