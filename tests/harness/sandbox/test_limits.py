"""The model is told which sandbox limit a Bash command hit (a real limited jail)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import Checkpoint, Requester
from harness.sandbox.session import SandboxWorkspaces
from sandbox_client import (
    JailLimits,
    LocalConfig,
    LocalProvider,
    SandboxError,
    SandboxHandle,
    SandboxManager,
)
from tests.conftest import require_bwrap
from tests.harness.tool_support import SessionDriver, open_store

MIB = 1024 * 1024
LIMITS = JailLimits(
    memory_max_bytes=64 * MIB,
    pids_max=32,
    cpus=1.0,
    workspace_max_bytes=4 * MIB,
    tmp_max_bytes=4 * MIB,
    shm_max_bytes=2 * MIB,
)


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    """A session whose Bash runs in a jail with small limits."""
    require_bwrap()
    state = Path(tempfile.mkdtemp(prefix="wr-lim-"))  # Unix socket paths must stay short
    provider = LocalProvider(LocalConfig(state_dir=state, network="none", limits=LIMITS))
    manager = SandboxManager(provider)
    cp = Checkpoint("s-limits", "T-LIM", "C1", Requester("U1"))
    workspace = SandboxWorkspaces(manager).open(cp)
    try:
        async with open_store(None, tmp_path) as store:
            yield SessionDriver(store, workspace, org_id="T-LIM")
    finally:
        handle = workspace.handle_json()
        await manager.aclose()
        if handle is not None:
            with contextlib.suppress(SandboxError, OSError):
                await provider.destroy(SandboxHandle.from_json(handle))
        shutil.rmtree(state, ignore_errors=True)


async def test_a_command_killed_by_the_memory_limit_says_so_in_its_result(
    agent: SessionDriver,
) -> None:
    result = await agent.call("Bash", {"command": "python3 -c 'bytearray(300 << 20)'"})

    assert result.is_error
    if LocalProvider(LocalConfig(Path("/"), limits=LIMITS)).enforcement()["memory"] == "rlimit":
        assert "MemoryError" in result.content
    else:
        assert result.content.startswith("Exit code 137\n")
        assert "Killed by the sandbox memory limit (64 MiB)" in result.content


async def test_a_full_workspace_is_named_in_the_result_until_room_is_made(
    agent: SessionDriver,
) -> None:
    full = await agent.call("Bash", {"command": "head -c 8M /dev/zero > /workspace/big"})
    still = await agent.call("Bash", {"command": "echo more >> /workspace/big"})
    freed = await agent.call("Bash", {"command": "rm /workspace/big && echo freed"})

    assert full.is_error
    assert "No space left on /workspace: it is full (4 MiB)" in full.content
    assert "No space left on /workspace" in still.content
    assert freed.content == "freed"


@pytest.mark.parametrize(("path", "size"), [("/tmp", "4 MiB"), ("/dev/shm", "2 MiB")])
async def test_a_full_tmp_or_dev_shm_is_named_in_the_bash_result(
    agent: SessionDriver, path: str, size: str
) -> None:
    full = await agent.call("Bash", {"command": f"head -c 8M /dev/zero > {path}/big"})
    freed = await agent.call("Bash", {"command": f"rm {path}/big && echo freed"})

    assert full.is_error
    assert f"No space left on {path}: it is full ({size})" in full.content
    assert freed.content == "freed"


async def test_a_write_past_the_workspace_size_is_a_tool_error_naming_the_limit(
    agent: SessionDriver,
) -> None:
    big = "x" * (6 * 1024 * 1024)

    refused = await agent.call("Write", {"file_path": "/workspace/big.txt", "content": big})
    small = await agent.call("Write", {"file_path": "/workspace/small.txt", "content": "ok"})

    assert refused.is_error
    assert "No space left on /workspace" in refused.content
    assert "4 MiB workspace; nothing was written" in refused.content
    assert not small.is_error
    assert (await agent.call("Bash", {"command": "ls /workspace"})).content == "small.txt"
