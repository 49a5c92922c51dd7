"""Jails a SIGKILLed process left that nobody else can use are ended by the next to start.

Each test runs the jails' maker as a real process (``_CHILD``) and SIGKILLs it; the jails
it left are ended by the next provider whose pool starts, in the same state directory or
any other, and a live process's jails, or one handed out to a session, are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from sandbox_client import LocalProvider, SandboxHandle
from sandbox_client.providers.local import probe, procfs
from sandbox_client.providers.local.orphans import PREFIX
from sandbox_client.providers.local.pool import pool_id

from ..conftest import local_config, wait_for

_CHILD = """
import asyncio, sys
from pathlib import Path
from sandbox_client import LocalConfig, LocalProvider

async def main(state_dir: str, size: str, sandbox_id: str, bwrap: str) -> None:
    config = LocalConfig(state_dir=Path(state_dir), warm_pool=int(size), bwrap=bwrap)
    provider = LocalProvider(config)
    provider.pool.start()
    if int(size):
        await provider.pool.filled()
    if sandbox_id:  # from the pool if it has one
        await provider.provision(sandbox_id)
    await provider.pool.filled()
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.read)  # until the test kills it

asyncio.run(main(*sys.argv[1:]))
"""

_STOPPING_BWRAP = """#!/bin/sh
# bwrap, after stopping the process that starts the jail (named in its directory's
# ``maker`` file): the jail starts while its maker can no longer record its handle
before=""; last=""
for arg in "$@"; do
    if [ "$before" = --ro-bind ] && [ "$arg" = /run/warroom ]; then run="$last"; fi
    before="$last"; last="$arg"
done
read -r maker _ < "${run%/run}/maker" && kill -STOP "$maker"
exec BWRAP "$@"
"""


class Maker:
    """A process making jails in ``state_dir`` (``_CHILD``), killed by the test."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(
        cls, state_dir: Path, *, size: int, sandbox_id: str = "", bwrap: str = "bwrap"
    ) -> Maker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _CHILD, str(state_dir), str(size), sandbox_id, bwrap,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(process)

    async def ready(self) -> None:
        assert self.process.stdout is not None
        async with asyncio.timeout(30):
            assert await self.process.stdout.readline() == b"ready\n"

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stopped_then_killed(self, sandbox_dir: Callable[[], Path | None]) -> Path:
        """Once the maker stopped itself (``_STOPPING_BWRAP``) and the jail in
        ``sandbox_dir()`` serves, SIGKILL the maker; returns that directory."""
        await wait_for(lambda: procfs.state(self.process.pid) == "T", what="the maker stopped")
        directory = sandbox_dir()
        assert directory is not None
        socket = str(directory / "sbx.sock")
        await wait_for(lambda: probe.answers(socket, 1.0), what="the jail to serve")
        await self.kill()
        assert _binding(directory), "the half-started jail died with its maker"
        assert not (directory / "handle.json").exists()
        return directory


def _jails(state_dir: Path, prefix: str = PREFIX) -> list[SandboxHandle]:
    found = []
    for path in sorted(state_dir.glob(f"{prefix}*/handle.json")):
        found.append(SandboxHandle.from_json(path.read_text()))
    return found


def _alive(handle: SandboxHandle) -> bool:
    return procfs.is_alive(handle.pid or 0, handle.pid_start_ticks)


def _binding(directory: Path) -> list[int]:
    """The processes whose command line binds ``directory``'s run directory (its jail)."""
    marker = os.fsencode(directory / "run") + b"\0/run/warroom\0"
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if entry.isdigit() and marker in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _gone(handle: SandboxHandle) -> bool:
    """Nothing of the jail left: no process, no directory, no cgroup."""
    cgroups = [Path(p) for p in (handle.cgroup, *handle.limit_cgroups) if p]
    directory = Path(handle.state_dir or "")
    return not (_alive(handle) or directory.exists() or any(p.exists() for p in cgroups))


@pytest.fixture
async def dirs(state_dir: Path, request: pytest.FixtureRequest) -> AsyncIterator[list[Path]]:
    """Three state directories of this test's own (every jail in them ended afterwards)."""
    base = state_dir / f"orph{abs(hash(request.node.name)) % 10**6}"
    made = [base / name for name in ("a", "b", "c")]
    yield made
    for directory in made:
        provider = LocalProvider(local_config(directory))
        await provider.destroy_all()
        await provider.aclose()
    shutil.rmtree(base, ignore_errors=True)


async def _start_pool(state_dir: Path, size: int = 0) -> LocalProvider:
    """A provider whose pool has started (and so ended the orphans it found)."""
    provider = LocalProvider(local_config(state_dir, warm_pool=size))
    provider.pool.start()
    await provider.pool.filled()
    return provider


async def test_the_next_pool_ends_a_killed_makers_waiting_jails_not_the_one_it_handed_out(
    dirs: list[Path],
) -> None:
    # Given a process that filled a pool of two and gave one pooled jail to a session
    maker = await Maker.start(dirs[0], size=2, sandbox_id="sbx-handed-out")
    await maker.ready()
    await wait_for(lambda: len(_jails(dirs[0])) == 2, what="the pool refilled")
    waiting = _jails(dirs[0])
    handed_out = _jails(dirs[0], "sbx-handed-out")[0]
    # When it is SIGKILLed and another process's pool starts in the same state directory
    await maker.kill()
    assert all(map(_alive, waiting))
    successor = await _start_pool(dirs[0])
    try:
        # Then the waiting jails are ended at once: no process, directory or cgroup left
        assert all(map(_gone, waiting)), waiting
        # And the session's jail (made from the pool, so its cgroup bears the pool's name)
        # still runs and is not an orphan
        assert _alive(handed_out)
        assert PREFIX in (handed_out.cgroup or "")
        assert [h.sandbox_id for h in await successor.list_sandboxes(older_than_s=60)] == []
    finally:
        await successor.destroy(handed_out)
        await successor.aclose()


async def test_a_pool_ends_a_killed_makers_jails_of_another_state_directory_never_a_live_ones(
    dirs: list[Path],
) -> None:
    # Given two processes with a filled pool each, in their own state directories
    killed, live = [await Maker.start(d, size=2) for d in dirs[:2]]
    await killed.ready()
    await live.ready()
    left, kept = _jails(dirs[0]), _jails(dirs[1])
    try:
        # When one is SIGKILLed (a killed test run: nobody opens its directory again)
        await killed.kill()
        # And a pool starts in a third state directory
        successor = await _start_pool(dirs[2])
        await successor.aclose()
        # Then the dead maker's jails are ended; the live one's still wait, listed by none
        assert all(map(_gone, left)), left
        assert all(map(_alive, kept))
        assert _jails(dirs[1]) == kept
        same_dir = LocalProvider(local_config(dirs[1]))
        assert await same_dir.list_sandboxes() == ()
    finally:
        await live.kill()


async def test_a_killed_makers_jails_are_ended_even_once_their_directory_is_deleted(
    dirs: list[Path],
) -> None:
    # Given a process with a filled pool, SIGKILLed, whose state directory was then
    # deleted (as a killed test run's clean-up does): nothing names its jails any more
    killed = await Maker.start(dirs[0], size=2)
    await killed.ready()
    left = _jails(dirs[0])
    await killed.kill()
    shutil.rmtree(dirs[0])
    assert all(map(_alive, left))
    # When a pool starts in another state directory
    successor = await _start_pool(dirs[1])
    await successor.aclose()
    # Then they are ended, and their cgroups removed
    assert all(map(_gone, left)), left


async def test_a_pooled_jail_half_started_by_a_killed_maker_is_ended_by_the_next_pool(
    dirs: list[Path], tmp_path: Path
) -> None:
    # Given a maker stopped while its first pooled jail starts, then SIGKILLed: the jail
    # runs, but its handle was never written
    bwrap = _stopping_bwrap(tmp_path)
    maker = await Maker.start(dirs[0], size=1, bwrap=bwrap)
    directory = await maker.stopped_then_killed(lambda: next(dirs[0].glob(f"{PREFIX}*"), None))
    # When the next pool starts in that state directory
    successor = await _start_pool(dirs[0])
    await successor.aclose()
    # Then the jail, its directory and its cgroup are gone
    assert _binding(directory) == []
    assert not directory.exists()
    assert not any(successor.freezer.parent.glob(f"{directory.name}.*"))  # type: ignore[union-attr]


async def test_a_session_jail_half_started_by_a_killed_maker_is_an_orphan_at_once(
    dirs: list[Path], tmp_path: Path
) -> None:
    # Given a maker SIGKILLed while a session's jail starts (no pool: the cold path)
    bwrap = _stopping_bwrap(tmp_path)
    maker = await Maker.start(dirs[0], size=0, sandbox_id="sbx-half", bwrap=bwrap)
    directory = await maker.stopped_then_killed(lambda: dirs[0] / "sbx-half")
    # Then the reaper's listing names it at once (nobody holds its handle), found running
    provider = LocalProvider(local_config(dirs[0]))
    (listed,) = await provider.list_sandboxes(older_than_s=60)
    assert listed.sandbox_id == "sbx-half"
    assert listed.pid in _binding(directory)
    # And the next pool to start ends it
    successor = await _start_pool(dirs[0])
    await successor.aclose()
    assert _binding(directory) == []
    assert not directory.exists()


def _stopping_bwrap(where: Path) -> str:
    """A ``bwrap`` that first stops the jail's maker (``_STOPPING_BWRAP``)."""
    real = shutil.which("bwrap")
    assert real is not None
    script = where / "bwrap-stopping-maker"
    script.write_text(_STOPPING_BWRAP.replace("BWRAP", real))
    script.chmod(0o755)
    return str(script)


async def test_a_pooled_jail_caught_while_it_is_handed_out_is_an_orphan_only_if_its_maker_died(
    dirs: list[Path],
) -> None:
    # Given a pooled jail caught between the two steps of its hand-out: its directory
    # renamed to the session's sandbox id, its handle still the pooled one's
    provider = LocalProvider(local_config(dirs[0]))
    pooled = await provider.provision(pool_id())
    moving = dirs[0] / "sbx-being-handed-out"
    os.rename(dirs[0] / pooled.sandbox_id, moving)
    os.utime(moving / "handle.json", (0, 0))  # written long ago: past any grace
    # Then while its maker (this process) lives, the reaper's listing leaves it alone
    assert await provider.list_sandboxes(older_than_s=60) == ()
    # And once its maker is dead (nobody received the handle), it is listed where it is
    (moving / "maker").write_text("4194000 1\n")
    (listed,) = await provider.list_sandboxes(older_than_s=60)
    assert (listed.sandbox_id, listed.pid) == ("sbx-being-handed-out", pooled.pid)
    await provider.destroy(listed)
    assert not _alive(pooled)
    assert not moving.exists()
