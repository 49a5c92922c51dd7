"""Each sandbox limit, hit by a bounded run in a real jail: the run ends, the sandbox
says which limit it hit, and the host and other sandboxes are unaffected."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sandbox_client import JailLimits, LocalProvider, SandboxClient, SandboxHandle, SandboxUsage

from ..conftest import local_config

MIB = 1024 * 1024
LIMITS = JailLimits(
    memory_max_bytes=96 * MIB,
    pids_max=48,
    cpus=0.2,
    workspace_max_bytes=8 * MIB,
    tmp_max_bytes=4 * MIB,
    shm_max_bytes=2 * MIB,
)


@pytest.fixture(scope="module")
def limited(state_dir: Path) -> LocalProvider:
    """A provider whose sandboxes have small limits."""
    return LocalProvider(local_config(state_dir / "lim", limits=LIMITS))


@pytest.fixture
async def jail(
    limited: LocalProvider, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[SandboxHandle, SandboxClient]]:
    """A limited sandbox of this test's own and a client of it."""
    handle = await limited.provision(f"lim-{request.node.name[5:40].replace('_', '-')}")
    try:
        async with limited.connect(handle) as client:
            yield handle, client
    finally:
        await limited.destroy(handle)


async def run(
    provider: LocalProvider, handle: SandboxHandle, client: SandboxClient, command: str
) -> tuple[int | None, str, tuple[str, ...]]:
    """Exit code, stderr and the limits hit by ``command``."""
    before = await provider.usage(handle)
    record = await client.exec(f"c{abs(hash(command))}", command, timeout_s=60)
    after = await provider.usage(handle)
    return record.exit_code, record.stderr, after.hits_since(before, failed=record.exit_code != 0)


async def test_allocating_past_the_memory_limit_ends_the_process_and_says_why(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jail
    grab = "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'"

    code, stderr, hits = await run(limited, handle, client, grab)

    assert code != 0
    if limited.enforcement()["memory"].startswith("cgroup"):
        assert code == 137  # SIGKILL from the kernel's OOM killer, inside the jail only
        assert hits == ("Killed by the sandbox memory limit (96 MiB): a process used more "
                        "memory than the sandbox allows.",)  # fmt: skip
    else:  # RLIMIT_AS: the allocation itself fails
        assert "MemoryError" in stderr
    # the sandbox's own server survived and answers
    assert (await client.exec("after-oom", "echo alive", timeout_s=10)).stdout == "alive\n"


async def test_forking_past_the_process_limit_is_refused_and_said(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jail
    if not limited.enforcement()["pids"].startswith("cgroup"):
        pytest.skip("!!! SKIPPED: no pids cgroup here (RLIMIT_NPROC does not bind root)")
    fork = (
        "python3 -c 'import os, time\nfor i in range(200):\n"
        "  if os.fork() == 0: time.sleep(2); os._exit(0)'"
    )

    code, stderr, hits = await run(limited, handle, client, fork)

    assert code != 0
    assert "Resource temporarily unavailable" in stderr
    assert hits == (
        "Hit the sandbox process limit (48 processes and threads): new processes could not start.",
    )


async def test_writing_past_the_workspace_size_fails_with_no_space_and_says_so(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jail

    code, stderr, hits = await run(
        limited, handle, client, "dd if=/dev/zero of=/workspace/big bs=1M count=64"
    )

    assert code != 0
    assert "No space left on device" in stderr
    assert hits == (
        "No space left on /workspace: it is full (8 MiB); delete files there to make room.",
    )
    # deleting the file makes room again, and nothing more is said
    code, _, hits = await run(limited, handle, client, "rm /workspace/big; echo ok > /workspace/x")
    assert (code, hits) == (0, ())


async def test_a_busy_loop_gets_no_more_cpu_than_the_limit(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient]
) -> None:
    _, client = jail
    if limited.enforcement()["cpu"] == "none":
        pytest.skip("!!! SKIPPED: no cpu cgroup here")
    spin = (
        "python3 -c 'import time\nt = time.monotonic()\n"
        "while time.monotonic() - t < 1.5: pass\nprint(time.process_time())'"
    )

    code, stdout_and_err = await _stdout(client, spin)

    assert code == 0
    assert float(stdout_and_err) < 0.2 * 1.5 * 2  # at most 0.2 cores, with slack for rounding


async def _stdout(client: SandboxClient, command: str) -> tuple[int | None, str]:
    record = await client.exec("spin", command, timeout_s=30)
    return record.exit_code, record.stdout.strip()


async def test_one_sandbox_hitting_its_limits_leaves_another_untouched(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jail
    other = await limited.provision("lim-bystander")
    try:
        async with limited.connect(other) as bystander:
            await bystander.write_file("/workspace/keep.txt", b"mine")
            hog = "dd if=/dev/zero of=/workspace/f bs=1M count=64; python3 -c 'bytearray(400<<20)'"
            await asyncio.gather(
                run(limited, handle, client, hog), bystander.exec("b", "sleep 0.2", timeout_s=10)
            )
            # the bystander's workspace is its own, with room, and no limit was hit there
            assert await bystander.read_file("/workspace/keep.txt") == b"mine"
            usage = await limited.usage(other)
            assert usage.hits_since(SandboxUsage(oom_kills=0, pids_refusals=0)) == ()
            assert not usage.workspace_full
    finally:
        await limited.destroy(other)


async def test_the_host_reports_where_each_limit_is_enforced(limited: LocalProvider) -> None:
    found = limited.enforcement()

    assert set(found) == {"memory", "pids", "cpu", "workspace"}
    assert found["workspace"] == "tmpfs"
    assert found["memory"] in ("cgroup2", "cgroup1", "rlimit")
    assert found["cpu"] in ("cgroup2", "cgroup1", "none")


def test_limits_refuse_values_that_cannot_start_a_sandbox() -> None:
    with pytest.raises(ValueError, match="memory_max_bytes"):
        JailLimits(memory_max_bytes=MIB)
    with pytest.raises(ValueError, match="pids_max"):
        JailLimits(pids_max=-1)
