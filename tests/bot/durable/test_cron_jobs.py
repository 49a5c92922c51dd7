"""A cron job through real worker processes (issue #25): ``CronCreate`` from the fake
model, fired by the workers' sweeper three times across a restart of every worker,
once per due time, then deleted by ``CronDelete``; ``stop`` deletes a session's jobs.

Two ``dramatiq`` workers share one PostgreSQL database and one Redis database. Cron's
granularity is a minute, so the workers run in the test-only seconds mode
(``WARROOM_CRON_SECONDS``: a 6th field, seconds, last) with a 1 s minimum interval, and
the job fires every 4 s. Every wait polls a condition with a deadline.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from bot.fakes.anthropic_api import Reply, ToolCall
from memory_store import CronJobs, Database, InboxItem, SessionStatus, SessionStore
from memory_store.cron.store import job_id_for
from tests.bot.durable_support import Cluster, Probe, Sender, poll, running_cluster

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

WORKERS = 2
EVERY_S = 4
EVERY_4_S = "* * * * * */4"
SETTINGS = {
    "WARROOM_LEASE_S": "3",
    "WARROOM_SWEEP_INTERVAL_S": "0.2",
    "WARROOM_STALE_AFTER_S": "2",
    "WARROOM_SANDBOX_IDLE_S": "0.3",
    "WARROOM_MIN_WAKEUP_S": "1",
    "WARROOM_CRON_SECONDS": "true",
    "dramatiq_worker_timeout": "100",
    "dramatiq_queue_prefetch": "2",
}
"""The workers' settings: short leases and sweeps, cron in seconds."""


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    """A fresh database, the fakes and two running workers, for the whole module."""
    with running_cluster(
        redis_url, name="warroom_cron", workers=WORKERS, settings=SETTINGS
    ) as made:
        yield made


@dataclass
class Rig:
    probe: Probe
    jobs: CronJobs


@pytest.fixture
async def rig(cluster: Cluster) -> AsyncIterator[Rig]:
    """Ready workers, an empty Redis database, and the stores to watch them."""
    cluster.pool.wait_ready()
    sender = Sender(cluster.redis_url)
    sender.flush()
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    logged = {w.log_path: len(w.log()) for w in cluster.pool.history}
    try:
        yield Rig(Probe(SessionStore(db), cluster.fakes, sender, cluster.data_dir), CronJobs(db))
    finally:
        await db.dispose()
        sender.close()
        for worker in cluster.pool.history:
            print(f"--- {worker.log_path.name}:\n{worker.log()[logged.get(worker.log_path, 0) :]}")


async def wakes(probe: Probe, session_id: str) -> list[InboxItem]:
    return [i for i in await probe.sessions.inbox(session_id) if i.kind == "wake"]


def create(prompt: str, tool_id: str) -> Reply:
    return Reply((ToolCall("CronCreate", {"cron": EVERY_4_S, "prompt": prompt}, tool_id),))


async def test_a_job_fires_three_times_across_a_worker_restart_once_each(
    rig: Rig, cluster: Cluster
) -> None:
    probe, jobs = rig.probe, rig.jobs
    session_id = f"cron-{uuid.uuid4().hex[:6]}"
    prompt = "Re-check the checkout-api error rate and report."
    tool_id = f"toolu_cron_{uuid.uuid4().hex[:8]}"
    job_id = job_id_for(tool_id)
    plan = [
        create(prompt, tool_id),
        Reply.text("I will re-check every 4 s."),
        Reply.text("Check 1: 0.1%."),
        Reply.text("Check 2: 0.1%."),
        Reply.tool("CronDelete", {"id": job_id}),
        Reply.text("Check 3: 0.1%. Recovered; no more checks."),
    ]
    await probe.start(session_id, plan)
    await probe.wait_answered(session_id)
    await probe.wait_answered(session_id, posts=2, timeout_s=30)  # the first firing
    assert [w.text for w in await wakes(probe, session_id)] == [prompt]
    # When every worker is killed while the session waits for its next firing
    before = cluster.pool.crashes()
    for worker in cluster.pool.workers:
        worker.signal_children(signal.SIGKILL)

    async def died() -> bool:
        return cluster.pool.crashes() - before >= WORKERS

    await poll(died, timeout_s=15, what="the workers to die")
    # Then the new workers fire it twice more, and the model deletes it
    await probe.wait_answered(session_id, posts=4, timeout_s=60)
    fired = await wakes(probe, session_id)
    assert [w.text for w in fired] == [prompt] * 3
    slots = [int(w.created_at.timestamp()) // EVERY_S for w in fired]
    assert len(set(slots)) == 3, f"two firings for one due time: {fired}"
    assert await jobs.list(session_id) == []
    last = datetime.now(UTC)

    async def past_next_due() -> bool:
        assert len(await wakes(probe, session_id)) == 3, "a deleted job fired"
        return datetime.now(UTC) > last + timedelta(seconds=2 * EVERY_S)

    await poll(past_next_due, timeout_s=20, what="two more due times to pass")
    assert len(probe.fakes.script.requests_for(session_id)) == 6


async def test_stop_deletes_the_sessions_jobs_and_nothing_fires(rig: Rig) -> None:
    probe, jobs = rig.probe, rig.jobs
    session_id = f"cron-stop-{uuid.uuid4().hex[:6]}"
    tool_id = f"toolu_cron_{uuid.uuid4().hex[:8]}"
    await probe.start(session_id, [create("look again", tool_id), Reply.text("Later.")])
    await probe.wait_answered(session_id)
    assert [j.job_id for j in await jobs.list(session_id)] == [job_id_for(tool_id)]
    assert await probe.sessions.cancel(session_id, actor="U0FAKEBOB") is not None
    assert await jobs.list(session_id) == []
    stopped = datetime.now(UTC)

    async def past_due() -> bool:
        assert (await probe.session(session_id)).status is SessionStatus.CANCELLED
        assert await wakes(probe, session_id) == []
        return datetime.now(UTC) > stopped + timedelta(seconds=2 * EVERY_S)

    await poll(past_due, timeout_s=20, what="two due times to pass")
    assert len(probe.fakes.script.requests_for(session_id)) == 2
