"""Jails never leak: idle ones are destroyed (and replaced with the set-up replayed on
next use), orphans are reaped, and a stopping process destroys what it used."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from itertools import count
from pathlib import Path

import pytest

from sandbox_client import (
    Health,
    LocalProvider,
    MemoryLedger,
    Reaper,
    SandboxHandle,
    SandboxManager,
    SetupStep,
)
from sandbox_client.providers.local import procfs

from .conftest import local_config
from .test_lifecycle import Clock

SETUP = (SetupStep.file("/workspace/runbook.md", b"restart the pool\n"),)


@pytest.fixture
def reap_provider(state_dir: Path, request: pytest.FixtureRequest) -> LocalProvider:
    """A provider over a state directory of this test's own (reaping scans it all)."""
    return LocalProvider(local_config(state_dir / f"r{abs(hash(request.node.name)) % 10**6}"))


@pytest.fixture
def clock() -> Clock:
    """The ledger's clock."""
    return Clock()


@pytest.fixture
async def manager(reap_provider: LocalProvider, clock: Clock) -> AsyncIterator[SandboxManager]:
    """A manager destroying sandboxes idle 900 s; every jail is destroyed afterwards."""
    numbers = count()
    manager = SandboxManager(
        reap_provider,
        idle_destroy_s=900,
        ledger=MemoryLedger(clock),
        new_sandbox_id=lambda: f"rp-{os.getpid()}-{next(numbers)}",
    )
    yield manager
    await manager.aclose()
    await reap_provider.destroy_all()


def jail_alive(handle: SandboxHandle) -> bool:
    """True while any process of the jail runs."""
    return handle.pid is not None and procfs.is_alive(handle.pid, handle.pid_start_ticks)


async def test_a_sandbox_idle_past_the_limit_is_destroyed_and_replaced_with_its_set_up(
    manager: SandboxManager, clock: Clock
) -> None:
    first = await manager.ensure(None, SETUP, session_id="s-1")
    await manager.release(first.handle)  # parked: the session waits for a human
    reaper = Reaper(manager)
    assert await reaper.destroy_idle() == ()

    # Given a sandbox unused for longer than idle_destroy_s
    clock.advance(901)
    assert await reaper.destroy_idle() == (first.handle.sandbox_id,)

    assert not jail_alive(first.handle)
    assert await manager.provider.health(first.handle) is Health.GONE
    # When the session needs it again, a new one is set up and the model is told
    again = await manager.ensure(first.handle, SETUP, session_id="s-1")
    assert again.replaced
    assert again.lost is not None
    assert "was replaced" in again.lost.describe()
    assert await again.client.read_file("/workspace/runbook.md") == b"restart the pool\n"


async def test_a_sandbox_with_a_use_in_flight_is_never_destroyed_as_idle(
    manager: SandboxManager, clock: Clock
) -> None:
    async with manager.use(None, session_id="s-2", busy_s=7200) as result:
        clock.advance(3600)
        assert await Reaper(manager).destroy_idle() == ()
        assert (await result.client.exec("still", "echo here", timeout_s=10)).stdout == "here\n"


async def test_orphaned_jails_the_ledger_never_recorded_are_reaped(
    manager: SandboxManager, reap_provider: LocalProvider
) -> None:
    recorded = await manager.ensure(None)
    # Given a jail made by a process that died before recording it
    orphan = await reap_provider.provision("rp-orphan")

    reaped = await Reaper(manager, orphan_grace_s=0.0).reap_orphans()

    assert reaped == ("rp-orphan",)
    assert not jail_alive(orphan)
    assert jail_alive(recorded.handle)


async def test_a_young_unrecorded_jail_is_left_alone(
    manager: SandboxManager, reap_provider: LocalProvider
) -> None:
    young = await reap_provider.provision("rp-young")

    assert await Reaper(manager, orphan_grace_s=600.0).reap_orphans() == ()
    assert jail_alive(young)


async def test_a_stopping_process_destroys_every_sandbox_it_used(
    manager: SandboxManager,
) -> None:
    used = [await manager.ensure(None) for _ in range(3)]
    await manager.release(used[0].handle)  # one suspended, two running

    destroyed = await Reaper(manager).shutdown()

    assert sorted(destroyed) == sorted(r.handle.sandbox_id for r in used)
    assert not any(jail_alive(r.handle) for r in used)
    assert await manager.provider.list_sandboxes() == ()


async def test_a_stopping_process_destroys_a_used_sandbox_the_ledger_forgot(
    manager: SandboxManager,
) -> None:
    # its session moved to another host, which replaced the sandbox and forgot this one
    used = await manager.ensure(None)
    await manager.ledger.forget(used.handle.sandbox_id)

    destroyed = await Reaper(manager).shutdown()

    assert destroyed == (used.handle.sandbox_id,)
    assert not jail_alive(used.handle)


async def test_a_jail_of_another_state_directory_is_another_hosts(
    manager: SandboxManager, state_dir: Path
) -> None:
    # two hosts on one machine: each reaches only its own jails, as on two machines
    theirs = await manager.ensure(None, SETUP)
    other_host = LocalProvider(local_config(state_dir / "other-host"))
    mine = SandboxManager(other_host, ledger=manager.ledger)
    try:
        assert not other_host.reaches(theirs.handle)
        assert await other_host.health(theirs.handle) is Health.GONE
        await other_host.destroy(theirs.handle)  # left to its own host
        assert jail_alive(theirs.handle)

        moved = await mine.ensure(theirs.handle, SETUP)

        assert moved.replaced
        assert moved.handle.sandbox_id != theirs.handle.sandbox_id
        assert other_host.reaches(moved.handle)
        assert await moved.client.read_file("/workspace/runbook.md") == b"restart the pool\n"
        assert jail_alive(theirs.handle), "the other host's jail is its own to destroy"
    finally:
        await mine.aclose()
        await other_host.destroy_all()
