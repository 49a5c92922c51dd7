"""The lifecycle manager on real local sandboxes: lazy, suspended when idle, replaced."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from itertools import count

import pytest

from sandbox_client import (
    EnsureResult,
    Health,
    LocalProvider,
    MemoryLedger,
    SandboxError,
    SandboxManager,
    SetupStep,
)

from .conftest import wait_for

SETUP = (
    SetupStep.file("/workspace/config/app.yaml", b"replicas: 3\n"),
    SetupStep.run("git --version > /dev/null 2>&1; echo prepared > /workspace/prepared.txt"),
)


class Clock:
    """A ledger clock the tests move forward instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    """The ledger's clock."""
    return Clock()


@pytest.fixture
async def manager(provider: LocalProvider, clock: Clock) -> AsyncIterator[SandboxManager]:
    """A manager whose sandboxes are destroyed after the test."""
    numbers = count()
    manager = SandboxManager(
        provider,
        idle_suspend_s=60,
        ledger=MemoryLedger(clock),
        new_sandbox_id=lambda: f"lc-{os.getpid()}-{next(numbers)}",
    )
    yield manager
    await manager.aclose()
    for seen in list(provider.config.state_dir.glob(f"lc-{os.getpid()}-*")):
        handle = provider.find(seen.name)
        if handle is not None:
            await provider.destroy(handle)


async def test_the_first_ensure_provisions_and_replays_the_set_up(manager: SandboxManager) -> None:
    result = await manager.ensure(None, SETUP)

    assert not result.replaced
    assert result.lost is None
    assert await result.client.read_file("/workspace/config/app.yaml") == b"replicas: 3\n"
    assert await result.client.read_file("/workspace/prepared.txt") == b"prepared\n"


async def test_an_idle_sandbox_is_suspended_and_the_next_ensure_resumes_it(
    manager: SandboxManager, clock: Clock
) -> None:
    first = await manager.ensure(None)
    await first.client.write_file("/workspace/kept.txt", b"still here")

    # Given a sandbox idle for longer than the limit
    assert await manager.suspend_idle() == ()
    clock.advance(3600)
    assert await manager.suspend_idle() == (first.handle.sandbox_id,)
    assert await manager.provider.health(first.handle) is Health.SUSPENDED
    # When it is needed again, it is the same sandbox, awake, with its files
    again = await manager.ensure(first.handle)
    assert again.handle == first.handle
    assert not again.replaced
    assert await again.client.read_file("/workspace/kept.txt") == b"still here"


async def test_a_sandbox_running_a_call_is_never_suspended(
    manager: SandboxManager, clock: Clock
) -> None:
    result = await manager.ensure(None)
    command = "while [ ! -e /workspace/go ]; do sleep 0.01; done"
    task = asyncio.create_task(result.client.exec("long", command, timeout_s=30))
    await wait_for(lambda: result.client.get_process("long"), what="the command to start")

    clock.advance(3600)
    assert await manager.suspend_idle() == ()

    await result.client.write_file("/workspace/go", b"")
    assert (await task).exit_code == 0


async def test_a_gone_sandbox_is_replaced_and_the_loss_is_reported(
    manager: SandboxManager, provider: LocalProvider, clock: Clock
) -> None:
    first = await manager.ensure(None, SETUP)
    await first.client.write_file("/workspace/notes/scratch.txt", b"not in the set-up")
    async with provider.connect(first.handle) as other:
        background = asyncio.create_task(other.exec("tool-use-bg", "sleep 1000", timeout_s=600))
        await wait_for(lambda: first.client.get_process("tool-use-bg"), what="the background run")
        # Given a sandbox last seen (at suspension) running a command and holding a file
        clock.advance(3600)
        await manager.suspend_idle()
        # When it dies
        assert first.handle.pid is not None
        os.kill(first.handle.pid, signal.SIGKILL)
        await wait_for(lambda: _is_gone(provider, first), what="the sandbox to be gone")
        with contextlib.suppress(SandboxError):
            await background
    # Then ensure gives a new sandbox with the set-up replayed, and says what was lost
    result = await manager.ensure(first.handle, SETUP)
    assert result.replaced
    assert result.handle.sandbox_id != first.handle.sandbox_id
    assert await result.client.read_file("/workspace/prepared.txt") == b"prepared\n"
    assert result.lost is not None
    assert result.lost.running_processes == ("tool-use-bg",)
    assert result.lost.files_not_recreated == ("/workspace/notes/scratch.txt",)
    assert result.lost.failed_steps == ()
    text = result.lost.describe()
    assert "tool-use-bg" in text
    assert "/workspace/notes/scratch.txt" in text


async def _is_gone(provider: LocalProvider, result: EnsureResult) -> bool:
    return await provider.health(result.handle) is Health.GONE


async def test_set_up_steps_that_fail_on_replay_are_reported_and_the_rest_run(
    manager: SandboxManager,
) -> None:
    steps = (
        SetupStep.run("echo broken >&2; exit 4"),
        SetupStep.file("/etc/outside.conf", b"x"),
        SetupStep.run("sleep 5", timeout_s=0.3),
        SetupStep.file("/workspace/after.txt", b"after"),
    )

    result = await manager.ensure(None, steps)

    assert result.lost is not None
    reasons = [f.reason for f in result.lost.failed_steps]
    assert reasons[0] == "exit code 4: broken"
    assert "outside /workspace" in reasons[1]
    assert reasons[2].startswith("timed out")
    assert await result.client.read_file("/workspace/after.txt") == b"after"


async def test_a_died_unseen_sandbox_reports_that_its_files_are_unknown(
    manager: SandboxManager, provider: LocalProvider
) -> None:
    first = await manager.ensure(None)
    assert first.handle.pid is not None
    os.kill(first.handle.pid, signal.SIGKILL)
    await wait_for(lambda: _is_gone(provider, first), what="the sandbox to be gone")

    result = await manager.ensure(first.handle)

    assert result.replaced
    assert result.lost is not None
    assert not result.lost.workspace_known
    assert "not written by the set-up are lost" in result.lost.describe()


async def test_a_background_task_suspends_idle_sandboxes_until_stopped(
    provider: LocalProvider,
) -> None:
    manager = SandboxManager(provider, idle_suspend_s=0.0, new_sandbox_id=lambda: "lc-bg-task")
    result = await manager.ensure(None)
    try:
        manager.start(interval_s=0.01)
        await wait_for(lambda: _is_suspended(provider, result), what="suspension")
        await manager.stop()
    finally:
        await manager.aclose()
        await provider.destroy(result.handle)


async def _is_suspended(provider: LocalProvider, result: EnsureResult) -> bool:
    return await provider.health(result.handle) is Health.SUSPENDED
