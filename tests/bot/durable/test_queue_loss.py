"""A Redis that lost its queued wake-ups is noticed at the next sweep, not after the
stale age (issue #32.2): one worker process over PostgreSQL and Redis whose stale age is
ten minutes, so only the queue watch can bring the lost wake-up back in time.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from bot.fakes.anthropic_api import Reply
from memory_store import Database, SessionStore
from tests.bot.durable.test_workers import WORKER_SETTINGS
from tests.bot.durable_support import (
    Cluster,
    Probe,
    Sender,
    frozen,
    running_cluster,
    standard_plan,
)
from tests.conftest import PG_ADMIN_URL

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.bwrap]


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    settings = {**WORKER_SETTINGS, "WARROOM_STALE_AFTER_S": "600"}
    with running_cluster(
        redis_url, name="warroom_queue_loss", workers=1, settings=settings
    ) as made:
        yield made


@pytest.fixture
async def probe(cluster: Cluster) -> AsyncIterator[Probe]:
    cluster.pool.wait_ready(count=1)
    sender = Sender(cluster.redis_url)
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    try:
        yield Probe(SessionStore(db), cluster.fakes, sender, cluster.data_dir)
    finally:
        await db.dispose()
        sender.close()


async def test_wake_ups_a_redis_restart_lost_are_sent_again_within_a_lease_and_a_sweep(
    probe: Probe, cluster: Cluster
) -> None:
    session_id = f"lost-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, [*standard_plan(), Reply.text("Second answer.")])
    await probe.wait_answered(session_id)
    # Given a reply committed and its wake-up enqueued while the worker takes nothing
    async with frozen(cluster.pool.workers, PG_ADMIN_URL):
        token = await probe.sessions.add_input(
            session_id, user_id="U0FAKEBOB", text="and the DB pool?", source_ts="2.0"
        )
        assert token is not None
        probe.queue.send(session_id, token)
        # When Redis restarts empty (its data, the queue and every key, gone)
        probe.queue.wipe()
        assert probe.queue.size() == 0
    # Then the session answers long before the ten-minute stale age
    await probe.wait_answered(session_id, posts=2, timeout_s=30)
