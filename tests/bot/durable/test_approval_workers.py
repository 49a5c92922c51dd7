"""Approvals with real worker processes (docs/architecture.md §13; issue #16).

Two ``dramatiq bot.durable.worker_main`` processes over PostgreSQL and Redis run the sessions
(they post to, and the model is, the fakes served from this process); clicks are signed
``block_actions`` requests to the real Slack app, which records the decision in the same
database and enqueues the wake-up into the same Redis. The scripted command needs approval
(``systemctl restart``) and appends a line to the sandbox's ``effects.log``, so a command that
ran is a line there.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.fakes.anthropic_api import Reply
from bot.slack.approval_messages import APPROVE_ACTION_ID, ButtonValue
from bot.slack.installation import Installation
from harness import Checkpoint
from memory_store import Database, SandboxLedgerStore, SessionStatus, SessionStore
from tests.bot.conftest import load_case
from tests.bot.durable.test_workers import WORKER_SETTINGS
from tests.bot.durable_support import (
    EFFECTS_FILE,
    Cluster,
    Probe,
    Sender,
    poll,
    running_cluster,
)
from tests.bot.slack_edge import SlackEdge, running_edge
from tests.fakes.slack_api import TEAM_ID

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.bwrap]

RESTART = f"systemctl restart payments 2>/dev/null; echo ran >> {EFFECTS_FILE}; echo restarted"


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    """A fresh database, the fakes and two running workers, for the whole module."""
    with running_cluster(
        redis_url, name="warroom_approvals", workers=2, settings=WORKER_SETTINGS
    ) as made:
        yield made


@dataclass
class World:
    probe: Probe
    edge: SlackEdge


@pytest.fixture
async def world(cluster: Cluster, tmp_path: Path) -> AsyncIterator[World]:
    cluster.pool.wait_ready(count=2)
    sender = Sender(cluster.redis_url)
    sender.flush()
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    probe = Probe(SessionStore(db), cluster.fakes, sender, cluster.data_dir, SandboxLedgerStore(db))

    async def enqueue(session_id: str, token: str) -> None:
        await asyncio.to_thread(sender.send, session_id, token)

    try:
        async with running_edge(
            tmp_path,
            database_url=cluster.database_url,
            installation=Installation(TEAM_ID),
            enqueue=enqueue,
        ) as edge:
            yield World(probe, edge)
    finally:
        await db.dispose()
        sender.close()
        logs = [f"--- {w.log_path.name}:\n{w.log()[-4000:]}" for w in cluster.pool.history]
        print("\n".join(logs))


async def _parked(probe: Probe, session_id: str) -> Checkpoint:
    """The session once it waits for its approval, posted."""

    async def asked() -> Checkpoint | None:
        session = await probe.session(session_id)
        cp = Checkpoint.from_json(session.checkpoint)
        waiting = session.status is SessionStatus.WAITING
        posted = cp.approval is not None and cp.approval.pending and cp.approval.message_ts
        return cp if waiting and posted else None

    return await poll(asked, timeout_s=30, what=f"{session_id} to wait for approval")


async def _click(edge: SlackEdge, value: str, *, user: str = "U0FAKEBOB") -> None:
    payload: dict[str, Any] = load_case("interactive_block_actions.json")
    payload.pop("enterprise")
    payload["team"].pop("enterprise_id")
    payload["user"].update(id=user, team_id=TEAM_ID)
    payload["actions"][0].update(action_id=APPROVE_ACTION_ID, value=value)
    response = await edge.post_form({"payload": json.dumps(payload)})
    assert response.status_code == 200
    await edge.settle()


def _button(cp: Checkpoint) -> str:
    assert cp.approval is not None
    return ButtonValue(cp.session_id, cp.approval.tool_use_id, cp.approval.input_sha256).encode()


async def test_a_click_wakes_a_parked_session_and_the_worker_runs_the_command_once(
    world: World,
) -> None:
    session_id = f"approve-{uuid.uuid4().hex[:6]}"
    plan = [Reply.tool("Bash", {"command": RESTART}), Reply.text("Restarted.")]
    await world.probe.start(session_id, plan)
    cp = await _parked(world.probe, session_id)
    session = await world.probe.session(session_id)
    assert session.pending_token is None  # no step queued, no worker holds it
    assert session.lease_owner is None

    async def acked() -> bool | None:  # the parking step's message is acked just after
        return True if world.probe.queue.in_flight() == 0 else None

    await poll(acked, timeout_s=30, what="the parking step's message to be acked")
    assert await world.probe.effects(session_id) == 0

    await _click(world.edge, _button(cp))

    await world.probe.wait_answered(session_id)
    assert await world.probe.effects(session_id) == 1
    decided = await world.probe.events(session_id, "approval_decided")
    assert [json.loads(e.payload_json)["status"] for e in decided] == ["approved"]
    updates = world.probe.fakes.slack.calls_to("chat.update")
    assert any("Approved by <@U0FAKEBOB>" in json.dumps(c.args) for c in updates)


async def test_a_stale_button_after_the_workers_restart_does_nothing_the_real_one_works(
    world: World, cluster: Cluster
) -> None:
    session_id = f"restart-{uuid.uuid4().hex[:6]}"
    plan = [Reply.tool("Bash", {"command": RESTART}), Reply.text("Restarted.")]
    await world.probe.start(session_id, plan)
    cp = await _parked(world.probe, session_id)
    # A deploy: every worker is replaced
    for worker in list(cluster.pool.workers):
        worker.kill()
    cluster.pool.wait_ready(count=2)
    assert cp.approval is not None
    stale = ButtonValue(session_id, cp.approval.tool_use_id, "0" * 64).encode()

    await _click(world.edge, stale)
    ephemerals = world.edge.slack_api.calls_to("chat.postEphemeral")
    assert any("out of date" in str(c.args.get("text")) for c in ephemerals)
    assert (await world.probe.session(session_id)).status is SessionStatus.WAITING
    assert await world.probe.effects(session_id) == 0

    await _click(world.edge, _button(cp))
    await world.probe.wait_answered(session_id)
    assert await world.probe.effects(session_id) == 1
