"""Slack's agent surface with real worker processes (issue #28).

Two ``dramatiq bot.durable.worker_main`` processes (the surface is the default: nothing
turns it on) over PostgreSQL and Redis run the sessions against the fakes; the real Slack
app (signed requests) records replies, clicks and Slack's native Stop into the same
database and queue. The workers and the app call the same fake Slack, which keeps each
thread's agent session (every status it was given) and streamed messages. Two sessions
have crash rules: their workers are SIGKILLed when the step that parks them has set the
status (``after_park``) or has committed (``after_commit``); a third crashes its workers at
every attempt of a step until the sweeper fails it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bot.cli import fake_slack
from bot.cli.fake_slack import agent_lines
from bot.fakes.anthropic_api import Reply
from bot.fakes.slack_agents import AgentSession
from bot.slack.agent_surface import stream_key
from bot.slack.approval_messages import APPROVE_ACTION_ID, ButtonValue
from bot.slack.installation import Installation
from harness import Checkpoint
from memory_store import Database, Outbox, SandboxLedgerStore, SessionStatus, SessionStore
from tests.bot.alerts.watch_support import WATCHED, watched_channel
from tests.bot.conftest import load_case
from tests.bot.durable.test_long_work import subagents
from tests.bot.durable.test_workers import WORKER_SETTINGS
from tests.bot.durable_support import (
    CHANNEL,
    EFFECTS_FILE,
    Cluster,
    Probe,
    Sender,
    poll,
    running_cluster,
)
from tests.bot.slack_edge import SlackEdge, event, running_edge
from tests.fakes.slack_api import TEAM_ID

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.bwrap]

RESTART = f"systemctl restart payments 2>/dev/null; echo ran >> {EFFECTS_FILE}; echo restarted"
KILLED_AFTER_COMMIT = "wake-killed-after-commit"
KILLED_AFTER_PARK = "wake-killed-after-park"
CRASH_LOOP = "stream-crash-loop"
ANSWER_STEP = 3
"""The answer's step of ``wake_up_plan`` (model, tool, model: three steps before it)."""
CRASHES = ",".join(
    [
        f"after_commit@{ANSWER_STEP}:{KILLED_AFTER_COMMIT}",
        f"after_park@{ANSWER_STEP}:{KILLED_AFTER_PARK}",
        f"before_model@2!:{CRASH_LOOP}",  # its second model step, every attempt
    ]
)


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    """A fresh database, the fakes and two workers (on the agent surface, the default),
    for the module."""
    crashes = f"{WORKER_SETTINGS['WARROOM_CRASH_AT']},{CRASHES}"
    settings = {**WORKER_SETTINGS, "WARROOM_CRASH_AT": crashes, "WARROOM_MIN_WAKEUP_S": "1"}
    with running_cluster(redis_url, name="warroom_agents", workers=2, settings=settings) as made:
        yield made


@dataclass
class World:
    probe: Probe
    edge: SlackEdge
    outbox: Outbox
    db: Database


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
            slack_api=cluster.fakes.slack,
        ) as edge:
            yield World(probe, edge, Outbox(db), db)
    finally:
        await db.dispose()
        sender.close()
        logs = [f"--- {w.log_path.name}:\n{w.log()[-4000:]}" for w in cluster.pool.history]
        print("\n".join(logs))


async def _thread_ts(probe: Probe, session_id: str) -> str:
    return (await probe.session(session_id)).key.thread_ts


async def _agent_session(world: World, session_id: str, status: str) -> AgentSession:
    """The thread's agent session once its status is ``status``."""
    thread_ts = await _thread_ts(world.probe, session_id)
    agents = world.probe.fakes.slack.agents

    async def reached() -> AgentSession | None:
        session = agents.session(CHANNEL, thread_ts)
        return session if session is not None and session.status == status else None

    return await poll(reached, timeout_s=30, what=f"the agent session to be {status}")


async def _click_approve(edge: SlackEdge, cp: Checkpoint) -> None:
    assert cp.approval is not None
    value = ButtonValue(cp.session_id, cp.approval.tool_use_id, cp.approval.input_sha256)
    payload: dict[str, Any] = load_case("interactive_block_actions.json")
    payload.pop("enterprise")
    payload["team"].pop("enterprise_id")
    payload["user"].update(id="U0FAKEBOB", team_id=TEAM_ID)
    payload["actions"][0].update(action_id=APPROVE_ACTION_ID, value=value.encode())
    response = await edge.post_form({"payload": json.dumps(payload)})
    assert response.status_code == 200
    await edge.settle()


async def _parked(probe: Probe, session_id: str) -> Checkpoint:
    async def asked() -> Checkpoint | None:
        session = await probe.session(session_id)
        cp = Checkpoint.from_json(session.checkpoint)
        waiting = session.status is SessionStatus.WAITING
        posted = cp.approval is not None and cp.approval.pending and cp.approval.message_ts
        return cp if waiting and posted else None

    return await poll(asked, timeout_s=30, what=f"{session_id} to wait for approval")


def _stop_reply(thread_ts: str) -> dict[str, Any]:
    return _reply(thread_ts, "stop", after_s=500)


def _reply(thread_ts: str, text: str, *, after_s: float, channel: str = CHANNEL) -> dict[str, Any]:
    """A person's reply in the thread, ``after_s`` after its root."""
    return event(
        "event_message_thread_reply_no_mention.json",
        text=text,
        channel=channel,
        thread_ts=thread_ts,
        ts=f"{float(thread_ts) + after_s:.6f}",
    )


async def _shown_working_before(world: World, session_id: str, model_calls: list[int]) -> None:
    """The session's agent session was set ``processing`` (Slack's Stop shown) once per
    turn, each time before that turn's first model call (``model_calls``: their indexes
    among the session's model requests)."""
    thread_ts = await _thread_ts(world.probe, session_id)
    processing = [
        c.at_s
        for c in world.probe.fakes.slack.calls_to("agents.sessions.setStatus")
        if c.response.get("ok")
        and c.args.get("thread_ts") == thread_ts
        and c.args.get("status") == "processing"
    ]
    asked = world.probe.fakes.script.requests_for(session_id)
    assert len(processing) == len(model_calls), (processing, [r.at_s for r in asked])
    for at_s, n in zip(processing, model_calls, strict=True):
        assert at_s < asked[n].at_s


async def test_the_status_follows_the_whole_session_from_mention_to_stop(world: World) -> None:
    session_id = f"agents-{uuid.uuid4().hex[:6]}"
    plan = [
        Reply.tool("Bash", {"command": "uptime"}, text="Looking at the host first."),
        Reply.tool("Bash", {"command": RESTART}),
        Reply.text("Restarted payments; it answers again."),
    ]
    await world.probe.start(session_id, plan)

    # the change waits for approval: the session is suspended, the request has its buttons
    cp = await _parked(world.probe, session_id)
    agent = await _agent_session(world, session_id, "suspended")
    assert agent.statuses[0] == "processing"
    assert agent.title == f"[session:{session_id}] look"

    await _click_approve(world.edge, cp)
    await world.probe.wait_answered(session_id)
    agent = await _agent_session(world, session_id, "active")
    assert _as_shown(agent.statuses) == ["processing", "suspended", "processing", "active"]

    thread_ts = await _thread_ts(world.probe, session_id)
    first, second = world.probe.fakes.slack.agents.streams_in(CHANNEL, thread_ts)
    assert first.state == second.state == "stopped"
    tasks = {t["title"]: t["status"] for t in first.tasks().values()}
    assert tasks.get("Running `uptime`") == "complete", tasks
    assert "Restarted payments" in json.dumps(second.blocks)  # the answer, with its blocks
    # no status message: the only edit is the approval request's (who decided)
    assert cp.approval is not None
    edited = {c.args["ts"] for c in world.probe.fakes.slack.calls_to("chat.update")}
    assert edited <= {cp.approval.message_ts}

    response = await world.edge.post_event(_stop_reply(thread_ts))
    await world.edge.settle()
    assert response.status_code == 200
    agent = await _agent_session(world, session_id, "closed")
    assert agent.statuses[-2:] == ["active", "closed"]


async def test_the_native_stop_during_a_long_command_ends_it_once(world: World) -> None:
    session_id = f"natstop-{uuid.uuid4().hex[:6]}"
    await world.probe.start(session_id, [Reply.tool("Bash", {"command": "sleep 600"})])
    await world.probe.wait_running_command(session_id)
    await _agent_session(world, session_id, "processing")
    thread_ts = await _thread_ts(world.probe, session_id)
    agents = world.probe.fakes.slack.agents

    clicked = agents.click_stop(CHANNEL, thread_ts, "U0FAKEBOB")
    body = load_case("event_agent_session_stopped.json")
    body["event"], body["event_id"] = clicked, f"Ev0{session_id}"
    for retry in ("0", "1"):  # Slack retries an event it saw no ack for in time
        response = await world.edge.post_event(body, headers={"X-Slack-Retry-Num": retry})
        assert response.status_code == 200
    await world.edge.settle()

    await world.probe.wait_status(session_id, SessionStatus.CANCELLED)
    agent = await _agent_session(world, session_id, "closed")
    assert agent.statuses == ["processing", "closed"]
    assert [c.session_id for c in world.edge.cancelled] == [session_id]
    said = [
        m
        for m in world.probe.fakes.slack.thread(CHANNEL, thread_ts)
        if "Stopped by" in str(m.get("text"))
    ]
    assert len(said) == 1
    [stream] = agents.streams_in(CHANNEL, thread_ts)
    assert stream.state == "stopped_by_user"


async def test_two_parallel_threads_keep_separate_sessions(world: World) -> None:
    ids = [f"pair-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for n, session_id in enumerate(ids):
        plan = [Reply.tool("Bash", {"command": f"echo thread {n}"}), Reply.text(f"Thread {n}.")]
        await world.probe.start(session_id, plan, text=f"thread {n}")
    for session_id in ids:
        await world.probe.wait_answered(session_id)
    for n, session_id in enumerate(ids):
        agent = await _agent_session(world, session_id, "active")
        assert agent.title == f"[session:{session_id}] thread {n}"
        [stream] = world.probe.fakes.slack.agents.streams_in(
            CHANNEL, await _thread_ts(world.probe, session_id)
        )
        titles = [t["title"] for t in stream.tasks().values()]
        assert titles == [f"Running `echo thread {n}`"]
        assert f"Thread {n}." in json.dumps(stream.blocks)


async def test_a_worker_killed_mid_stream_leaves_one_stream_which_the_next_completes(
    world: World, cluster: Cluster
) -> None:
    session_id = f"killed-{uuid.uuid4().hex[:6]}"
    plan = [
        Reply.tool("Bash", {"command": "sleep 4; echo slept"}, text="Waiting for the pods."),
        Reply.text("The pods came back."),
    ]
    await world.probe.start(session_id, plan)
    await world.probe.wait_running_command(session_id)
    thread_ts = await _thread_ts(world.probe, session_id)

    async def recorded() -> str | None:  # the stream's ts is in the outbox
        for turn in range(3):
            post = await world.outbox.get_post(stream_key(session_id, turn, 0))
            if post is not None and post.ts:
                return post.ts
        return None

    stream_ts = await poll(recorded, timeout_s=30, what="the stream's ts to be recorded")
    owner = (await world.probe.session(session_id)).lease_owner
    cluster.pool.owning(owner).kill()  # SIGKILL, mid-command and mid-stream

    await world.probe.wait_answered(session_id, timeout_s=90)
    agent = await _agent_session(world, session_id, "active")
    assert agent.statuses == ["processing", "active"]
    [stream] = world.probe.fakes.slack.agents.streams_in(CHANNEL, thread_ts)
    assert stream.ts == stream_ts
    assert stream.state == "stopped"
    assert [t["status"] for t in stream.tasks().values()] == ["complete"]
    assert "The pods came back." in json.dumps(stream.blocks)
    starts = [
        c
        for c in world.probe.fakes.slack.calls_to("chat.startStream")
        if c.args.get("thread_ts") == thread_ts
    ]
    assert len(starts) == 1


def wake_up_plan(answer: str) -> list[Reply]:
    """The model schedules a wake-up 10 minutes away, then answers: the session waits."""
    wake = {"delaySeconds": 600, "reason": "rollout", "prompt": "Check the rollout again."}
    return [Reply.tool("ScheduleWakeup", wake), Reply.text(answer)]


async def _crashes_since(cluster: Cluster, before: int, count: int = 1) -> None:
    """Wait until ``count`` more workers were killed, and no more."""

    async def crashed() -> bool:
        return cluster.pool.crashes() - before >= count

    await poll(crashed, timeout_s=30, what=f"{count} worker(s) to be killed")
    assert cluster.pool.crashes() - before == count


async def test_an_answer_waiting_for_a_wake_up_stays_suspended_when_its_worker_dies_after_commit(
    world: World, cluster: Cluster
) -> None:
    before = cluster.pool.crashes()
    await world.probe.start(KILLED_AFTER_COMMIT, wake_up_plan("Rolling out; I check at 14:30."))
    await world.probe.wait_answered(KILLED_AFTER_COMMIT)
    await _crashes_since(cluster, before)  # SIGKILLed right after the answer's commit

    # the answer's own step set the status: parked for its wake-up, not listening
    agent = await _agent_session(world, KILLED_AFTER_COMMIT, "suspended")
    assert agent.statuses == ["processing", "suspended"]
    thread_ts = await _thread_ts(world.probe, KILLED_AFTER_COMMIT)
    [stream] = world.probe.fakes.slack.agents.streams_in(CHANNEL, thread_ts)
    assert stream.state == "stopped"
    assert "I check at 14:30." in json.dumps(stream.blocks)

    # stop cancels the wake-up and closes the session
    response = await world.edge.post_event(_stop_reply(thread_ts))
    await world.edge.settle()
    assert response.status_code == 200
    agent = await _agent_session(world, KILLED_AFTER_COMMIT, "closed")
    assert agent.statuses == ["processing", "suspended", "closed"]


async def test_a_parking_step_retried_after_its_worker_died_sets_the_status_once(
    world: World, cluster: Cluster
) -> None:
    before = cluster.pool.crashes()
    await world.probe.start(KILLED_AFTER_PARK, wake_up_plan("Rolling out; I check at 14:30."))
    # the worker dies once the status is set, before the commit; another retries the step
    await world.probe.wait_answered(KILLED_AFTER_PARK, timeout_s=60)
    await _crashes_since(cluster, before)

    agent = await _agent_session(world, KILLED_AFTER_PARK, "suspended")
    assert agent.statuses == ["processing", "suspended"]
    thread_ts = await _thread_ts(world.probe, KILLED_AFTER_PARK)
    [stream] = world.probe.fakes.slack.agents.streams_in(CHANNEL, thread_ts)
    stops = [
        c
        for c in world.probe.fakes.slack.calls_to("chat.stopStream")
        if c.args.get("ts") == stream.ts
    ]
    assert len(stops) == 1
    assert [k for k in world.probe.fakes.post_keys() if k.startswith(KILLED_AFTER_PARK)] == [
        f"{KILLED_AFTER_PARK}:answer:4"
    ]


async def test_a_session_waiting_for_its_subagent_is_suspended_until_the_answer(
    world: World,
) -> None:
    parent = f"fan-out-{uuid.uuid4().hex[:6]}"
    fan_out, children = subagents(parent, ["pods"])
    world.probe.fakes.script.plans[children["pods"]] = [
        Reply.tool("Bash", {"command": "sleep 2; echo pods-ok"}),
        Reply.text("pods: healthy"),
    ]
    await world.probe.start(parent, [fan_out, Reply.text("The pods are healthy.")])
    await world.probe.wait_answered(parent, timeout_s=60)

    agent = await _agent_session(world, parent, "active")
    # suspended while the subagent worked, processing again while the model read its answer
    assert _as_shown(agent.statuses) == ["processing", "suspended", "processing", "active"]
    await _shown_working_before(world, parent, [0, 1])
    thread_ts = await _thread_ts(world.probe, parent)
    first = world.probe.fakes.slack.agents.streams_in(CHANNEL, thread_ts)[0]
    assert first.state == "stopped"
    assert len(first.tasks()) == 1  # the Agent call, closed in the stream that parked it


async def test_a_session_failed_by_a_crash_loop_mid_stream_is_closed_not_left_processing(
    world: World, cluster: Cluster
) -> None:
    before = cluster.pool.crashes()
    plan = [Reply.tool("Bash", {"command": "echo first"}), Reply.text("Never said.")]
    await world.probe.start(CRASH_LOOP, plan)
    await world.probe.wait_status(CRASH_LOOP, SessionStatus.FAILED, timeout_s=60)
    assert cluster.pool.crashes() > before  # (how many attempts died: test_workers' matter)

    # the stream it opened shows Slack's Stop no more: the failure closed the session
    agent = await _agent_session(world, CRASH_LOOP, "closed")
    assert agent.statuses == ["processing", "closed"]
    thread_ts = await _thread_ts(world.probe, CRASH_LOOP)
    [stream] = world.probe.fakes.slack.agents.streams_in(CHANNEL, thread_ts)
    assert stream.state == "stopped"
    assert [k for k in world.probe.fakes.post_keys() if k.startswith(f"{CRASH_LOOP}:failed:")]


async def test_a_turn_that_answers_at_once_is_processing_while_the_model_works(
    world: World,
) -> None:
    session_id = f"at-once-{uuid.uuid4().hex[:6]}"
    plan = [Reply.text("The pods are fine."), Reply.text("Still fine: 3/3 ready.")]
    await world.probe.start(session_id, plan)
    await world.probe.wait_answered(session_id)
    thread_ts = await _thread_ts(world.probe, session_id)

    # a reply resumes the session; the model answers without a tool call
    response = await world.edge.post_event(_reply(thread_ts, "and now?", after_s=10))
    await world.edge.settle()
    assert response.status_code == 200
    await world.probe.wait_answered(session_id, posts=2)

    # each turn was processing (Slack's Stop shown) before its model call, then listened
    agent = await _agent_session(world, session_id, "active")
    assert agent.statuses == ["processing", "active", "processing", "active"]
    assert agent.title == f"[session:{session_id}] look"
    await _shown_working_before(world, session_id, [0, 1])


async def test_a_fired_wake_up_that_answers_at_once_is_processing_while_the_model_works(
    world: World,
) -> None:
    session_id = f"woken-{uuid.uuid4().hex[:6]}"
    wake = {"delaySeconds": 1, "reason": "rollout", "prompt": "Check the rollout again."}
    plan = [
        Reply.tool("ScheduleWakeup", wake),
        Reply.text("Rolling out; I look again in a second."),
        Reply.text("The rollout finished."),  # the wake-up's turn: no tool call
    ]
    await world.probe.start(session_id, plan)
    await world.probe.wait_answered(session_id, posts=2, timeout_s=60)

    agent = await _agent_session(world, session_id, "active")
    assert _as_shown(agent.statuses) == ["processing", "suspended", "processing", "active"]
    await _shown_working_before(world, session_id, [0, 2])


async def _run_out_the_wait(world: World, session_id: str) -> None:
    """The session's wait ends now (as ``WARROOM_WAIT_S`` after its answer would): the
    sweeper ends it."""
    async with world.db.engine.begin() as conn:
        await conn.execute(
            text("UPDATE sessions SET wait_until = :past WHERE id = :id"),
            {"past": datetime(2000, 1, 1, tzinfo=UTC), "id": session_id},
        )


async def test_sessions_whose_wait_runs_out_are_closed(world: World) -> None:
    listening = f"ran-out-{uuid.uuid4().hex[:6]}"
    parked = f"ran-out-woken-{uuid.uuid4().hex[:6]}"
    await world.probe.start(listening, [Reply.text("Nothing is wrong.")])
    await world.probe.start(parked, wake_up_plan("Rolling out; I check at 14:30."))
    for session_id in (listening, parked):
        await world.probe.wait_answered(session_id)
    await _agent_session(world, listening, "active")
    await _agent_session(world, parked, "suspended")

    for session_id in (listening, parked):
        await _run_out_the_wait(world, session_id)
        await world.probe.wait_status(session_id, SessionStatus.DONE)

    agent = await _agent_session(world, listening, "closed")
    assert agent.statuses == ["processing", "active", "closed"]
    agent = await _agent_session(world, parked, "closed")
    assert agent.statuses == ["processing", "suspended", "closed"]


async def test_fake_slack_shows_a_steered_session_stopped_as_a_person_sees_it(
    world: World,
) -> None:
    session_id = f"steered-{uuid.uuid4().hex[:6]}"
    wait = {"command": "sleep 2; echo slept", "description": "Wait for the rollout"}
    plan = [Reply.tool("Bash", wait), Reply.tool("Bash", {"command": "sleep 600"})]
    await world.probe.start(session_id, plan, channel=fake_slack.CHANNEL)
    await world.probe.wait_running_command(session_id)
    thread_ts = await _thread_ts(world.probe, session_id)
    seen: dict[str, str] = {}
    printed = agent_lines(world.probe.fakes.slack, seen)

    # a reply mid-command: the session goes on as a new turn, whose command runs long
    reply = _reply(thread_ts, "also check the db", after_s=20, channel=fake_slack.CHANNEL)
    assert (await world.edge.post_event(reply)).status_code == 200
    await world.edge.settle()

    async def second_command() -> bool | None:
        return len(await world.probe.events(session_id, "tool_intent")) >= 2 or None

    await poll(second_command, timeout_s=30, what="the second command to start")
    agents = world.probe.fakes.slack.agents

    async def streamed() -> bool | None:
        [*_, last] = agents.streams_in(fake_slack.CHANNEL, thread_ts)
        return "sleep 600" in json.dumps(last.chunks) or None

    await poll(streamed, timeout_s=30, what="the long command's task")
    clicked = agents.click_stop(fake_slack.CHANNEL, thread_ts, "U0FAKEBOB")
    body = load_case("event_agent_session_stopped.json")
    body["event"], body["event_id"] = clicked, f"Ev0{session_id}"
    assert (await world.edge.post_event(body)).status_code == 200
    await world.edge.settle()
    await world.probe.wait_status(session_id, SessionStatus.CANCELLED)

    async def closed() -> bool | None:
        session = agents.session(fake_slack.CHANNEL, thread_ts)
        return (session is not None and session.status == "closed") or None

    await poll(closed, timeout_s=30, what="the agent session to be closed")
    printed += agent_lines(world.probe.fakes.slack, seen)
    # one stream streams at a time: the Stop stopped one, said once
    assert printed.count("  (stream stopped by user)") == 1, printed
    # a task keeps one label, its description when it has one
    waits = [line for line in printed if "rollout" in line or "sleep 2" in line]
    assert [w.split(" — ")[0] for w in waits] == [
        "  ◐ Wait for the rollout",
        "  ● Wait for the rollout",
    ], printed
    # the task the Stop cut short is shown stopped, before the stream's end, then closed
    end = printed.index("  (stream stopped by user)")
    assert printed[end - 1] == "  ■ Running `sleep 600` — stopped", printed
    assert printed[-1].startswith("agent session: closed · "), printed


async def test_an_alert_s_agent_session_is_titled_with_the_alert(
    world: World, cluster: Cluster, tmp_path: Path
) -> None:
    async def enqueue(session_id: str, token: str) -> None:
        await asyncio.to_thread(world.probe.queue.send, session_id, token)

    async with watched_channel(
        tmp_path / "watching",
        "http",
        database_url=cluster.database_url,
        enqueue=enqueue,
        slack_api=cluster.fakes.slack,
    ) as channel:
        # an alerting app posts in a watched channel: its thread gets a session
        ts = await channel.alert("alertmanager_firing")
        agents = world.probe.fakes.slack.agents

        async def titled() -> str | None:
            session = agents.session(WATCHED, ts)
            return session.title if session is not None else None

        title = await poll(titled, timeout_s=30, what="the alert's agent session")
    # titled with the alert's own title, not the prompt built around it
    assert title == "HighErrorRate (checkout-api payments critical)"


def _as_shown(statuses: list[str]) -> list[str]:
    """The statuses as Slack shows them: a status set again while it holds changes nothing
    (a resumed step and the stream another worker opens may both say ``processing``)."""
    return [s for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s]
