"""The warm pool: fresh jails started ahead, bounded, one session each, destroyed at close."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sandbox_client import LocalProvider, SandboxHandle
from sandbox_client.providers.local import procfs
from sandbox_client.providers.local.orphans import PREFIX, held_by_live_process
from sandbox_client.providers.local.pool import WarmPool, pool_id

from ..conftest import local_config, wait_for


def _pooled_dirs(state_dir: Path) -> list[str]:
    return sorted(p.name for p in state_dir.glob(f"{PREFIX}*") if (p / "handle.json").exists())


def _alive(handle: SandboxHandle) -> bool:
    return procfs.is_alive(handle.pid or 0, handle.pid_start_ticks)


@pytest.fixture
def events() -> list[str]:
    """What the pool reported (what the metrics count)."""
    return []


@pytest.fixture
async def pooled(
    state_dir: Path, request: pytest.FixtureRequest, events: list[str]
) -> AsyncIterator[LocalProvider]:
    """A provider of this test's own with a started pool of two (closed afterwards)."""
    directory = state_dir / f"pool{abs(hash(request.node.name)) % 10**6}"
    provider = LocalProvider(local_config(directory, warm_pool=2))
    provider.pool.start(events.append)
    try:
        yield provider
    finally:
        await provider.aclose()
        await provider.destroy_all()


async def test_the_pool_fills_to_its_size_and_no_further(
    pooled: LocalProvider, events: list[str]
) -> None:
    # When the pool of two is started and has filled
    await pooled.pool.filled()
    # Then two live jails wait, and only two (the fill stopped there)
    assert pooled.pool.ready == 2
    assert len(_pooled_dirs(pooled.config.state_dir)) == 2
    assert events == ["pooled", "pooled"]


async def test_a_new_sandbox_takes_a_waiting_jail_and_the_pool_refills(
    pooled: LocalProvider, events: list[str]
) -> None:
    await pooled.pool.filled()
    makers = {int(p.split("-")[1], 16) for p in _pooled_dirs(pooled.config.state_dir)}
    assert makers == {os.getpid()}  # every pooled jail names the process that made it
    before = {
        h.pid for h in map(pooled.find, _pooled_dirs(pooled.config.state_dir)) if h is not None
    }
    # When a sandbox is provisioned
    handle = await pooled.provision("sbx-from-pool")
    # Then it is one of the waiting jails, under its new id, and it works
    assert handle.pid in before
    assert handle.sandbox_id == "sbx-from-pool"
    assert pooled.find("sbx-from-pool") == handle
    assert Path(handle.socket_path or "").parent.name == "sbx-from-pool"
    async with pooled.connect(handle) as client:
        assert (await client.exec("hello", "echo hi", timeout_s=10)).stdout == "hi\n"
    # And the pool starts another, back to two waiting, never more
    await pooled.pool.filled()
    assert pooled.pool.ready == 2
    assert len(_pooled_dirs(pooled.config.state_dir)) == 2
    assert events.count("pool_hit") == 1
    await pooled.destroy(handle)


async def test_a_pooled_jail_serves_one_session_and_is_never_reused(
    pooled: LocalProvider, events: list[str]
) -> None:
    await pooled.pool.filled()
    # Given a session's sandbox from the pool, used: a file written, a command run
    first = await pooled.provision("sbx-first")
    async with pooled.connect(first) as client:
        await client.write_file("/workspace/notes.txt", b"incident 42")
        await client.exec("toolu_first", "echo secret-output", timeout_s=10)
    # When that session is done with it and the next session asks for a sandbox
    await pooled.destroy(first)
    await pooled.pool.filled()
    second = await pooled.provision("sbx-second")
    # Then the next one is another, fresh jail: the first is gone, nothing of it is seen
    assert events.count("pool_hit") == 2  # both came from the pool
    assert not _alive(first)
    assert second.pid != first.pid
    async with pooled.connect(second) as client:
        assert [e.name for e in await client.list_dir("/workspace")] == []
        assert await client.get_process("toolu_first") is None
        env = (await client.exec("env", "env", timeout_s=10)).stdout
    names = {line.split("=", 1)[0] for line in env.splitlines() if "=" in line}
    assert names <= {"PATH", "HOME", "LANG", "SHELL", "PWD", "SHLVL", "_"}, env
    assert first.pid not in {
        h.pid for h in map(pooled.find, _pooled_dirs(pooled.config.state_dir)) if h is not None
    }
    await pooled.destroy(second)


async def test_closing_the_provider_destroys_every_waiting_jail(pooled: LocalProvider) -> None:
    await pooled.pool.filled()
    waiting = [h for h in map(pooled.find, _pooled_dirs(pooled.config.state_dir)) if h]
    assert len(waiting) == 2
    assert all(map(_alive, waiting))
    # When the provider is closed (a worker stopping)
    await pooled.aclose()
    # Then no pooled jail is left, running or on disk, and none is made any more
    assert not any(map(_alive, waiting))
    assert _pooled_dirs(pooled.config.state_dir) == []
    assert pooled.pool.take("sbx-after-close") is None


async def test_closing_while_a_jail_starts_for_the_pool_leaves_nothing(
    pooled: LocalProvider,
) -> None:
    # Given a pool that has begun to start its first jail (its directory is there)
    directory = pooled.config.state_dir
    await wait_for(lambda: any(directory.glob(f"{PREFIX}*")), what="a pooled jail starting")
    # When it is closed before that jail is ready
    assert pooled.pool.ready == 0
    await pooled.aclose()
    # Then that jail too was destroyed: nothing of the pool is left, not even a directory
    assert list(directory.glob(f"{PREFIX}*")) == []
    assert pooled.pool.ready == 0


async def test_a_pool_of_zero_starts_nothing(state_dir: Path) -> None:
    provider = LocalProvider(local_config(state_dir / "pool-off", warm_pool=0))
    provider.pool.start()
    await provider.pool.filled()
    assert provider.pool.take("sbx-none") is None
    assert _pooled_dirs(provider.config.state_dir) == []
    handle = await provider.provision("sbx-cold")  # the ordinary path
    try:
        assert _alive(handle)
        assert _pooled_dirs(provider.config.state_dir) == []
    finally:
        await provider.destroy(handle)
        await provider.aclose()


async def test_an_unstarted_pool_makes_no_jail(state_dir: Path) -> None:
    # A provider made for a look (doctor, the clean-up paths) never starts its pool
    provider = LocalProvider(local_config(state_dir / "pool-idle", warm_pool=2))
    handle = await provider.provision("sbx-look")
    try:
        assert provider.pool.ready == 0
        assert _pooled_dirs(provider.config.state_dir) == []
    finally:
        await provider.destroy(handle)
        await provider.aclose()


def test_the_pool_size_is_bounded(state_dir: Path) -> None:
    provider = LocalProvider(local_config(state_dir / "pool-bound"))
    with pytest.raises(ValueError, match="0 to 32"):
        WarmPool(provider, 33)
    with pytest.raises(ValueError, match="0 to 32"):
        WarmPool(provider, -1)


async def test_a_dead_jail_in_the_pool_is_not_handed_out(pooled: LocalProvider) -> None:
    await pooled.pool.filled()
    waiting = [h for h in map(pooled.find, _pooled_dirs(pooled.config.state_dir)) if h]
    # Given both waiting jails died (killed from outside)
    for handle in waiting:
        os.kill(handle.pid or 0, signal.SIGKILL)
    await wait_for(lambda: not any(map(_alive, waiting)), what="the pooled jails to die")
    # When a sandbox is provisioned
    handle = await pooled.provision("sbx-not-dead")
    # Then it is a live jail of its own, not one of the dead ones
    assert _alive(handle)
    assert handle.pid not in {h.pid for h in waiting}
    await pooled.destroy(handle)


async def test_only_the_pooled_jails_of_dead_processes_are_orphans(
    pooled: LocalProvider,
) -> None:
    await pooled.pool.filled()
    # Given a pooled jail left by a process that died (its maker's pid and start time)
    dead = pool_id(pid=4_194_000, ticks=1)
    assert not held_by_live_process(dead)
    left = await pooled.provision(dead)
    # Then the provider lists it (the reaper takes it) but not this live process's pool
    listed = {h.sandbox_id for h in await pooled.list_sandboxes()}
    assert dead in listed
    assert not listed & (set(_pooled_dirs(pooled.config.state_dir)) - {dead})
    await pooled.destroy(left)


async def test_a_pooled_jail_whose_maker_died_while_it_started_is_found_and_ended(
    pooled: LocalProvider,
) -> None:
    # Given a pooled jail whose maker died after starting it, before recording its handle
    dead = pool_id(pid=4_194_001, ticks=1)
    started = await pooled.provision(dead)
    (pooled.config.state_dir / dead / "handle.json").unlink()
    assert pooled.find(dead) is None
    # Then the provider still lists it, with its jail's init and cgroup found
    listed = {h.sandbox_id: h for h in await pooled.list_sandboxes()}
    assert listed[dead].pid == started.pid
    assert listed[dead].cgroup == started.cgroup
    # And destroying what was listed ends the jail and its directory
    await pooled.destroy(listed[dead])
    assert not _alive(started)
    assert not (pooled.config.state_dir / dead).exists()


async def test_a_jail_that_cannot_be_handed_out_is_ended_without_touching_its_replacement(
    pooled: LocalProvider,
) -> None:
    await pooled.pool.filled()
    # Given waiting jails whose new handle cannot be written once renamed (a directory
    # stands where it goes)
    for name in _pooled_dirs(pooled.config.state_dir):
        (pooled.config.state_dir / name / "handle.json").unlink()
        (pooled.config.state_dir / name / "handle.json").mkdir()
    # When a sandbox is provisioned, it is started cold (the pooled jail is ended)
    handle = await pooled.provision("sbx-cold-instead")
    await pooled.aclose()  # and the pool's background work, the ending included, is done
    # Then the cold jail is whole: its directory, socket and handle are where they were
    assert pooled.find("sbx-cold-instead") == handle
    async with pooled.connect(handle) as client:
        assert (await client.exec("after", "echo whole", timeout_s=10)).stdout == "whole\n"
    await pooled.destroy(handle)
