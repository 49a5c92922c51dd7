"""Durable sessions with real worker processes (docs/architecture.md §5; issue #5, items 2-6).

Three ``dramatiq bot.durable.worker_main`` processes (each ``--processes 1 --threads 2``, in
its own process group) share one PostgreSQL database, one Redis database and the
fake Anthropic and Slack APIs served from this process. Leases are 3 s, the sweeper
runs every 0.25 s, and a session's step gets 2 attempts before it is failed. Crash
points are chosen per session id through ``WARROOM_CRASH_AT`` (set once for all
workers); a worker that dies is replaced at once. What the workers logged during a
test is printed after it (pytest shows it when the test fails).

Each crash test runs the standard plan (model → Bash side effect → model → answer)
and asserts the issue's four properties: at most one committed model response per
step (a re-issued model call is fine), exactly one run of the side-effecting
command (lines in the sandbox's ``effects.log``), exactly one post per intended post
(the fake Slack's ``chat.postMessage`` calls, by outbox key), and that the session
completed. Every wait polls a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.durable.wiring import cancel_running
from bot.fakes.anthropic_api import Reply
from memory_store import Database, SandboxLedgerStore, SessionStatus, SessionStore
from sandbox_client import Health, SandboxManager
from tests.bot.durable_support import (
    CHANNEL,
    EFFECTS_FILE,
    FENCED_LINE,
    STATUS_MESSAGE,
    Cluster,
    Probe,
    Sender,
    Worker,
    WorkerPool,
    frozen,
    poll,
    running_cluster,
    side_effect,
    standard_plan,
)
from tests.conftest import PG_ADMIN_URL

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

WORKERS = 3
LEASE_S = 3.0
MAX_CRASHES = 2
CRASH_RULES = {
    "crash-before-model": "before_model@0",
    "crash-after-model": "after_model@0",
    "crash-after-commit": "after_commit@0",
    "crash-after-tool": "after_tool@1",
    "crash-during-post": "during_post@3",
    "crash-loop": "before_model@0!",
    "crash-loop-bg": "before_model@2!",
}


def _settings() -> dict[str, str]:
    """The workers' settings: short leases and sweeps, and the crash rules."""
    rules = ",".join(f"{rule}:{session_id}" for session_id, rule in CRASH_RULES.items())
    return {
        "WARROOM_LEASE_S": str(LEASE_S),
        "WARROOM_SWEEP_INTERVAL_S": "0.25",
        "WARROOM_STALE_AFTER_S": "2",
        "WARROOM_MAX_CRASHES": str(MAX_CRASHES),
        "WARROOM_CRASH_AT": rules,
        "dramatiq_worker_timeout": "100",  # Dramatiq's idle poll (ms): fast pick-up in tests
    }


WORKER_SETTINGS = _settings()


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    """A fresh database, the fakes and three running workers, for the whole module (on
    the status-message path: some tests look at the status messages)."""
    settings = {**WORKER_SETTINGS, **STATUS_MESSAGE}
    with running_cluster(
        redis_url, name="warroom_durable", workers=WORKERS, settings=settings
    ) as made:
        yield made


@pytest.fixture
async def probe(cluster: Cluster) -> AsyncIterator[Probe]:
    """Two ready workers (at least), an empty Redis database, and a store to watch them."""
    cluster.pool.wait_ready(count=2)
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


async def _owner(probe: Probe, pool: WorkerPool, session_id: str) -> Worker:
    """The worker whose process holds the session's running step."""

    async def owner() -> str | None:
        return (await probe.session(session_id)).lease_owner

    return pool.owning(await poll(owner, timeout_s=10, what=f"a worker to hold {session_id}"))


async def _crashes_since(pool: WorkerPool, before: int, expected: int) -> None:
    """Wait until ``expected`` more workers have ended by a crash, and no more."""

    async def seen() -> bool:
        return pool.crashes() - before >= expected

    await poll(seen, timeout_s=10, what=f"{expected} worker crash(es)")
    assert pool.crashes() - before == expected


async def _crash_run(probe: Probe, pool: WorkerPool, session_id: str) -> None:
    """Run the standard plan of a session with a crash rule; one worker must die."""
    before = pool.crashes()
    await probe.start(session_id, standard_plan(answer=f"Answer of {session_id}."))
    await probe.assert_completed_once(session_id)
    await _crashes_since(pool, before, 1)


async def _logged(worker: Worker, *needles: str) -> bool:
    return any(all(n in line for n in needles) for line in worker.log().splitlines())


# Tests that kill a worker alternate with tests that do not, so that a killed worker's
# replacement boots while the next test runs (file order is run order).


async def test_a_crash_before_the_model_call_is_resumed_without_a_wasted_call(
    probe: Probe, cluster: Cluster
) -> None:
    await _crash_run(probe, cluster.pool, "crash-before-model")
    assert len(probe.fakes.script.requests_for("crash-before-model")) == 2


async def test_four_copies_of_one_message_run_one_step(probe: Probe) -> None:
    session_id = f"four-copies-{uuid.uuid4().hex[:6]}"
    token = await probe.open(session_id, standard_plan())
    # When the same wake-up is delivered four times at once
    for _ in range(4):
        probe.queue.send(session_id, token)
    # Then one worker ran the step and the others dropped their copies
    await probe.assert_completed_once(session_id)
    assert len(probe.fakes.script.requests_for(session_id)) == 2


async def test_a_crash_after_the_model_answered_reissues_the_call_but_commits_one_response(
    probe: Probe, cluster: Cluster
) -> None:
    await _crash_run(probe, cluster.pool, "crash-after-model")
    assert len(probe.fakes.script.requests_for("crash-after-model")) == 3


async def test_a_reply_during_a_step_reaches_the_model_after_the_tool_results(
    probe: Probe,
) -> None:
    session_id = f"steer-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, standard_plan(sleep_s=1.0))
    await probe.wait_event(session_id, "tool_intent")
    # When a teammate replies while the command runs
    token = await probe.sessions.add_input(
        session_id, user_id="U0FAKEBOB", text="ignore the cache, check the DB pool", source_ts="1.5"
    )
    assert token is None, "a running session takes the reply at its next step boundary"
    await probe.assert_completed_once(session_id)
    # Then the next model request carries it as user content after the tool result
    last = probe.fakes.script.requests_for(session_id)[1].messages[-1]
    assert last["role"] == "user"
    kinds = [block["type"] for block in last["content"]]
    assert kinds[0] == "tool_result"
    assert kinds[-1] == "text"
    assert "check the DB pool" in last["content"][-1]["text"]


async def test_a_reply_mid_turn_leaves_no_earlier_status_working_with_a_stop_button(
    probe: Probe,
) -> None:
    session_id = f"two-status-{uuid.uuid4().hex[:6]}"
    # (the reply's turn runs a command too: a turn that answers at its first step gets no
    # status message of its own, tests/bot/cli/test_status_messages.py)
    await probe.start(session_id, [side_effect(sleep_s=1.0), side_effect(), Reply.text("Done.")])
    await probe.wait_event(session_id, "tool_intent")
    # When a teammate replies while the command runs (the next turn gets its own status)
    await probe.sessions.add_input(
        session_id, user_id="U0FAKEBOB", text="also check the DB pool", source_ts="1.5"
    )
    session = await probe.wait_answered(session_id)

    # Then, once the session answered, no status message in the thread still works (the
    # thread's progress is shown after the commit, and waits its turn in the update budget)
    async def none_working() -> bool:
        thread = probe.fakes.slack.thread(CHANNEL, session.key.thread_ts)
        return not [m for m in thread if _still_working(m)]

    await poll(none_working, timeout_s=90, what="the earlier status message to be closed")
    posted = [k for k in probe.fakes.post_keys() if k.startswith(f"{session_id}:status:")]
    assert len(posted) == 2, "the reply did not start a second status message"


def _still_working(message: dict[str, object]) -> bool:
    """A bot message that shows "Working" or a Stop button."""
    blocks = message.get("blocks") or []
    assert isinstance(blocks, list)
    live = any(b.get("type") == "actions" for b in blocks) or "*Working*" in json.dumps(blocks)
    return bool(message.get("bot_id")) and live


async def test_a_crash_after_commit_before_enqueue_is_recovered_by_the_sweeper(
    probe: Probe, cluster: Cluster
) -> None:
    await _crash_run(probe, cluster.pool, "crash-after-commit")
    assert len(probe.fakes.script.requests_for("crash-after-commit")) == 2
    first, second = await probe.events("crash-after-commit", "model_response")
    assert first.epoch < second.epoch


async def test_an_answered_session_holds_no_worker_and_no_sandbox(probe: Probe) -> None:
    session_id = f"parked-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, standard_plan())
    session = await probe.wait_answered(session_id)
    assert session.lease_owner is None
    assert session.pending_token is None
    assert session.wait_until is not None
    handle = await probe.sandbox(session_id)

    async def parked() -> bool:
        suspended = await probe.provider().health(handle) is Health.SUSPENDED
        return suspended and probe.queue.in_flight() == 0

    # (the sandbox is suspended, and the message acked, just after the commit)
    await poll(parked, timeout_s=5, what="no sandbox running and no message held")


async def test_a_crash_after_a_tool_recovers_its_real_outcome_instead_of_running_it_again(
    probe: Probe, cluster: Cluster
) -> None:
    await _crash_run(probe, cluster.pool, "crash-after-tool")
    results = await probe.events("crash-after-tool", "tool_result")
    assert len(results) == 1
    assert not await probe.events("crash-after-tool", "tool_unknown")
    assert "effect-done" in json.loads(results[0].payload_json)["output_head"]


async def test_a_wiped_redis_after_a_commit_is_recovered_by_the_sweeper(
    probe: Probe, cluster: Cluster
) -> None:
    session_id = f"wiped-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, [*standard_plan(), Reply.text("Second answer.")])
    await probe.wait_answered(session_id)
    # Given a reply committed and its wake-up enqueued while no worker takes messages
    async with frozen(cluster.pool.workers, PG_ADMIN_URL):
        token = await probe.sessions.add_input(
            session_id, user_id="U0FAKEBOB", text="and the DB pool?", source_ts="2.0"
        )
        assert token is not None
        probe.queue.send(session_id, token)
        # When Redis loses everything
        probe.queue.wipe()
        assert probe.queue.size() == 0
    # Then the sweeper enqueues the step again and the session answers
    await probe.wait_answered(session_id, posts=2)
    assert len(await probe.events(session_id, "model_response")) == 3


async def test_a_kill_during_a_tool_takes_the_outcome_from_the_sandbox_and_never_reruns_it(
    probe: Probe, cluster: Cluster
) -> None:
    session_id = f"kill-mid-tool-{uuid.uuid4().hex[:6]}"
    # Given a worker running a slow side-effecting command
    await probe.start(session_id, standard_plan(sleep_s=1.5))
    await probe.wait_running_command(session_id)
    victim = await _owner(probe, cluster.pool, session_id)
    # When it is SIGKILLed while the command runs
    victim.signal_children(signal.SIGKILL)
    # Then the next worker waits for the same process and takes its outcome
    await probe.assert_completed_once(session_id)
    results = await probe.events(session_id, "tool_result")
    assert not await probe.events(session_id, "tool_unknown")
    assert len(results) == 1
    assert "effect-done" in json.loads(results[0].payload_json)["output_head"]


@pytest.mark.parametrize(
    "command",
    [
        f"sleep 3; echo ran >> {EFFECTS_FILE}; echo effect-done",  # killed at its timeout
        f"true; sleep 3; echo ran >> {EFFECTS_FILE}; echo effect-done",  # moved at it
    ],
    ids=["found-by-lookup", "found-by-its-name"],
)
async def test_a_command_recovered_after_its_worker_died_is_timed_from_its_start_to_its_end(
    probe: Probe, cluster: Cluster, command: str
) -> None:
    session_id = f"kill-timed-{uuid.uuid4().hex[:6]}"
    # Given a worker running a 3 s command
    plan = [Reply.tool("Bash", {"command": command, "description": "wait"}), Reply.text("ok")]
    await probe.start(session_id, plan)
    await probe.wait_running_command(session_id)
    victim = await _owner(probe, cluster.pool, session_id)
    intent = (await probe.events(session_id, "tool_intent"))[0]
    # When it is SIGKILLed while the command runs, and another worker recovers the outcome
    victim.signal_children(signal.SIGKILL)
    await probe.assert_completed_once(session_id)

    # Then the result is timed from the command's start to its end (what the thread, the
    # chat and the stream show), not from the recovery, which only waited for its end
    (result,) = await probe.events(session_id, "tool_result")
    payload = json.loads(result.payload_json)
    assert "effect-done" in payload["output_head"]
    assert 3_000 <= payload["elapsed_ms"] < 6_000, payload
    # and it is dated when it ended: at least 3 s after its intent, and before it was logged
    ended = datetime.fromisoformat(payload["ended_at"])
    assert ended - intent.created_at >= timedelta(seconds=2), (ended, intent.created_at)
    assert ended <= result.created_at


async def test_stop_kills_the_running_command_and_destroys_the_sandbox(
    probe: Probe, cluster: Cluster
) -> None:
    session_id = f"stop-{uuid.uuid4().hex[:6]}"
    plan = [Reply.tool("Bash", {"command": "sleep 30; echo ran >> effects.log"}), Reply.text("x")]
    await probe.start(session_id, plan)
    # the command runs in its sandbox (its intent is committed before the sandbox starts it)
    tool_use_id = await probe.wait_running_command(session_id)
    owner = await _owner(probe, cluster.pool, session_id)
    # When someone writes `stop` while the command runs
    cancelled = await probe.sessions.cancel(session_id, actor="U0FAKEBOB")
    assert cancelled is not None
    manager = SandboxManager(probe.provider())
    try:
        killed = await cancel_running(manager, cancelled)
    finally:
        await manager.aclose()
    # Then the command is killed, the step's commit is fenced, the session is cancelled
    assert killed == tool_use_id
    await poll(
        lambda: _logged(owner, FENCED_LINE, session_id), timeout_s=10, what="the step to end"
    )
    session = await probe.session(session_id)
    assert session.status is SessionStatus.CANCELLED
    assert session.lease_owner is None
    assert await probe.events(session_id, "tool_result") == []
    assert await probe.effects(session_id) == 0
    assert len(probe.fakes.script.requests_for(session_id)) == 1
    # and its sandbox is destroyed (the session ended; a reply would get a new one)
    handle = await probe.sandbox(session_id)
    provider = probe.provider()

    async def gone() -> bool:
        return await provider.health(handle) is Health.GONE

    await poll(gone, timeout_s=15, what="the stopped session's sandbox to be destroyed")


async def test_a_crash_during_the_answer_post_finds_the_post_instead_of_posting_again(
    probe: Probe, cluster: Cluster
) -> None:
    # Given the worker dies after Slack took the answer, before its ts was recorded
    await _crash_run(probe, cluster.pool, "crash-during-post")
    # Then the next worker found it in the thread (by its metadata) and posted nothing
    texts = [c.args.get("text", "") for c in probe.fakes.posts()]
    assert sum("Answer of crash-during-post." in t for t in texts) == 1
    assert probe.fakes.slack.calls_to("conversations.replies")


async def test_an_answer_slack_refuses_for_good_fails_the_session_without_a_retry(
    probe: Probe, cluster: Cluster
) -> None:
    # Given the session's channel was archived while it worked
    session_id = f"archived-{uuid.uuid4().hex[:6]}"
    probe.fakes.slack.break_channel("C0ARCHIVED", "is_archived")
    await probe.start(session_id, [Reply.text("Nothing to do.")], channel="C0ARCHIVED")
    # When its answer is posted, Slack answers is_archived
    session = await probe.wait_status(session_id, SessionStatus.FAILED)
    # Then the attempt ends at once: one try, the session failed, the reason logged
    (refused,) = await probe.events(session_id, "post_failed")
    assert json.loads(refused.payload_json)["error"] == "is_archived"
    answers = [
        c
        for c in probe.fakes.slack.calls_to("chat.postMessage")
        if f"{session_id}:answer:" in str((c.args.get("metadata") or {}).get("event_payload"))
    ]
    assert len(answers) == 1
    assert session.crash_count == 0
    assert any(
        [await _logged(w, "refused its answer for good", session_id) for w in cluster.pool.history]
    )


async def test_a_frozen_worker_past_its_lease_is_fenced_when_it_continues(
    probe: Probe, cluster: Cluster
) -> None:
    session_id = f"frozen-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, standard_plan(sleep_s=1.5))
    await probe.wait_running_command(session_id)
    intent = await probe.wait_event(session_id, "tool_intent")
    zombie = await _owner(probe, cluster.pool, session_id)
    # Given the worker running the command freezes past its lease
    async with frozen([zombie], PG_ADMIN_URL):
        # When another worker takes the session over and finishes it
        await probe.assert_completed_once(session_id)
    # Then the thawed worker's late writes are refused
    await poll(
        lambda: _logged(zombie, FENCED_LINE, session_id),
        timeout_s=10,
        what="the zombie's write to be fenced",
    )
    await probe.assert_completed_once(session_id)
    late = [e.kind for e in await probe.events(session_id) if e.epoch == intent.epoch]
    assert late == ["tool_intent"], "the zombie committed something after its intent"


async def test_a_step_that_crashes_every_attempt_fails_the_session_with_a_notice_in_the_thread(
    probe: Probe, cluster: Cluster
) -> None:
    session_id = "crash-loop"
    cluster.pool.wait_ready()  # two workers die here; the third fails the session
    before = cluster.pool.crashes()
    await probe.start(session_id, standard_plan())
    session = await probe.wait_status(session_id, SessionStatus.FAILED, timeout_s=30)
    assert session.pending_token is None
    await _crashes_since(cluster.pool, before, MAX_CRASHES)
    notices = [json.loads(e.payload_json) for e in await probe.events(session_id, "notice")]
    assert {"notice": "crash_loop", "max_crashes": MAX_CRASHES} in notices
    assert probe.fakes.script.requests_for(session_id) == []

    async def told() -> list[str] | None:
        keys = [k for k in probe.fakes.post_keys() if k.startswith(f"{session_id}:failed:")]
        return keys or None

    assert len(await poll(told, timeout_s=10, what="the failure notice in the thread")) == 1
    thread = [c.args.get("text", "") for c in probe.fakes.posts() if c.args.get("thread_ts")]
    assert any(f"crashed {MAX_CRASHES} times" in text for text in thread)


async def test_a_session_failed_by_a_crash_loop_keeps_no_background_process_running(
    probe: Probe, cluster: Cluster
) -> None:
    # The session starts a background command, then its next model step crashes every
    # attempt: the failed session is over, so its command must not run on (nor keep its
    # sandbox from the idle policy) with no one ever to hear of it
    session_id = "crash-loop-bg"
    cluster.pool.wait_ready()
    marker = f"orphan-{uuid.uuid4().hex[:8]}"
    call = {"command": f"sleep 60; echo {marker}", "run_in_background": True}
    await probe.start(session_id, [Reply.tool("Bash", call), Reply.text("done")])

    async def running() -> bool:
        return await asyncio.to_thread(_running_with, marker)

    await poll(running, timeout_s=30, what="the background command")
    await probe.wait_status(session_id, SessionStatus.FAILED, timeout_s=60)

    async def gone() -> bool:
        return not await running()

    await poll(gone, timeout_s=10, what="the failed session's background command to end")


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


async def test_sigterm_to_the_dramatiq_parent_lets_the_running_step_finish_and_commit(
    probe: Probe, cluster: Cluster
) -> None:
    session_id = f"sigterm-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, standard_plan(sleep_s=1.5))
    intent = await probe.wait_event(session_id, "tool_intent")
    worker = await _owner(probe, cluster.pool, session_id)
    async with probe.hold_sandbox(session_id):  # keep the jail to count the effect in it
        # When the deploy signals the dramatiq parent (only) mid-command
        worker.process.send_signal(signal.SIGTERM)
        # Then the step finishes and commits under its own claim, and the worker exits
        result = await probe.wait_event(session_id, "tool_result")
        assert result.epoch == intent.epoch

        async def exited() -> bool:
            return not worker.alive()

        await poll(exited, timeout_s=30, what="the worker to exit")
        assert worker.process.returncode == 0
        await probe.assert_completed_once(session_id)
    assert not await probe.events(session_id, "tool_unknown")


async def test_sigterm_twice_to_the_process_group_stops_the_worker_cleanly_and_loses_nothing(
    probe: Probe, cluster: Cluster
) -> None:
    # Given a worker running a command of one session
    session_id = f"group-{uuid.uuid4().hex[:6]}"
    await probe.start(session_id, standard_plan(sleep_s=2.0))
    intent = await probe.wait_event(session_id, "tool_intent")
    worker = await _owner(probe, cluster.pool, session_id)
    logged_before = len(worker.log())

    async with probe.hold_sandbox(session_id):  # keep the jail to count the effect in it
        # When its whole process group gets SIGTERM (as systemd's KillMode=control-group
        # does), and again once the worker process has started stopping
        os.killpg(worker.pid, signal.SIGTERM)

        async def stopping() -> bool:
            return "Stopping worker process" in worker.log()[logged_before:]

        await poll(stopping, timeout_s=10, what="the worker process to start stopping")
        os.killpg(worker.pid, signal.SIGTERM)
        # ... while other sessions' wake-ups keep arriving
        others = [f"after-{n}-{uuid.uuid4().hex[:6]}" for n in range(3)]
        for other in others:
            await probe.start(other, standard_plan(answer=f"Answer of {other}."))

        # Then the running step finishes under its own claim and the worker exits 0
        result = await probe.wait_event(session_id, "tool_result")
        assert result.epoch == intent.epoch

        async def exited() -> bool:
            return not worker.alive()

        await poll(exited, timeout_s=30, what="the worker to exit")
        assert worker.process.returncode == 0
        # And nothing is lost or failed: every session completes once (the stopped worker
        # may have destroyed the running session's jail: its command is counted by its result)
        await probe.assert_completed_once(session_id, effects=None)
    for other in others:
        await probe.assert_completed_once(other)
    log = worker.log()[logged_before:]
    # And the stopping worker took none of the others' steps (it handed their wake-ups back)
    for other in others:
        assert f"session={other}" not in log, f"the stopping worker ran a step of {other}"
    assert "cannot schedule new futures" not in log
    assert "Failed to process message" not in log


async def test_a_worker_process_stops_when_its_dramatiq_parent_is_killed(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a worker of our own (the pool's keeper would kill a dead parent's group itself)
    worker = _own_worker(cluster.pool.env, tmp_path)
    process = worker.process
    try:

        async def ready() -> bool:
            return worker.ready()

        await poll(ready, timeout_s=60, what="the worker to be ready")
        children = worker.children()
        assert children

        # When its Dramatiq parent is SIGKILLed (no signal of its own reaches the children)
        os.kill(worker.pid, signal.SIGKILL)
        process.wait(10)

        # Then its worker process stops too, instead of polling Redis under init
        async def stopped() -> bool:
            return not any(_running(pid) for pid in children)

        await poll(stopped, timeout_s=30, what="the orphaned worker process to stop")
    finally:
        worker.kill()


def _own_worker(env: dict[str, str], directory: Path) -> Worker:
    """One ``dramatiq`` parent with one worker process, in its own session."""
    argv = [sys.executable, "-m", "dramatiq", "bot.durable.worker_main", "--processes", "1"]
    with (directory / "worker.log").open("wb") as log:
        process = subprocess.Popen(
            [*argv, "--threads", "1"],
            env=env,
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Worker(process, directory / "worker.log")


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for init counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
