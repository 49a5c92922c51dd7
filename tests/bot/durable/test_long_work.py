"""Long work with real worker processes (issue #17): background commands, their
notifications, ``stop``, and timed wake-ups (``ScheduleWakeup``, its minimum delay
lowered to 1 s so that a wake-up seconds away can be watched), over two ``dramatiq``
workers sharing one PostgreSQL database, one Redis database, real bubblewrap sandboxes
and the fake model and Slack APIs.

The workers suspend an idle sandbox after 0.3 s and watch background processes every
0.2 s, so a sandbox frozen under a running background process, or a doubled or lost
notification, shows within a test. The background commands sleep 3-4 s rather than the
issue's 20 s, and the restarted wake-up fires 6 s later rather than 3 s (time to check
the status line first): what is checked (the turn ends first, the notification arrives
once, a killed worker loses nothing) does not depend on the length. Every wait polls a
condition with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.durable.agents import child_session_id
from bot.durable.wiring import cancel_running
from bot.fakes.anthropic_api import Reply, ToolCall
from harness import Checkpoint
from harness.tools.background import task_id_for
from memory_store import (
    BackgroundTasks,
    Database,
    InboxItem,
    SandboxLedgerStore,
    SessionStatus,
    SessionStore,
)
from sandbox_client import Health, SandboxManager
from tests.bot.durable_support import (
    CHANNEL,
    STATUS_MESSAGE,
    Cluster,
    Probe,
    Sender,
    poll,
    running_cluster,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

WORKERS = 2
SETTINGS = {
    "WARROOM_LEASE_S": "3",
    "WARROOM_SWEEP_INTERVAL_S": "0.2",
    "WARROOM_STALE_AFTER_S": "2",
    "WARROOM_BACKGROUND_POLL_S": "0.2",
    "WARROOM_SANDBOX_IDLE_S": "0.3",
    "WARROOM_MIN_WAKEUP_S": "1",
    "WARROOM_MONITOR_BATCH_S": "1",
    "dramatiq_worker_timeout": "100",
    "dramatiq_queue_prefetch": "2",  # as `warroom worker` sets it: one per thread
    **STATUS_MESSAGE,  # the status message shows the next check
}
"""The workers' settings: short leases, sweeps, polls and batches; the status message."""


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    """A fresh database, the fakes and two running workers, for the whole module."""
    with running_cluster(
        redis_url, name="warroom_long", workers=WORKERS, settings=SETTINGS
    ) as made:
        yield made


@dataclass
class Rig:
    probe: Probe
    tasks: BackgroundTasks
    db: Database


@pytest.fixture
async def rig(cluster: Cluster) -> AsyncIterator[Rig]:
    """Ready workers, an empty Redis database, and stores to watch them."""
    cluster.pool.wait_ready()
    sender = Sender(cluster.redis_url)
    sender.flush()
    db = Database.from_url(cluster.database_url, data_dir=cluster.data_dir)
    logged = {w.log_path: len(w.log()) for w in cluster.pool.history}
    try:
        probe = Probe(
            SessionStore(db), cluster.fakes, sender, cluster.data_dir, SandboxLedgerStore(db)
        )
        yield Rig(probe, BackgroundTasks(db), db)
    finally:
        await db.dispose()
        sender.close()
        for worker in cluster.pool.history:
            print(f"--- {worker.log_path.name}:\n{worker.log()[logged.get(worker.log_path, 0) :]}")


def background(command: str, description: str = "") -> Reply:
    call = {"command": command, "run_in_background": True}
    return Reply.tool("Bash", call | ({"description": description} if description else {}))


async def notifications(probe: Probe, session_id: str) -> list[InboxItem]:
    return [i for i in await probe.sessions.inbox(session_id) if i.kind == "notification"]


def user_texts(request_messages: list[dict[str, object]]) -> list[str]:
    """Every text block of the request's user messages, in order."""
    texts = []
    for message in request_messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        texts += [
            str(b.get("text")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        ]
    return texts


async def background_tool_use_id(probe: Probe, session_id: str) -> str:
    result = await probe.wait_event(session_id, "tool_result")
    return str(json.loads(result.payload_json)["tool_use_id"])


async def test_a_background_command_notifies_once_after_the_turn_ended(rig: Rig) -> None:
    probe = rig.probe
    session_id = f"bg-{uuid.uuid4().hex[:6]}"
    plan = [
        background("sleep 3; echo rollout done", "Wait for the rollout"),
        Reply.tool("Bash", {"command": "echo still working"}),
        Reply.text("The rollout is under way; I will report when it ends."),
        Reply.text("The rollout finished."),
    ]
    await probe.start(session_id, plan)
    # The model keeps working and ends its turn while the command runs
    first = await probe.wait_answered(session_id)
    assert first.status is SessionStatus.WAITING
    tool_use_id = await background_tool_use_id(probe, session_id)
    task = await rig.tasks.get(session_id, task_id_for(tool_use_id))
    assert task is not None
    assert task.running, "the command ended before the turn did: the test proves nothing"
    # While it runs, no worker's idle sweep freezes its sandbox (they would within 0.3 s)
    handle = await probe.sandbox(session_id)
    provider = probe.provider()
    try:
        for _ in range(5):
            assert await provider.health(handle) is Health.READY
            await asyncio.sleep(0.3)  # sampling the sandbox's state over the idle window
    finally:
        await provider.aclose()
    # Then the session is woken once, after its answer, and answers again
    await probe.wait_answered(session_id, posts=2, timeout_s=30)
    notified = await notifications(probe, session_id)
    assert len(notified) == 1
    text = notified[0].text
    assert text.startswith(f"<task-notification>\n<task-id>{task.task_id}</task-id>")
    assert "<status>completed</status>" in text
    assert 'Background command "Wait for the rollout" completed (exit code 0)' in text
    assert text.rstrip().endswith("rollout done")
    answered = [e for e in await probe.events(session_id, "post_done")]
    assert answered[0].created_at <= notified[0].created_at
    last = probe.fakes.script.requests_for(session_id)[-1]
    assert sum("<task-notification>" in t for t in user_texts(last.messages)) == 1
    ended = await rig.tasks.get(session_id, task.task_id)
    assert ended is not None
    assert ended.state == "completed"
    cp = Checkpoint.from_json((await probe.session(session_id)).checkpoint)
    assert [t.status for t in cp.tasks] == ["completed"]


async def test_a_killed_worker_loses_no_notification_and_doubles_none(
    rig: Rig, cluster: Cluster
) -> None:
    probe = rig.probe
    session_id = f"bg-kill-{uuid.uuid4().hex[:6]}"
    plan = [background("sleep 4; echo ok"), Reply.text("Started."), Reply.text("It ended.")]
    await probe.start(session_id, plan)
    await probe.wait_answered(session_id)
    # When every worker is SIGKILLed while the background command runs
    before = cluster.pool.crashes()
    for worker in cluster.pool.workers:
        worker.signal_children(signal.SIGKILL)

    async def replaced() -> bool:
        return cluster.pool.crashes() - before >= WORKERS

    await poll(replaced, timeout_s=15, what="the workers to die")
    # Then the replacements notify the session once, and it answers again
    await probe.wait_answered(session_id, posts=2, timeout_s=60)
    assert len(await notifications(probe, session_id)) == 1
    responses = await probe.events(session_id, "model_response")
    assert len(responses) == 3


async def test_stop_kills_the_background_processes_and_nothing_is_notified(
    rig: Rig, cluster: Cluster
) -> None:
    probe = rig.probe
    session_id = f"bg-stop-{uuid.uuid4().hex[:6]}"
    plan = [background("sleep 60"), background("sleep 61"), Reply.text("Both started.")]
    await probe.start(session_id, plan)
    await probe.wait_answered(session_id)
    handle = await probe.sandbox(session_id)
    assert len(await rig.tasks.of_session(session_id, running_only=True)) == 2
    # When someone writes `stop`
    cancelled = await probe.sessions.cancel(session_id, actor="U0FAKEBOB")
    assert cancelled is not None
    provider = probe.provider()
    manager = SandboxManager(
        provider, ledger=SandboxLedgerStore(rig.db), scope=f"local:{os.uname().nodename}"
    )
    try:
        await cancel_running(manager, cancelled, rig.tasks)
        # Then both tasks are ended, the sandbox (and the processes) are gone: destroyed
        # here, or by a worker's sweep when one was suspending it at that moment
        assert [t.state for t in await rig.tasks.of_session(session_id)] == ["killed", "killed"]

        async def gone() -> bool:
            return await provider.health(handle) is Health.GONE

        await poll(gone, timeout_s=20, what="the stopped session's sandbox to be destroyed")
    finally:
        await manager.aclose()
        await provider.aclose()
    assert await notifications(probe, session_id) == []
    assert (await probe.session(session_id)).status is SessionStatus.CANCELLED


def wakeup(delay_s: float, prompt: str, reason: str = "error rate") -> Reply:
    return Reply.tool(
        "ScheduleWakeup", {"delaySeconds": delay_s, "reason": reason, "prompt": prompt}
    )


def due_at(checkpoint: str) -> datetime:
    """When the session's pending wake-up fires (it must have one)."""
    wakeup = Checkpoint.from_json(checkpoint).wakeup
    assert wakeup is not None, "no wake-up is pending"
    return datetime.fromtimestamp(wakeup.due_at, UTC)


async def wakes(probe: Probe, session_id: str) -> list[InboxItem]:
    return [i for i in await probe.sessions.inbox(session_id) if i.kind == "wake"]


async def test_a_wake_up_survives_a_worker_restart_and_fires_once(
    rig: Rig, cluster: Cluster
) -> None:
    probe = rig.probe
    session_id = f"wake-{uuid.uuid4().hex[:6]}"
    prompt = "Check the checkout-api error rate again and report."
    plan = [wakeup(6, prompt), Reply.text("I will check again in 6 s."), Reply.text("Still 0.")]
    await probe.start(session_id, plan)
    first = await probe.wait_answered(session_id)
    armed = due_at(first.checkpoint)
    # The thread's status shows when the next check is
    line = f"Next check at {armed:%H:%M} UTC · error rate"

    async def shown() -> bool:
        thread = probe.fakes.slack.thread(CHANNEL, first.key.thread_ts)
        return line in json.dumps([m.get("blocks") for m in thread], ensure_ascii=False)

    await poll(shown, timeout_s=4, what="the status message to show the next check")
    # When every worker is restarted (SIGKILL) while the session waits
    before = cluster.pool.crashes()
    for worker in cluster.pool.workers:
        worker.signal_children(signal.SIGKILL)

    async def died() -> bool:
        return cluster.pool.crashes() - before >= WORKERS

    await poll(died, timeout_s=15, what="the workers to die")
    assert await wakes(probe, session_id) == [], "it fired before the restart"
    # Then the new workers resume the session at its time, once, with the prompt
    second = await probe.wait_answered(session_id, posts=2, timeout_s=60)
    fired = await wakes(probe, session_id)
    assert [w.text for w in fired] == [prompt]
    assert fired[0].created_at >= armed
    last = probe.fakes.script.requests_for(session_id)[-1]
    assert user_texts(last.messages)[-1] == prompt
    assert Checkpoint.from_json(second.checkpoint).wakeup is None, "a fired wake-up is spent"


async def test_stop_cancels_a_pending_wake_up(rig: Rig) -> None:
    probe = rig.probe
    session_id = f"wake-stop-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, [wakeup(2, "look again"), Reply.text("Later.")])
    session = await probe.wait_answered(session_id)
    armed = due_at(session.checkpoint)
    cancelled = await probe.sessions.cancel(session_id, actor="U0FAKEBOB")
    assert cancelled is not None

    # Well past the wake-up's time (the sweep runs every 0.2 s), nothing woke it
    async def past_due() -> bool:
        assert (await probe.session(session_id)).status is SessionStatus.CANCELLED
        assert await wakes(probe, session_id) == []
        return datetime.now(UTC) > armed + timedelta(seconds=2)

    await poll(past_due, timeout_s=15, what="the wake-up's time to pass")
    assert len(probe.fakes.script.requests_for(session_id)) == 2


async def test_a_monitor_delivers_batched_lines_and_holds_no_worker_between_them(
    rig: Rig,
) -> None:
    probe = rig.probe
    session_id = f"mon-{uuid.uuid4().hex[:6]}"
    command = "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.5; done"
    call = {"command": command, "description": "ticks", "timeout_ms": 60_000}
    await probe.start(session_id, [Reply.tool("Monitor", call), Reply.text("Watching.")])
    started = await probe.wait_event(session_id, "tool_result")
    task_id = task_id_for(str(json.loads(started.payload_json)["tool_use_id"]))
    idle_samples = 0

    async def ended() -> bool:
        nonlocal idle_samples
        task = await rig.tasks.get(session_id, task_id)
        assert task is not None
        session = await probe.session(session_id)
        if task.running and session.status is SessionStatus.WAITING:
            idle_samples += probe.queue.in_flight() == 0
        return not task.running

    await poll(ended, timeout_s=30, what="the monitor to end")
    await probe.wait_status(session_id, SessionStatus.WAITING, timeout_s=30)
    events = [n.text for n in await notifications(probe, session_id)]
    lines = [
        line.removeprefix("<event>").removesuffix("</event>")
        for text in events
        for line in text.splitlines()
    ]
    ticks = [line for line in lines if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(1, 9)], "every line is delivered once, in order"
    batches = [t for t in events if "<event>" in t]
    assert 2 <= len(batches) < 8, f"{len(batches)} deliveries: not batched by time"
    assert all('<summary>Monitor event: "ticks"</summary>' in t for t in batches[:-1])
    # The last lines come with the ending, as Claude Code sends them
    assert "<status>completed</status>" in events[-1]
    assert '<summary>Monitor "ticks" stream ended</summary>' in events[-1]
    assert idle_samples > 0, "a worker was busy all along: the session held one between events"


def subagents(
    parent: str, names: list[str], *, background: bool = False
) -> tuple[Reply, dict[str, str]]:
    """One assistant message calling ``Agent`` once per name; the children's session ids."""
    calls, ids = [], {}
    for name in names:
        tool_use_id = f"toolu_{name}_{uuid.uuid4().hex[:8]}"
        child = child_session_id(parent, tool_use_id)
        ids[name] = child
        prompt = f"[session:{child}] Check {name} and report in one line."
        call: dict[str, object] = {"description": f"Check {name}", "prompt": prompt}
        if background:
            call["run_in_background"] = True
        calls.append(ToolCall("Agent", call, id=tool_use_id))
    return Reply(tuple(calls)), ids


async def test_parallel_subagents_run_at_once_and_each_answer_reaches_the_parent_once(
    rig: Rig,
) -> None:
    probe = rig.probe
    parent = f"agents-{uuid.uuid4().hex[:6]}"
    names = ["pods", "deploys", "database"]
    fan_out, children = subagents(parent, names)
    plan = [fan_out, Reply.text("All three checked.")]
    for name, child in children.items():
        probe.fakes.script.plans[child] = [
            Reply.tool("Bash", {"command": f"sleep 2; echo {name}-ok"}),
            Reply.text(f"{name}: healthy"),
        ]
    await probe.start(parent, plan)
    await probe.wait_answered(parent, timeout_s=60)
    # Each child ran its own session and ended done
    spans = []
    for child in children.values():
        assert (await probe.session(child)).status is SessionStatus.DONE
        intent = await probe.wait_event(child, "tool_intent")
        result = [e for e in await probe.events(child, "tool_result")]
        assert len(result) == 1
        spans.append((intent.created_at, result[0].created_at))
    # (each one's 2 s command holds a worker thread; the two workers have four)
    assert max(s for s, _ in spans) < min(e for _, e in spans), f"not all at once: {spans}"
    # The parent got each answer once, as its call's tool_result, in call order
    second = probe.fakes.script.requests_for(parent)[1].messages[-1]["content"]
    results = [b for b in second if b["type"] == "tool_result"]
    assert [b["content"] for b in results] == [f"{n}: healthy" for n in names]
    agent_inputs = [i for i in await probe.sessions.inbox(parent) if i.kind == "agent"]
    assert len(agent_inputs) == 3
    cp = Checkpoint.from_json((await probe.session(parent)).checkpoint)
    assert [a.status for a in cp.agents] == ["completed"] * 3
    # They worked in the parent's sandbox
    shared = {
        Checkpoint.from_json((await probe.session(c)).checkpoint).sandbox for c in children.values()
    }
    assert shared == {cp.sandbox}
    # A subagent is offered no Agent tool (no grandchildren)
    child_request = probe.fakes.script.requests_for(children["pods"])[0]
    assert "Agent" not in [t["name"] for t in child_request.body["tools"]]


async def test_stop_cascades_to_the_subagents(rig: Rig) -> None:
    probe = rig.probe
    parent = f"agents-stop-{uuid.uuid4().hex[:6]}"
    fan_out, children = subagents(parent, ["a", "b"])
    for child in children.values():
        probe.fakes.script.plans[child] = [Reply.tool("Bash", {"command": "sleep 30"})]
    await probe.start(parent, [fan_out, Reply.text("done")])
    for child in children.values():
        await probe.wait_running_command(child)
    cancelled = await probe.sessions.cancel(parent, actor="U0FAKEBOB")
    assert cancelled is not None
    provider = probe.provider()
    manager = SandboxManager(provider, ledger=SandboxLedgerStore(rig.db), scope="local:test")
    try:
        await cancel_running(manager, cancelled, rig.tasks, probe.sessions)
    finally:
        await manager.aclose()
        await provider.aclose()
    for child in children.values():
        assert (await probe.session(child)).status is SessionStatus.CANCELLED
    # When a teammate replies to the stopped session, it goes on: each stopped subagent's
    # call gets a result saying so (the session does not wait for them)
    token = await probe.sessions.add_input(
        parent, user_id="U0FAKEBOB", text="what did you find so far?", source_ts="9.1"
    )
    assert token is not None
    probe.queue.send(parent, token)
    await probe.wait_answered(parent, timeout_s=30)
    content = probe.fakes.script.requests_for(parent)[1].messages[-1]["content"]
    stopped = [b for b in content if b["type"] == "tool_result"]
    assert len(stopped) == 2
    assert all(b["is_error"] and "subagent was stopped" in b["content"] for b in stopped)
    assert "what did you find so far?" in content[-1]["text"]


async def test_a_background_subagent_notifies_its_parent_once(rig: Rig) -> None:
    probe = rig.probe
    parent = f"agents-bg-{uuid.uuid4().hex[:6]}"
    fan_out, children = subagents(parent, ["pods"], background=True)
    probe.fakes.script.plans[children["pods"]] = [Reply.text("pods: healthy")]
    await probe.start(parent, [fan_out, Reply.text("Started a check."), Reply.text("Noted.")])
    await probe.wait_answered(parent, posts=2, timeout_s=60)

    launched = probe.fakes.script.requests_for(parent)[1].messages[-1]["content"][0]
    assert launched["content"].startswith(
        f"Async agent launched successfully\nagentId: {children['pods']}"
    )
    notified = await notifications(probe, parent)
    assert len(notified) == 1
    assert '<summary>Agent "Check pods" completed</summary>' in notified[0].text
    assert "<result>pods: healthy</result>" in notified[0].text
    cp = Checkpoint.from_json((await probe.session(parent)).checkpoint)
    assert [a.status for a in cp.agents] == ["completed"]


async def test_the_session_is_told_which_background_commands_a_dead_sandbox_lost(
    rig: Rig,
) -> None:
    probe = rig.probe
    session_id = f"bg-lost-{uuid.uuid4().hex[:6]}"
    plan = [background("sleep 60", "Tail the logs"), Reply.text("Tailing."), Reply.text("Lost.")]
    await probe.start(session_id, plan)
    await probe.wait_answered(session_id)
    # When the sandbox dies under the command
    provider = probe.provider()
    try:
        await provider.destroy(await probe.sandbox(session_id))
    finally:
        await provider.aclose()
    # Then the session is woken and told the command was lost
    await probe.wait_answered(session_id, posts=2, timeout_s=30)
    notified = await notifications(probe, session_id)
    assert len(notified) == 1
    assert "<status>failed</status>" in notified[0].text
    assert 'Background command "Tail the logs" was lost: its sandbox stopped' in notified[0].text


async def test_a_reply_after_stop_does_not_re_arm_the_stopped_wake_up(rig: Rig) -> None:
    probe = rig.probe
    session_id = f"wake-revive-{uuid.uuid4().hex[:6]}"
    plan = [wakeup(4, "look again"), Reply.text("Later."), Reply.text("Here.")]
    await probe.start(session_id, plan)
    session = await probe.wait_answered(session_id)
    armed = due_at(session.checkpoint)
    assert await probe.sessions.cancel(session_id, actor="U0FAKEBOB") is not None
    # When a teammate replies before the wake-up's time
    token = await probe.sessions.add_input(
        session_id, user_id="U0FAKEBOB", text="anything?", source_ts="9.2"
    )
    assert token is not None
    probe.queue.send(session_id, token)
    answered = await probe.wait_answered(session_id, posts=2, timeout_s=30)
    assert Checkpoint.from_json(answered.checkpoint).wakeup is None

    # Then, past its time, the stopped wake-up does not fire
    async def past_due() -> bool:
        assert await wakes(probe, session_id) == []
        return datetime.now(UTC) > armed + timedelta(seconds=2)

    await poll(past_due, timeout_s=15, what="the wake-up's time to pass")
    assert len(probe.fakes.script.requests_for(session_id)) == 3  # two for the turn, one reply


async def test_a_subagent_that_answers_leaves_no_background_process_running(rig: Rig) -> None:
    # A subagent is done once it answered: nothing of it may keep running in the shared
    # sandbox (nor keep the sandbox from the idle policy, nor wake the ended subagent)
    probe = rig.probe
    parent = f"agents-bgcmd-{uuid.uuid4().hex[:6]}"
    fan_out, children = subagents(parent, ["logs"])
    child = children["logs"]
    marker = f"late-{uuid.uuid4().hex[:8]}"
    probe.fakes.script.plans[child] = [
        background(f"sleep 30; echo {marker}", "Tail the logs"),
        Reply.text("logs: started a tail"),
    ]
    await probe.start(parent, [fan_out, Reply.text("Checked.")])
    await probe.wait_answered(parent, timeout_s=60)
    assert (await probe.session(child)).status is SessionStatus.DONE
    (task,) = await rig.tasks.of_session(child)

    async def ended() -> bool:
        current = await rig.tasks.get(child, task.task_id)
        return (
            current is not None
            and not current.running
            and not await asyncio.to_thread(_running_with, marker)
        )

    await poll(ended, timeout_s=10, what="the ended subagent's background command to end")
    current = await rig.tasks.get(child, task.task_id)
    assert current is not None
    assert current.state == "killed"
    assert not [i for i in await probe.sessions.inbox(child) if i.kind == "notification"]


def _running_with(marker: str) -> bool:
    """Whether a process of this host has ``marker`` in its command line (a frozen
    sandbox's processes included: they still exist)."""
    for entry in Path("/proc").iterdir():
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False
