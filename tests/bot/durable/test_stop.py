"""``stop`` kills the running Bash command, even one whose intent was committed but whose
process had not started yet when the stop arrived."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.durable.wiring import kill_in_flight
from harness import Checkpoint, Message, Requester, ToolUseBlock
from memory_store import Cancelled, SessionStatus
from sandbox_client import (
    Health,
    LocalProvider,
    SandboxClient,
    SandboxHandle,
    SandboxUnavailable,
)
from tests.sandbox_client.conftest import local_config

pytestmark = pytest.mark.bwrap
CALL = "toolu_stop_1"


class FirstKillSeen:
    """The provider, with a client that says when ``stop`` first tried to kill."""

    def __init__(self, inner: LocalProvider) -> None:
        self.inner = inner
        self.first_kill = asyncio.Event()

    def connect(self, handle: SandboxHandle) -> SandboxClient:
        client = self.inner.connect(handle)
        kill = client.kill
        seen = self.first_kill

        async def kill_and_say(name: str) -> None:
            try:
                await kill(name)
            finally:
                seen.set()

        client.kill = kill_and_say  # type: ignore[method-assign]
        return client


@pytest.fixture
async def sandbox() -> AsyncIterator[tuple[LocalProvider, SandboxHandle]]:
    state_dir = Path(tempfile.mkdtemp(prefix="wr-stop-"))  # socket paths stay short
    provider = LocalProvider(local_config(state_dir))
    handle = await provider.provision("stop-before-start")
    yield provider, handle
    await provider.destroy(handle)
    shutil.rmtree(state_dir, ignore_errors=True)


def _cancelled(handle: SandboxHandle) -> Cancelled:
    bash = ToolUseBlock(CALL, "Bash", {"command": "sleep 30", "description": "wait"})
    cp = Checkpoint(session_id="s-stop", org_id="T1", channel_id="C1", requester=Requester("U1"))
    cp = replace(cp, messages=(Message("assistant", (bash,)),), in_flight=CALL)
    return Cancelled("s-stop", 2, SessionStatus.RUNNING, cp.to_json(), handle.to_json())


async def test_stop_kills_a_bash_command_that_starts_after_the_stop(
    sandbox: tuple[LocalProvider, SandboxHandle],
) -> None:
    provider, handle = sandbox
    watched = FirstKillSeen(provider)
    # Given a stop that arrives while the Bash intent is committed but its process not started
    stopping = asyncio.create_task(kill_in_flight(watched, _cancelled(handle)))  # type: ignore[arg-type]
    await asyncio.wait_for(watched.first_kill.wait(), 10)
    # When the process starts just after the stop's first attempt
    async with provider.connect(handle) as client:
        running = asyncio.create_task(client.exec(CALL, "sleep 30", timeout_s=60))
        # Then the stop still kills it, well before the command would have ended
        assert await asyncio.wait_for(stopping, 10) == CALL
        record = await asyncio.wait_for(running, 10)
    assert record.exit_code != 0


class NotYetReachable:
    """The provider, with a client whose first kills find no sandbox server (its jail is
    still starting, as a sandbox provisioned for the step answers only once it runs)."""

    def __init__(self, inner: LocalProvider, refusals: int) -> None:
        self.inner = inner
        self.refusals = refusals
        self.refused = asyncio.Event()

    def connect(self, handle: SandboxHandle) -> SandboxClient:
        client = self.inner.connect(handle)
        kill = client.kill

        async def kill_when_reachable(name: str) -> None:
            if self.refusals > 0:
                self.refusals -= 1
                self.refused.set()
                raise SandboxUnavailable(handle.sandbox_id, "ConnectError: no socket yet")
            await kill(name)

        client.kill = kill_when_reachable  # type: ignore[method-assign]
        return client

    async def health(self, handle: SandboxHandle) -> Health:
        return await self.inner.health(handle)


async def test_stop_kills_a_command_whose_sandbox_was_not_reachable_yet(
    sandbox: tuple[LocalProvider, SandboxHandle],
) -> None:
    provider, handle = sandbox
    starting = NotYetReachable(provider, refusals=3)
    # Given a stop that arrives while the step's sandbox does not answer yet
    stopping = asyncio.create_task(kill_in_flight(starting, _cancelled(handle)))  # type: ignore[arg-type]
    await asyncio.wait_for(starting.refused.wait(), 10)
    # When the sandbox answers and the command starts
    async with provider.connect(handle) as client:
        running = asyncio.create_task(client.exec(CALL, "sleep 30", timeout_s=60))
        # Then the stop still kills it
        assert await asyncio.wait_for(stopping, 10) == CALL
        record = await asyncio.wait_for(running, 10)
    assert record.exit_code != 0


async def test_a_stop_finds_the_command_ended_when_its_sandbox_was_destroyed_first(
    sandbox: tuple[LocalProvider, SandboxHandle],
) -> None:
    provider, handle = sandbox
    # Given a running command whose step let go of its sandbox when the stop fenced it,
    # and a sweep that destroyed the sandbox of the ended session before the stop's kill
    async with provider.connect(handle) as client:
        await client.start(CALL, "sleep 30")
    await provider.destroy(handle)
    # When the stop comes to kill the command, the ledger having forgotten the sandbox
    killed = await kill_in_flight(provider, _cancelled(handle), forgotten=_forgotten)
    # Then it finds the command gone with its sandbox (not a sandbox that never answers)
    assert killed == CALL


async def _forgotten(sandbox_id: str) -> bool:
    return True


async def _still_recorded(sandbox_id: str) -> bool:
    return False


async def test_a_stop_that_cannot_reach_a_recorded_sandbox_claims_no_kill(
    sandbox: tuple[LocalProvider, SandboxHandle],
) -> None:
    provider, handle = sandbox
    # Given a command running in a jail this process cannot reach: its socket is not on
    # this filesystem and its pid is no process here (another container's jail: GONE to
    # this one), while the ledger still records the sandbox
    async with provider.connect(handle) as client:
        await client.start(CALL, "sleep 30")
        ended = await asyncio.create_subprocess_exec("true")
        await ended.wait()
        unreachable = replace(
            handle, socket_path=str(Path(tempfile.mkdtemp()) / "sbx.sock"), pid=ended.pid
        )
        assert await provider.health(unreachable) is Health.GONE
        # When a stop is handled here
        with pytest.raises(SandboxUnavailable):
            await kill_in_flight(
                provider, _cancelled(unreachable), appear_timeout_s=0.2, forgotten=_still_recorded
            )
        # Then it says it could not kill it, and the command still runs
        process = await client.get_process(CALL)
        assert process is not None
        assert process.status.value == "running"
