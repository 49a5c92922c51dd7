"""A workspace that refuses Slack's agent surface gets today's status message (issue #28).

Two worker processes (on the agent surface, the default) run sessions against a fake Slack
that refuses the agent-surface methods (``feature_disabled``, as a workspace where the app
is not allowed as an agent answers): each process asks once, then shows progress in the
status message and posts the answer as before.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from bot.fakes.anthropic_api import Reply
from memory_store import Database, SessionStore
from tests.bot.durable.test_workers import WORKER_SETTINGS
from tests.bot.durable_support import CHANNEL, Cluster, Probe, Sender, running_cluster

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.bwrap]

WORKERS = 2


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    with running_cluster(
        redis_url, name="warroom_agents_fallback", workers=WORKERS, settings=WORKER_SETTINGS
    ) as made:
        made.fakes.slack.agents.refuse("feature_disabled")
        yield made


@pytest.fixture
async def probe(cluster: Cluster) -> AsyncIterator[Probe]:
    cluster.pool.wait_ready(count=WORKERS)
    sender = Sender(cluster.redis_url)
    sender.flush()
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    try:
        yield Probe(SessionStore(db), cluster.fakes, sender, cluster.data_dir)
    finally:
        await db.dispose()
        sender.close()


async def test_sessions_fall_back_to_the_status_message_asking_once_per_process(
    probe: Probe,
) -> None:
    ids = [f"fallback-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for n, session_id in enumerate(ids):
        plan = [Reply.tool("Bash", {"command": f"echo {n}"}), Reply.text(f"Answer {n}.")]
        await probe.start(session_id, plan)
    await asyncio.gather(*(probe.wait_answered(session_id) for session_id in ids))

    slack = probe.fakes.slack
    refused = [c for c in slack.calls if c.response.get("error") == "feature_disabled"]
    assert 1 <= len(refused) <= WORKERS  # each worker process asked at most once
    assert {c.method for c in refused} == {"agents.sessions.setStatus"}
    assert slack.agents.streams == {}
    for n, session_id in enumerate(ids):
        thread_ts = (await probe.session(session_id)).key.thread_ts
        texts = [str(m.get("text")) for m in slack.thread(CHANNEL, thread_ts)]
        assert any(f"Answer {n}." in t for t in texts) or any(
            f"Answer {n}." in str(m.get("blocks")) for m in slack.thread(CHANNEL, thread_ts)
        )
    assert slack.calls_to("chat.update")  # the status messages' updates
