"""Steps go where the sandbox is (issue #30): two worker hosts on one machine.

Two real ``dramatiq bot.durable.worker_main`` hosts (``host-1``, ``host-2``: distinct
``WARROOM_HOST_ID`` and data directories, so distinct sandbox state directories that
neither reaches of the other) share PostgreSQL, Redis and the fake Anthropic and Slack
APIs (``tests/bot/hosts_support.py``). ``WARROOM_CARRY_ON_S=0``: every step goes through
the queue, so without routing about every other tool step would land on the host
without the sandbox. Every wait polls a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from bot.fakes.anthropic_api import Reply
from memory_store import SessionStatus
from tests.bot.durable_support import Probe, poll
from tests.bot.hosts_support import (
    HostCluster,
    probing,
    replacements,
    running_hosts,
    tool_outputs,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[HostCluster]:
    """A fresh database, the fakes and two worker hosts, for the whole module."""
    with running_hosts(redis_url, name="warroom_hosts", hosts=2) as made:
        yield made


@pytest.fixture
async def probe(cluster: HostCluster) -> AsyncIterator[Probe]:
    """Both hosts running and beating, and a probe of their database and Redis."""
    for host in cluster.hosts.values():
        if not host.alive():
            host.start()
    await cluster.wait_live("host-1", "host-2")
    logged = {h.host_id: len(h.log()) for h in cluster.hosts.values()}
    async with probing(cluster) as made:
        yield made
    for host in cluster.hosts.values():
        print(f"--- {host.host_id}:\n{host.log()[logged[host.host_id] :]}")


def bash(command: str) -> Reply:
    return Reply.tool("Bash", {"command": command, "description": "work in /workspace"})


def write_and_count(n: int) -> Reply:
    """Write file ``n`` and list how many of the session's files /workspace holds."""
    return bash(f"echo {n} > /workspace/f{n}.txt && ls /workspace | grep -c '^f.*txt$'")


async def test_a_40_step_session_keeps_its_files_on_every_step(
    cluster: HostCluster, probe: Probe
) -> None:
    # Two sessions at once, each 20 tool steps and 20 model steps (then the answer): every
    # tool step finds every file the earlier ones wrote
    calls = 20
    sessions = [f"keep-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for session_id in sessions:
        plan = [write_and_count(n) for n in range(1, calls + 1)] + [Reply.text("All kept.")]
        await probe.start(session_id, plan)
    for session_id in sessions:
        session = await probe.wait_answered(session_id, timeout_s=180)
        assert session.crash_count == 0
        events = await probe.events(session_id)
        counts = [out.strip() for out in tool_outputs(events)]
        assert counts == [str(n) for n in range(1, calls + 1)], cluster.logs()
        assert replacements(events) == 0
    assert all(h.alive() for h in cluster.hosts.values())


async def test_sigkill_of_the_sandbox_host_moves_the_session_which_is_told_once(
    cluster: HostCluster, probe: Probe
) -> None:
    session_id = f"kill-{uuid.uuid4().hex[:6]}"
    plan = [
        bash("echo kept > /workspace/note.txt && echo written"),
        bash("sleep 30; cat /workspace/note.txt"),  # its host is killed while this runs
        bash("cat /workspace/note.txt 2>/dev/null || echo missing"),
        Reply.text("The host went away; the note was lost with it."),
    ]
    await probe.start(session_id, plan)
    await probe.wait_event(session_id, "tool_intent")

    async def second_running() -> str | None:
        intents = await probe.events(session_id, "tool_intent")
        session = await probe.session(session_id)
        return session.lease_owner if len(intents) >= 2 else None

    owner = await poll(second_running, timeout_s=60, what="the second command to start")
    first = await probe.sandbox(session_id)
    doomed = cluster.host_of_state_dir(first.state_dir)
    assert doomed.owns(owner), "the step did not run on its sandbox's host"
    survivor = next(h for h in cluster.hosts.values() if h is not doomed)
    doomed.kill()

    await probe.wait_answered(session_id, timeout_s=90)
    events = await probe.events(session_id)
    assert replacements(events) == 1, cluster.logs()
    now = await probe.sandbox(session_id)
    assert cluster.host_of_state_dir(now.state_dir) is survivor
    assert tool_outputs(events)[0].strip() == "written"
    assert tool_outputs(events)[-1].strip() == "missing"
    # the model heard that the sandbox was replaced, in the request after it happened
    requests = probe.fakes.script.requests_for(session_id)
    told = [r for r in requests if "sandbox was replaced" in json.dumps(r.messages).lower()]
    assert told, "the model was not told"
    assert (await probe.session(session_id)).status is SessionStatus.WAITING


async def test_sigterm_hands_the_hosts_sessions_over_without_a_failed_step(
    cluster: HostCluster, probe: Probe
) -> None:
    session_id = f"term-{uuid.uuid4().hex[:6]}"
    plan = [
        bash("echo kept > /workspace/note.txt && echo written"),
        bash("sleep 3; cat /workspace/note.txt"),  # its host is stopped while this runs
        bash("cat /workspace/note.txt 2>/dev/null || echo missing"),
        Reply.text("Done."),
    ]
    await probe.start(session_id, plan)

    async def second_running() -> str | None:
        intents = await probe.events(session_id, "tool_intent")
        session = await probe.session(session_id)
        return session.lease_owner if len(intents) >= 2 else None

    owner = await poll(second_running, timeout_s=60, what="the second command to start")
    first = await probe.sandbox(session_id)
    stopping = cluster.host_of_state_dir(first.state_dir)
    assert stopping.owns(owner)
    other = next(h for h in cluster.hosts.values() if h is not stopping)
    assert stopping.terminate() == 0, stopping.log()[-3000:]

    session = await probe.wait_answered(session_id, timeout_s=90)
    events = await probe.events(session_id)
    outputs = [out.strip() for out in tool_outputs(events)]
    # the running step finished on the stopping host; the next went to the other host,
    # which replaced the sandbox (destroyed by the stopped host) and said so
    assert outputs == ["written", "kept", "missing"], cluster.logs()
    assert session.crash_count == 0
    assert not [e for e in events if e.kind == "tool_unknown"]
    assert replacements(events) == 1
    now = await probe.sandbox(session_id)
    assert cluster.host_of_state_dir(now.state_dir) is other
    # the stopped host destroyed the sandbox it used
    assert first.state_dir is not None
    assert not await asyncio.to_thread(os.path.exists, first.state_dir), stopping.log()[-3000:]


async def test_a_background_command_keeps_its_session_on_its_host(
    cluster: HostCluster, probe: Probe
) -> None:
    session_id = f"bg-{uuid.uuid4().hex[:6]}"
    started = {"command": "sleep 2; echo finished > /workspace/bg.txt", "run_in_background": True}
    plan = [
        Reply.tool("Bash", started | {"description": "a slow job"}),
        Reply.text("Started; I will look when it ends."),
        bash("cat /workspace/bg.txt; ls /workspace | wc -l"),
        Reply.text("It finished."),
    ]
    await probe.start(session_id, plan)
    await probe.wait_answered(session_id, posts=2, timeout_s=90)
    events = await probe.events(session_id)
    outputs = tool_outputs(events)
    assert "finished" in outputs[-1], cluster.logs()
    assert replacements(events) == 0


async def test_the_background_command_of_a_killed_host_is_told_lost_by_another(
    cluster: HostCluster, probe: Probe
) -> None:
    session_id = f"bglost-{uuid.uuid4().hex[:6]}"
    started = {"command": "sleep 120", "run_in_background": True}
    plan = [
        Reply.tool("Bash", started | {"description": "a long job"}),
        Reply.text("Started."),
        Reply.text("The job was lost with its host."),
    ]
    await probe.start(session_id, plan)
    await probe.wait_answered(session_id, timeout_s=60)
    doomed = cluster.host_of_state_dir((await probe.sandbox(session_id)).state_dir)
    doomed.kill()

    await probe.wait_answered(session_id, posts=2, timeout_s=60)
    told = [i.text for i in await probe.sessions.inbox(session_id) if i.kind == "notification"]
    assert len(told) == 1, cluster.logs()
    assert "<status>lost</status>" in told[0] or "was lost" in told[0]
