"""A worker SIGKILLed in the middle of a command leaves no sandbox behind once the
others stop cleanly (issue #26: the killed process's use stayed counted until the
command's timeout, so the process that recovered the command's outcome would not
destroy the sandbox at its SIGTERM, and with no process left nothing ever did).

Two real ``dramatiq bot.durable.worker_main`` workers over PostgreSQL and Redis, local
jails, the fake Anthropic and Slack APIs (``tests/bot/durable_support``).
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from memory_store import Database, SandboxLedgerStore, SessionStore
from sandbox_client import Health
from tests.bot.durable_support import (
    STATUS_MESSAGE,
    Cluster,
    Probe,
    Sender,
    running_cluster,
    standard_plan,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    """A fresh database, the fakes and two workers with short leases and sweeps."""
    settings = {
        "WARROOM_LEASE_S": "3",
        "WARROOM_SWEEP_INTERVAL_S": "0.25",
        "WARROOM_STALE_AFTER_S": "2",
        "dramatiq_worker_timeout": "100",
        **STATUS_MESSAGE,
    }
    with running_cluster(redis_url, name="warroom_dead_users", workers=2, settings=settings) as c:
        yield c


@pytest.fixture
async def probe(cluster: Cluster) -> AsyncIterator[Probe]:
    """Both workers ready, an empty Redis database, and a store to watch them."""
    cluster.pool.wait_ready()
    sender = Sender(cluster.redis_url)
    sender.flush()
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    try:
        yield Probe(
            SessionStore(db), cluster.fakes, sender, cluster.data_dir, SandboxLedgerStore(db)
        )
    finally:
        await db.dispose()
        sender.close()
        for worker in cluster.pool.history:
            print(f"--- {worker.log_path.name}:\n{worker.log()}")


async def test_a_killed_workers_sandbox_is_destroyed_when_the_others_stop_cleanly(
    probe: Probe, cluster: Cluster
) -> None:
    session_id = f"dead-user-{uuid.uuid4().hex[:6]}"
    # Given a worker SIGKILLed while a command of its session runs (the command's use of
    # the sandbox is counted for its whole timeout: minutes)
    await probe.start(session_id, standard_plan(sleep_s=1.5))
    await probe.wait_running_command(session_id)
    owner = (await probe.session(session_id)).lease_owner
    assert owner is not None
    cluster.pool.owning(owner).signal_children(signal.SIGKILL)
    # and another worker that took the command's outcome and answered (the session now
    # waits for a reply, its sandbox kept)
    await probe.assert_completed_once(session_id)
    handle = await probe.sandbox(session_id)
    provider = probe.provider()
    assert await provider.health(handle) is not Health.GONE

    # When every worker left stops cleanly (SIGTERM, as a deploy does)
    codes = cluster.pool.stop_gracefully()

    # Then they exit 0 and the session's jail is not left running (the killed worker's
    # warm-pool jails are the next pool's to end: tests/sandbox_client/providers)
    assert codes
    assert all(code == 0 for code in codes), codes
    assert await provider.health(handle) is Health.GONE
