"""A deploy with real worker processes (issue #32.2, issue #31): SIGTERM to a worker's
process group while its sessions are mid-turn, a new worker started at once.

Two ``dramatiq`` parents (one worker process of 2 threads each) share one PostgreSQL
database, one Redis database and the fakes; the pool's keeper starts a new worker as soon
as one exits. A worker carries a session on for a minute (``WARROOM_CARRY_ON_S``), so a
step that continues is followed by the next in the same worker unless that worker is
stopping. The stale sweep waits ten minutes: a wake-up lost in the hand-back would leave
its session unfinished, not be rescued by the sweep. Every wait polls with a deadline.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from memory_store import Database, SandboxLedgerStore, SessionStore
from tests.bot.durable_support import (
    Cluster,
    Probe,
    Sender,
    Worker,
    poll,
    running_cluster,
    standard_plan,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.bwrap]

SETTINGS = {
    "WARROOM_LEASE_S": "3",
    "WARROOM_SWEEP_INTERVAL_S": "0.25",
    "WARROOM_STALE_AFTER_S": "600",
    "WARROOM_CARRY_ON_S": "60",
    "dramatiq_worker_timeout": "100",
}
COMMAND_S = 6.0
"""How long each session's Bash command sleeps: the SIGTERM lands while it runs."""
WAIT_S = 120.0
"""How long a session may take to answer: new workers boot first (slow on a loaded host)."""


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    """A fresh database, the fakes and two running workers, for the whole module."""
    with running_cluster(redis_url, name="warroom_deploy", workers=2, settings=SETTINGS) as made:
        yield made


@pytest.fixture
async def probe(cluster: Cluster) -> AsyncIterator[Probe]:
    """Both workers ready, an empty Redis database, and a store to watch them."""
    cluster.pool.wait_ready()
    sender = Sender(cluster.redis_url)
    sender.flush()
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    logged = {w.log_path: len(w.log()) for w in cluster.pool.history}
    try:
        yield Probe(
            SessionStore(db), cluster.fakes, sender, cluster.data_dir, SandboxLedgerStore(db)
        )
    finally:
        await db.dispose()
        sender.close()
        for worker in cluster.pool.history:
            print(f"--- {worker.log_path.name}:\n{worker.log()[logged.get(worker.log_path, 0) :]}")


def _model_calls(log: str, session_id: str) -> list[str]:
    """The Messages API calls a worker's log shows for ``session_id``."""
    return [
        line
        for line in log.splitlines()
        if "/v1/messages" in line and f"session={session_id} " in line
    ]


async def _owner(probe: Probe, cluster: Cluster, session_id: str) -> Worker:
    """The worker whose process holds the session's running step."""

    async def owner() -> str | None:
        return (await probe.session(session_id)).lease_owner

    held = await poll(owner, timeout_s=20, what=f"a worker to hold {session_id}")
    return cluster.pool.owning(held)


async def _exited(worker: Worker) -> None:
    async def gone() -> bool:
        return not worker.alive()

    await poll(gone, timeout_s=60, what="the stopped worker to exit")
    assert worker.process.returncode == 0


async def test_sigterm_during_a_step_hands_the_session_back_after_it_without_another_model_call(
    probe: Probe, cluster: Cluster
) -> None:
    # Given a worker carrying a session on, in the middle of its Bash step
    session_id = f"mid-step-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, standard_plan(sleep_s=COMMAND_S))
    await probe.wait_running_command(session_id)
    worker = await _owner(probe, cluster, session_id)
    logged = len(worker.log())

    # When its process group gets SIGTERM (a deploy)
    os.killpg(worker.pid, signal.SIGTERM)

    # Then the step finishes, the session completes once, the worker exits 0
    await probe.wait_answered(session_id, timeout_s=WAIT_S)
    await probe.assert_completed_once(session_id, effects=None)
    await _exited(worker)
    # and the stopping worker made no model call after the signal: the next step (a model
    # call) went back to the queue and ran on the other worker
    assert not _model_calls(worker.log()[logged:], session_id)


async def test_a_deploy_mid_turn_loses_no_step_and_every_session_completes_once(
    probe: Probe, cluster: Cluster
) -> None:
    # Given four sessions in the middle of their Bash steps on both workers
    session_ids = [f"deploy-{n}-{uuid.uuid4().hex[:6]}" for n in range(4)]
    for session_id in session_ids:
        await probe.start(
            session_id, standard_plan(sleep_s=COMMAND_S, answer=f"Answer of {session_id}.")
        )
    for session_id in session_ids:
        await probe.wait_running_command(session_id, timeout_s=30)
    old = cluster.pool.workers
    logged = {w.log_path: len(w.log()) for w in old}

    # When every worker group gets SIGTERM and new workers start as the old ones exit
    for worker in old:
        os.killpg(worker.pid, signal.SIGTERM)

    # Then every session completes once, through the queue (the stale sweep never ran)
    for session_id in session_ids:
        await probe.wait_answered(session_id, timeout_s=WAIT_S)
        await probe.assert_completed_once(session_id, effects=None)
    for worker in old:
        await _exited(worker)
        after = worker.log()[logged[worker.log_path] :]
        # and no stopping worker started a model call, nor failed a message
        for session_id in session_ids:
            assert not _model_calls(after, session_id), f"{worker.log_path.name} went on"
        assert "Failed to process message" not in after
