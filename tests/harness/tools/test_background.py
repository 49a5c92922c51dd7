"""Background commands (Bash ``run_in_background``, TaskStop, KillShell) in a real local
sandbox, with their rows in a real database (issue #17)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import Checkpoint, Requester, run_tool, tool_specs
from harness.sandbox.session import SandboxWorkspaces
from harness.tools.background import task_id_for
from memory_store import BackgroundTasks, Database, FileStore, SandboxLedgerStore
from sandbox_client import (
    LocalConfig,
    LocalProvider,
    ProcessStatus,
    SandboxClient,
    SandboxError,
    SandboxHandle,
    SandboxManager,
)
from tests.conftest import require_bwrap
from tests.harness.tool_support import SessionDriver, error_text

ID_RE = r"b[0-9a-z]{8}"


class Rig:
    """A session with a real sandbox, its task rows and the manager's ledger."""

    def __init__(
        self, agent: SessionDriver, tasks: BackgroundTasks, manager: SandboxManager
    ) -> None:
        self.agent = agent
        self.tasks = tasks
        self.manager = manager

    def handle(self) -> SandboxHandle:
        handle = self.agent.workspace.handle_json()  # type: ignore[attr-defined]
        assert isinstance(handle, str)
        return SandboxHandle.from_json(handle)

    def client(self) -> SandboxClient:
        return self.manager.provider.connect(self.handle())

    async def process_finished(self, name: str, timeout_s: float = 15.0) -> str:
        client = self.client()
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                record = await client.get_process(name)
                assert record is not None, f"the sandbox does not know {name}"
                if record.finished:
                    return record.status.value
                await asyncio.sleep(0.05)
        finally:
            await client.aclose()
        raise AssertionError(f"process {name} still runs after {timeout_s} s")


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    require_bwrap()
    state = Path(tempfile.mkdtemp(prefix="wr-bg-"))  # Unix socket paths must stay short
    db = Database.from_url(None, data_dir=tmp_path)
    await db.migrate()
    provider = LocalProvider(LocalConfig(state_dir=state, network="none"))
    manager = SandboxManager(
        provider, ledger=SandboxLedgerStore(db), idle_suspend_s=0.0, scope="local:test"
    )
    cp = Checkpoint("s-bg", "T-BG", "C1", Requester("U1"))
    workspace = SandboxWorkspaces(manager).open(cp)
    tasks = BackgroundTasks(db)
    agent = SessionDriver(FileStore(db), workspace, org_id="T-BG", session_id="s-bg", tasks=tasks)
    try:
        yield Rig(agent, tasks, manager)
    finally:
        handle = workspace.handle_json()
        await manager.aclose()
        if handle is not None:
            with contextlib.suppress(SandboxError, OSError):
                await provider.destroy(SandboxHandle.from_json(handle))
        await provider.aclose()
        await db.dispose()
        shutil.rmtree(state, ignore_errors=True)


def test_bash_offers_run_in_background_and_task_stop_is_listed() -> None:
    specs = {spec.name: spec for spec in tool_specs()}
    assert "run_in_background" in specs["Bash"].input_schema["properties"]
    assert specs["TaskStop"].input_schema["properties"]["task_id"]["type"] == "string"
    assert "KillShell" not in specs  # an alias: run when called, not offered


async def test_a_background_command_returns_at_once_and_writes_its_output_file(rig: Rig) -> None:
    started = time.monotonic()
    outcome = await rig.agent.call(
        "Bash",
        {"command": "echo first; sleep 2; echo done", "run_in_background": True},
        tool_use_id="toolu_bg_one",
    )
    took_s = time.monotonic() - started
    task_id = task_id_for("toolu_bg_one")
    path = f"/workspace/.warroom/tasks/{task_id}.output"

    assert not outcome.is_error, outcome.content
    assert outcome.content == (
        f"Command running in background with ID: {task_id}. Output is being written to: "
        f"{path}. You will be notified when it completes. To check interim output, use Read "
        "on that file path."
    )
    assert took_s < 1.5, "the call waited for the command"
    assert outcome.task is not None
    assert outcome.task.running
    row = await rig.tasks.get("s-bg", task_id)
    assert row is not None
    assert row.running
    assert row.tool_use_id == "toolu_bg_one"
    assert row.sandbox_id == rig.handle().sandbox_id
    # The sandbox is not claimed for suspension while the command runs
    assert not await rig.manager.ledger.claim_idle(row.sandbox_id, idle_s=0.0, hold_s=5.0)
    assert await rig.process_finished("toolu_bg_one") == ProcessStatus.COMPLETED.value
    read = await rig.agent.call("Read", {"file_path": path})
    assert read.content == "1\tfirst\n2\tdone\n3"


async def test_a_background_call_redone_after_a_crash_starts_nothing_new(rig: Rig) -> None:
    command = "echo ran >> /workspace/runs.log; sleep 1"
    call = {"command": command, "run_in_background": True}
    first = await rig.agent.call("Bash", call, tool_use_id="toolu_bg_twice")
    ctx = rig.agent.context("toolu_bg_twice")
    again = await run_tool("Bash", call, ctx, recovering=True)

    assert again is not None
    assert again.content == first.content
    await rig.process_finished("toolu_bg_twice")
    read = await rig.agent.call("Read", {"file_path": "/workspace/runs.log"})
    assert read.content == "1\tran\n2"
    assert len(await rig.tasks.of_session("s-bg")) == 1


async def test_task_stop_kills_the_process_and_its_row_and_kill_shell_is_its_alias(
    rig: Rig,
) -> None:
    await rig.agent.call(
        "Bash", {"command": "sleep 60", "run_in_background": True}, tool_use_id="toolu_bg_a"
    )
    await rig.agent.call(
        "Bash",
        {"command": "sleep 60", "description": "Wait a minute", "run_in_background": True},
        tool_use_id="toolu_bg_b",
    )
    a, b = task_id_for("toolu_bg_a"), task_id_for("toolu_bg_b")

    stopped = await rig.agent.call("TaskStop", {"task_id": a})
    killed = await rig.agent.call("KillShell", {"shell_id": b})
    again = await rig.agent.call("TaskStop", {"task_id": a})
    unknown = await rig.agent.call("TaskStop", {"task_id": "bnosuchid"})

    assert stopped.content == (  # Claude Code 2.1.336's compact JSON, naming the command
        f'{{"message":"Successfully stopped task: {a} (sleep 60)","task_id":"{a}",'
        '"task_type":"local_bash","command":"sleep 60"}'
    )
    assert f"Successfully stopped task: {b} (sleep 60)" in killed.content
    assert error_text(again) == f"Task {a} is not running (status: killed)"
    assert error_text(unknown) == "No task found with ID: bnosuchid"
    assert await rig.process_finished("toolu_bg_a", timeout_s=5) == ProcessStatus.KILLED.value
    assert await rig.process_finished("toolu_bg_b", timeout_s=5) == ProcessStatus.KILLED.value
    assert [t.state for t in await rig.tasks.of_session("s-bg")] == ["killed", "killed"]
    # With nothing running in it any more, the sandbox may be claimed again
    assert await rig.manager.ledger.claim_idle(rig.handle().sandbox_id, idle_s=0.0, hold_s=1.0)


async def test_a_background_command_the_guard_refuses_is_not_started(rig: Rig) -> None:
    outcome = await rig.agent.call(
        "Bash", {"command": "cat /memory/notes.md", "run_in_background": True}
    )

    assert outcome.is_error
    assert await rig.tasks.of_session("s-bg") == ()
