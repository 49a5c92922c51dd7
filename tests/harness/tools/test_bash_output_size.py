"""A command whose output the sandbox server had to cut (it keeps the head and tail of each
stream, ``max_output_bytes``) is reported at the size it produced, through a real sandbox."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import Checkpoint, Requester, SandboxWorkspaces
from sandbox_client import LocalConfig, LocalProvider, SandboxManager
from tests.harness.tool_support import SessionDriver, open_store

pytestmark = pytest.mark.bwrap


@pytest.fixture
async def agent() -> AsyncIterator[SessionDriver]:
    state = Path(tempfile.mkdtemp(prefix="wr-out-"))  # short: socket paths < 108 bytes
    provider = LocalProvider(LocalConfig(state_dir=state / "sbx"))
    manager = SandboxManager(provider)
    cp = Checkpoint(session_id="s-out", org_id="T1", channel_id="C-1", requester=Requester("U1"))
    try:
        async with open_store(None, state) as store:
            workspace = SandboxWorkspaces(manager, ()).open(cp)
            yield SessionDriver(store, workspace, org_id="T1")
    finally:
        await manager.aclose()
        await provider.destroy_all()
        shutil.rmtree(state, ignore_errors=True)


async def test_a_50_mb_output_is_said_to_be_50_mb_not_what_the_sandbox_kept(
    agent: SessionDriver,
) -> None:
    # Given a command printing 50 MiB (the server keeps 1 MiB of it: head and tail)
    outcome = await agent.call("Bash", {"command": "head -c 52428800 /dev/zero | tr '\\0' x"})

    # Then the model is told the size it produced, and how much of it was kept
    saved = outcome.content.split("\n")[1]
    assert saved.startswith("Output too large (50MB; the sandbox kept its first and last 1MB)")
    assert "Full output saved to: /workspace/.warroom/tool-results/" in saved
