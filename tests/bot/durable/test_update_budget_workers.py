"""Slack's ``chat.update`` budget costs status messages, never answers (issue #32.1).

Two real worker processes over PostgreSQL and Redis post to the fake Slack Web API on the
status-message path (``WARROOM_AGENT_SURFACE=false``: a turn's progress is a message the
board updates with ``chat.update``). The workspace's shared ``chat.update`` window in Redis
is spent before a session starts, as after a busy minute or a Redis restart, and stays
spent for about a minute: the session's status updates, its final view included, wait
for a turn; its answer (``chat.postMessage``) goes out at once all the same.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from bot.durable.wiring import update_budget
from bot.fakes.anthropic_api import Reply
from bot.settings import Settings
from bot.slack.budget import SharedCallBudget
from bot.slack.status_board import FINAL_KIND
from memory_store import Database, Outbox, SessionStore
from tests.bot.durable.test_workers import WORKER_SETTINGS
from tests.bot.durable_support import Cluster, Probe, Sender, running_cluster

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

ANSWER_WITHIN_S = 40.0
"""Well under the minute the spent window stays closed: an answer that waited for a
``chat.update`` turn could not come sooner."""
TODO = {"content": "Check the pool", "status": "in_progress", "activeForm": "Checking the pool"}


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    settings = {
        **{k: v for k, v in WORKER_SETTINGS.items() if k != "WARROOM_CRASH_AT"},
        "WARROOM_AGENT_SURFACE": "false",  # the status-message path, whatever the default
        "WARROOM_SLACK_SHARED_BUDGET": "true",
    }
    with running_cluster(redis_url, name="warroom_budget", workers=2, settings=settings) as made:
        yield made


@pytest.fixture
async def probe(cluster: Cluster) -> AsyncIterator[Probe]:
    cluster.pool.wait_ready(count=2)
    sender = Sender(cluster.redis_url)
    sender.flush()
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    try:
        yield Probe(SessionStore(db), cluster.fakes, sender, cluster.data_dir)
    finally:
        await db.dispose()
        sender.close()


@pytest.fixture
async def spent_budget(
    cluster: Cluster, probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[float]:
    """The workers' shared ``chat.update`` window, spent; yields the seconds until its next
    turn (about a minute: the window starts as after a Redis restart, nearly full)."""
    monkeypatch.setenv("REDIS_URL", cluster.redis_url)
    monkeypatch.setenv("SLACK_BOT_TOKEN", cluster.fakes.slack.token)
    budget = update_budget(Settings(_env_file=None))  # type: ignore[call-arg]
    assert isinstance(budget, SharedCallBudget)  # the very window the workers take from
    try:
        while (closed_s := await budget.try_take()) == 0:
            pass
        yield closed_s
    finally:
        await budget.aclose()


async def test_an_answer_goes_out_at_once_while_the_update_budget_is_spent(
    probe: Probe, cluster: Cluster, spent_budget: float
) -> None:
    assert spent_budget > ANSWER_WITHIN_S + 10
    slack = cluster.fakes.slack
    session_id = f"budget-{uuid.uuid4().hex[:6]}"
    todo = Reply.tool("TodoWrite", {"todos": [TODO]})
    plan = [todo, todo, Reply.text("Pool.")]

    # When a session with progress to show runs to its answer
    await probe.start(session_id, plan)
    await probe.wait_answered(session_id, timeout_s=ANSWER_WITHIN_S)

    # Then its answer was posted, once, before any chat.update: no turn of the budget came
    answers = [
        c
        for c in cluster.fakes.posts()
        if str(c.args["metadata"]["event_payload"]["key"]).startswith(f"{session_id}:answer:")
    ]
    assert len(answers) == 1
    assert "Pool." in str(answers[0].args)
    assert not [c for c in slack.calls_to("chat.update") if c.at_s <= answers[0].at_s]
    # and the status message's final view waits for its turn, recorded, not yet sent
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    try:
        later = datetime.now(UTC) + timedelta(minutes=1)
        unsent = await Outbox(db).unsent(FINAL_KIND, created_before=later)
    finally:
        await db.dispose()
    assert [item.session_id for item in unsent] == [session_id]
