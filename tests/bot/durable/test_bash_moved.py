"""A foreground Bash command that reaches its ``timeout`` is moved to the background
(Claude Code's behaviour, issue #25), in a real local sandbox with its task row in a real
database and the real background watcher delivering its notification."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.durable.background import BackgroundWatcher
from harness import Checkpoint, Requester, run_tool
from harness.sandbox.session import SandboxWorkspaces, SessionWorkspace
from harness.tools.background import output_path, task_id_for, wrapped
from memory_store import (
    BackgroundTasks,
    Database,
    FileStore,
    SandboxLedgerStore,
    SessionKey,
    SessionStore,
)
from sandbox_client import (
    LocalConfig,
    LocalProvider,
    ProcessRecord,
    SandboxError,
    SandboxHandle,
    SandboxManager,
)
from tests.conftest import require_bwrap
from tests.harness.tool_support import SessionDriver

pytestmark = pytest.mark.bwrap
SESSION = "s-moved"
GATE = "/workspace/gate"
GATED = f"echo before; while [ ! -e {GATE} ]; do sleep 0.05; done; echo done"
"""Runs past any timeout until the test opens the gate: no race with the clock."""


@dataclass
class Rig:
    agent: SessionDriver
    tasks: BackgroundTasks
    sessions: SessionStore
    watcher: BackgroundWatcher
    manager: SandboxManager

    async def process(self, name: str) -> ProcessRecord:
        handle = self.agent.workspace.handle_json()  # type: ignore[attr-defined]
        client = self.manager.provider.connect(SandboxHandle.from_json(handle))
        try:
            record = await client.get_process(name)
        finally:
            await client.aclose()
        assert record is not None, name
        return record

    async def open_gate(self) -> None:
        await self.agent.workspace.write_file(GATE, b"")

    async def watch_until_ended(self, task_id: str, timeout_s: float = 20.0) -> None:
        """Let the watcher look until the task's row ended (then twice more)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            await self.watcher.poll_once()
            task = await self.tasks.get(SESSION, task_id)
            assert task is not None
            if not task.running:
                await self.watcher.poll_once()
                await self.watcher.poll_once()
                return
            await asyncio.sleep(0.1)  # the watcher's own interval between looks
        raise AssertionError(f"task {task_id} did not end within {timeout_s:g} s")

    async def notifications(self, task_id: str) -> list[str]:
        items = await self.sessions.inbox(SESSION)
        return [i.text for i in items if f"<task-id>{task_id}</task-id>" in i.text]


@pytest.fixture
async def rig(database: Database) -> AsyncIterator[Rig]:
    require_bwrap()
    state = Path(tempfile.mkdtemp(prefix="wr-mv-"))  # Unix socket paths must stay short
    provider = LocalProvider(LocalConfig(state_dir=state, network="none"))
    manager = SandboxManager(
        provider, ledger=SandboxLedgerStore(database), idle_suspend_s=0.0, scope="local:mv"
    )
    cp = Checkpoint(SESSION, "T1", "C1", Requester("U1"))
    sessions = SessionStore(database)
    await sessions.open_or_join(
        SessionKey("T1", "C1", "1.1"),
        requester_id="U1",
        initial_checkpoint=cp.to_json(),
        text="check it",
        source_ts="1.1",
        session_id=SESSION,
    )

    async def enqueue(session_id: str, token: str) -> None:
        pass  # the session has a step pending already: nothing is enqueued

    tasks = BackgroundTasks(database)
    workspace = SandboxWorkspaces(manager).open(cp)
    agent = SessionDriver(
        FileStore(database), workspace, org_id="T1", channel_id="C1", session_id=SESSION
    )
    agent.tasks = tasks
    watcher = BackgroundWatcher(tasks, sessions, manager, enqueue)
    try:
        yield Rig(agent, tasks, sessions, watcher, manager)
    finally:
        handle = workspace.handle_json()
        await manager.aclose()
        if handle is not None:
            with contextlib.suppress(SandboxError, OSError):
                await provider.destroy(SandboxHandle.from_json(handle))
        await provider.aclose()
        shutil.rmtree(state, ignore_errors=True)


def moved(task_id: str, seconds: str) -> str:
    path = output_path(task_id)
    return (
        f"Command did not complete within its {seconds} timeout and was moved to the "
        f"background (ID: {task_id}). Output is being written to: {path}. You will be "
        "notified when it completes. If it is still running after 10m in the background, it "
        "will be stopped and you will be notified. It is running now: do not start a second "
        "copy while it runs. If it is no longer needed, stop it with TaskStop. To check "
        "interim output, use Read on that file path."
    )


async def test_a_command_past_its_timeout_is_moved_and_notifies_once_when_it_ends(
    rig: Rig,
) -> None:
    # Given: a command that runs past its 1000 ms timeout
    call = {"command": GATED, "timeout": 1000, "description": "Wait for the gate"}
    outcome = await rig.agent.call("Bash", call, tool_use_id="toolu_moved")
    task_id = task_id_for("toolu_moved")

    # Then: the call returned its output so far and the task, the command still runs
    assert not outcome.is_error, outcome.content
    assert outcome.content == "before\n" + moved(task_id, "1s")
    assert outcome.task is not None
    assert outcome.task.task_id == task_id
    assert not (await rig.process("toolu_moved")).finished

    # When: it ends and the watcher looks
    await rig.open_gate()
    await rig.watch_until_ended(task_id)

    # Then: one notification, completed, with its whole output; the file holds it too
    [note] = await rig.notifications(task_id)
    assert "<status>completed</status>" in note
    assert '"Wait for the gate" completed (exit code 0)' in note
    assert note.endswith("Last lines of its output:\nbefore\ndone")
    read = await rig.agent.call("Read", {"file_path": output_path(task_id)})
    assert read.content == "1\tbefore\n2\tdone\n3"


async def test_task_stop_kills_a_moved_command_and_nothing_is_notified(rig: Rig) -> None:
    call = {"command": GATED, "timeout": 500}
    await rig.agent.call("Bash", call, tool_use_id="toolu_stopped")
    task_id = task_id_for("toolu_stopped")

    stopped = await rig.agent.call("TaskStop", {"task_id": task_id})

    assert not stopped.is_error, stopped.content
    assert f"Successfully stopped task: {task_id} ({GATED})" in stopped.content
    task = await rig.tasks.get(SESSION, task_id)
    assert task is not None
    assert task.state == "killed"
    record = await rig.process("toolu_stopped")
    for _ in range(100):  # the kill lands within the sandbox's own wait
        if record.finished:
            break
        await asyncio.sleep(0.05)
        record = await rig.process("toolu_stopped")
    assert record.status.value == "killed"
    await rig.watcher.poll_once()
    assert await rig.notifications(task_id) == []


async def test_a_moved_call_redone_after_a_crash_registers_and_starts_nothing_new(
    rig: Rig,
) -> None:
    call = {"command": f"echo ran >> /workspace/runs.log; {GATED}", "timeout": 500}
    first = await rig.agent.call("Bash", call, tool_use_id="toolu_redo")

    again = await run_tool("Bash", call, rig.agent.context("toolu_redo"), recovering=True)

    assert again is not None
    assert again.content == first.content
    assert len(await rig.tasks.of_session(SESSION)) == 1
    await rig.open_gate()
    await rig.watch_until_ended(task_id_for("toolu_redo"))
    assert len(await rig.notifications(task_id_for("toolu_redo"))) == 1
    read = await rig.agent.call("Read", {"file_path": "/workspace/runs.log"})
    assert read.content == "1\tran\n2"


async def test_a_command_done_within_its_timeout_is_reported_as_usual(rig: Rig) -> None:
    call = {"command": "echo out; echo err >&2; exit 3", "timeout": 60000}

    outcome = await rig.agent.call("Bash", call, tool_use_id="toolu_quick")

    assert outcome.is_error
    assert outcome.content == "Exit code 3\nout\nerr"
    assert outcome.task is None
    assert await rig.tasks.of_session(SESSION) == ()
    listing = await rig.agent.call("Bash", {"command": "ls -A /workspace/.warroom/tasks"})
    left = task_id_for("toolu_quick")
    assert left not in listing.content  # its output file and command were removed


async def test_a_moved_command_past_its_background_limit_is_stopped_and_told(rig: Rig) -> None:
    # Given: a moved command (10 minutes left in the background), and one whose time is up
    call = {"command": GATED, "timeout": 500}
    await rig.agent.call("Bash", call, tool_use_id="toolu_moved_late")
    moved_task = await rig.tasks.get(SESSION, task_id_for("toolu_moved_late"))
    assert moved_task is not None
    assert moved_task.deadline_at is not None
    left = moved_task.deadline_at - datetime.now(UTC)
    assert timedelta(minutes=9) < left <= timedelta(minutes=10)
    task_id = task_id_for("toolu_overran")
    workspace = rig.agent.workspace
    assert isinstance(workspace, SessionWorkspace)
    sandbox_id = await workspace.start("toolu_overran", wrapped(GATED, output_path(task_id)))
    past = datetime.now(UTC) - timedelta(seconds=1)
    overran = replace(moved_task, task_id=task_id, tool_use_id="toolu_overran")
    await rig.tasks.register(
        replace(overran, sandbox_id=sandbox_id, description="Wait forever", deadline_at=past)
    )

    # When: the watcher looks
    await rig.watch_until_ended(task_id)

    # Then: that one was killed and the session told, once; the other runs on
    assert (await rig.process("toolu_overran")).status.value == "killed"
    [note] = await rig.notifications(task_id)
    assert "<status>killed</status>" in note
    assert '"Wait forever" was stopped' in note
    assert not (await rig.process("toolu_moved_late")).finished


async def test_a_timeout_shorter_than_the_sandbox_can_start_a_command_still_moves_it(
    rig: Rig,
) -> None:
    call = {"command": GATED, "timeout": 1}

    outcome = await rig.agent.call("Bash", call, tool_use_id="toolu_tiny")

    assert outcome.content == "before\n" + moved(task_id_for("toolu_tiny"), "1s")
    assert not (await rig.process("toolu_tiny")).finished


SILENT_GATED = f"while [ ! -e {GATE} ]; do sleep 0.05; done"


async def test_a_command_past_the_default_timeout_is_moved_too(rig: Rig) -> None:
    # Given: a silent command with no timeout, in a session whose cap is 1 s
    ctx = replace(rig.agent.context("toolu_default"), bash_max_timeout_ms=1000)

    outcome = await run_tool("Bash", {"command": SILENT_GATED}, ctx)

    # Then: moved at the default (here the cap), saying no output was read yet
    task_id = task_id_for("toolu_default")
    assert not outcome.is_error, outcome.content
    assert outcome.content == moved(task_id, "1s").replace(
        "TaskStop. To check",
        "TaskStop. No output had been read from it when it was moved. A program that "
        "buffers its output, or a pipe into one such as tail, can keep the output file "
        "empty until the command finishes. To check",
    )
    assert outcome.task is not None
    await rig.open_gate()
    await rig.watch_until_ended(task_id)
    [note] = await rig.notifications(task_id)
    assert "<status>completed</status>" in note


async def test_a_command_that_starts_with_sleep_is_killed_at_its_timeout(rig: Rig) -> None:
    call = {"command": "sleep 30; touch /workspace/late", "timeout": 1000}

    outcome = await rig.agent.call("Bash", call, tool_use_id="toolu_sleep")

    assert outcome.is_error
    assert outcome.content == "Exit code 143\nCommand timed out after 1s"
    assert outcome.task is None
    assert await rig.tasks.of_session(SESSION) == ()
    assert (await rig.process("toolu_sleep")).finished
