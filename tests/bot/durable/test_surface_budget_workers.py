"""Slack's agent-surface budgets cost streams and statuses, never answers (issue #32.1 on
the surface path, on by default since issue #28).

Two real worker processes over PostgreSQL and Redis post to the fake Slack Web API with
the agent surface on. ``chat.startStream`` and ``chat.stopStream`` are Tier 2 (20 a minute
per workspace), ``agents.sessions.setStatus`` Tier 3: a burst of sessions spends them in
seconds (a 60-session round of ``bench/load.py`` answered 31 of 60 within 300 s, with 196
HTTP 429s, each worker keeping its own budget and every answer waiting for its stream's
``chat.stopStream``). Here the workspace's shared windows in Redis are spent before a
session starts and stay spent for about a minute: the session's answer goes out at once
as a message all the same, and the stream and status wait for their turns off the step.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from bot.durable.wiring import surface_budgets
from bot.fakes.anthropic_api import Reply
from bot.settings import Settings
from bot.slack.budget import SharedCallBudget
from memory_store import Database, SessionStore
from tests.bot.durable.test_workers import WORKER_SETTINGS
from tests.bot.durable_support import Cluster, Probe, Sender, running_cluster

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

ANSWER_WITHIN_S = 40.0
"""Well under the minute a spent window stays closed: an answer that waited for a turn
could not come sooner."""
TODO = {"content": "Check the pool", "status": "in_progress", "activeForm": "Checking the pool"}
SURFACE_METHODS = ("chat.startStream", "chat.stopStream", "agents.sessions.setStatus")


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    settings = {
        **{k: v for k, v in WORKER_SETTINGS.items() if k != "WARROOM_CRASH_AT"},
        "WARROOM_AGENT_SURFACE": "true",
        "WARROOM_SLACK_SHARED_BUDGET": "true",
    }
    name = "warroom_surface_budget"
    with running_cluster(redis_url, name=name, workers=2, settings=settings) as c:
        yield c


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
        for worker in cluster.pool.history:
            print(f"--- {worker.log_path.name}:\n{worker.log()}")


async def _spend(budget: object) -> float:
    """Spend a shared window; the seconds until its next turn."""
    assert isinstance(budget, SharedCallBudget)  # the very window the workers take from
    while (closed_s := await budget.try_take()) == 0:
        pass
    return closed_s


async def test_answers_go_out_at_once_while_the_surface_budgets_are_spent(
    probe: Probe, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", cluster.redis_url)
    monkeypatch.setenv("SLACK_BOT_TOKEN", cluster.fakes.slack.token)
    budgets = surface_budgets(Settings(_env_file=None))  # type: ignore[call-arg]
    try:
        # Given a workspace whose stream and status budgets are spent for a minute
        for budget in (budgets.start, budgets.stop, budgets.status):
            assert await _spend(budget) > ANSWER_WITHIN_S + 10
        slack = cluster.fakes.slack
        session_ids = [f"surface-budget-{n}-{uuid.uuid4().hex[:6]}" for n in range(3)]
        todo = Reply.tool("TodoWrite", {"todos": [TODO]})

        # When sessions with progress to show run to their answers
        for session_id in session_ids:
            await probe.start(session_id, [todo, todo, Reply.text(f"Pool of {session_id}.")])
        for session_id in session_ids:
            await probe.wait_answered(session_id, timeout_s=ANSWER_WITHIN_S)

        # Then each answer was posted once, as a message, before any call of the spent
        # methods: no step waited for a turn of Slack's budget
        posts = cluster.fakes.posts()
        for session_id in session_ids:
            answers = [
                c
                for c in posts
                if str(c.args["metadata"]["event_payload"]["key"]).startswith(
                    f"{session_id}:answer:"
                )
            ]
            assert len(answers) == 1, session_id
            assert f"Pool of {session_id}." in str(answers[0].args)
            for method in SURFACE_METHODS:
                assert not [c for c in slack.calls_to(method) if c.at_s <= answers[0].at_s]
        # and Slack was never asked past its limits
        assert not [c for c in slack.calls if c.response.get("error") == "ratelimited"]
    finally:
        await budgets.aclose()
