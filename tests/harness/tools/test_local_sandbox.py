"""The sandbox-path tools against a real local sandbox (bubblewrap + the SBX/1 server).

The rest of the tool tests use ``JailWorkspace``; these check the same behaviour through
``sandbox_client`` and the harness's adapter, the way production runs it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import Checkpoint, Requester, WorkspaceRefused, run_tool, tool_specs
from harness.sandbox.session import SandboxWorkspaces
from sandbox_client import LocalConfig, LocalProvider, SandboxError, SandboxHandle, SandboxManager
from tests.conftest import require_bwrap
from tests.harness.tool_support import STATE_CURRENT, SessionDriver, error_text, open_store


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    require_bwrap()
    state = Path(tempfile.mkdtemp(prefix="wr-tools-"))  # Unix socket paths must stay short
    provider = LocalProvider(LocalConfig(state_dir=state, network="none"))
    manager = SandboxManager(provider)
    cp = Checkpoint("s-local", "T-LOCAL", "C1", Requester("U1"))
    workspace = SandboxWorkspaces(manager).open(cp)
    try:
        async with open_store(None, tmp_path) as store:
            yield SessionDriver(store, workspace, org_id="T-LOCAL")
    finally:
        handle = workspace.handle_json()
        await manager.aclose()
        if handle is not None:
            with contextlib.suppress(SandboxError, OSError):
                await provider.destroy(SandboxHandle.from_json(handle))
        await provider.aclose()
        shutil.rmtree(state, ignore_errors=True)


async def test_bash_runs_in_the_real_sandbox_and_reports_exit_codes(agent: SessionDriver) -> None:
    ok = await agent.call("Bash", {"command": "pwd; echo err >&2"})
    failed = await agent.call("Bash", {"command": "echo nope; exit 4"})

    assert ok.content == "/workspace\nerr"
    assert failed.is_error
    assert failed.content == "Exit code 4\nnope"


async def test_bash_timeout_in_the_real_sandbox_is_reported(agent: SessionDriver) -> None:
    outcome = await agent.call("Bash", {"command": "sleep 20", "timeout": 500})

    assert outcome.is_error
    assert outcome.content == "Exit code 143\nCommand timed out after 0.5s"


async def test_file_tools_round_trip_through_the_real_sandbox(agent: SessionDriver) -> None:
    created = await agent.call(
        "Write", {"file_path": "/workspace/conf/app.yaml", "content": "replicas: 2\nimage: v1\n"}
    )
    edited = await agent.call(
        "Edit", {"file_path": "/workspace/conf/app.yaml", "old_string": "v1", "new_string": "v2"}
    )
    read = await agent.call("Read", {"file_path": "/workspace/conf/app.yaml"})
    missing = await agent.call("Read", {"file_path": "/workspace/nope.txt"})

    assert (
        created.content == "File created successfully at: /workspace/conf/app.yaml" + STATE_CURRENT
    )
    assert edited.content.startswith(
        "The file /workspace/conf/app.yaml has been updated successfully." + STATE_CURRENT
    )
    assert read.content == "1\treplicas: 2\n2\timage: v2\n3"
    assert missing.content.startswith("File does not exist.")


async def test_glob_and_grep_run_ripgrep_inside_the_real_sandbox(agent: SessionDriver) -> None:
    await agent.call(
        "Bash",
        {
            "command": "mkdir -p logs && printf 'ok\\nERROR db pool\\n' > logs/a.log && "
            "touch -d '2020-01-01' logs/a.log && printf 'ERROR cache\\n' > b.log"
        },
    )

    glob = await agent.call("Glob", {"pattern": "**/*.log"})
    files = await agent.call("Grep", {"pattern": "ERROR"})
    content = await agent.call("Grep", {"pattern": "db", "output_mode": "content", "-B": 1})

    assert glob.content == "/workspace/logs/a.log\n/workspace/b.log"
    assert files.content == "Found 2 files\n/workspace/b.log\n/workspace/logs/a.log"
    assert content.content == "/workspace/logs/a.log-1-ok\n/workspace/logs/a.log:2:ERROR db pool"


async def test_a_bash_call_is_recovered_from_the_sandboxs_record_not_rerun(
    agent: SessionDriver,
) -> None:
    command = {"command": "echo x >> runs.txt; wc -l < runs.txt"}
    await agent.call("Bash", command, tool_use_id="toolu_local_once")

    recovered = await run_tool("Bash", command, agent.context("toolu_local_once"), recovering=True)
    never_ran = await run_tool("Bash", command, agent.context("toolu_local_never"), recovering=True)

    assert recovered is not None
    assert recovered.content == "1"
    assert never_ran is None


# ------------------------------------------------ paths outside the roots (issue 12.1)

OUTSIDE = ("/etc/os-release", "/tmp/x", "/", "/etc/hosts")


async def test_file_tools_on_paths_outside_the_roots_are_tool_errors_pointing_to_bash(
    agent: SessionDriver,
) -> None:
    for path in OUTSIDE:
        read = await agent.call("Read", {"file_path": path})
        write = await agent.call("Write", {"file_path": path, "content": "x"})
        edit = await agent.call("Edit", {"file_path": path, "old_string": "a", "new_string": "b"})

        assert error_text(read).startswith(f"{path} is outside the paths Read can use.")
        assert f"use Bash (for example `cat {path}`" in error_text(read)
        assert error_text(write).startswith(f"{path} is outside the paths Write can use.")
        assert error_text(edit).startswith(f"{path} is outside the paths Edit can use.")


async def test_look_alikes_of_the_shared_roots_get_a_did_you_mean(agent: SessionDriver) -> None:
    cyrillic = "/mem\u043ery/x.md"  # "о" is U+043E

    upper = await agent.call("Write", {"file_path": "/Memory/x.md", "content": "x"})
    look_alike = await agent.call("Read", {"file_path": cyrillic})
    grep = await agent.call("Grep", {"pattern": "x", "path": "/Memory"})

    assert "Did you mean /memory/x.md?" in error_text(upper)
    assert "Did you mean /memory/x.md?" in error_text(look_alike)
    assert error_text(grep) == "Path does not exist: /Memory. Did you mean /memory?"


async def test_the_sandbox_refusing_a_path_is_a_permanent_error_not_an_outage(
    agent: SessionDriver,
) -> None:
    # The root cause of issue 12.1: the client's InvalidPath became WorkspaceUnavailable,
    # which the durable layer retries as a crash.
    with pytest.raises(WorkspaceRefused) as refused:
        await agent.workspace.read_file("/etc/os-release")
    with pytest.raises(WorkspaceRefused):
        await agent.workspace.write_file("/tmp/x", b"x")

    assert refused.value.path == "/etc/os-release"
    assert "outside /workspace" in refused.value.reason


# ------------------------------------------------ background processes (issue 12.3)


async def test_background_processes_end_with_the_bash_call_that_started_them(
    agent: SessionDriver,
) -> None:
    # Given: a call that leaves two processes running in the background
    started = await agent.call(
        "Bash",
        {"command": "sleep 300 & nohup sleep 301 >/dev/null 2>&1 & echo started"},
    )
    assert started.content == "started"

    # When: the next call looks for them
    left = await agent.call("Bash", {"command": "pgrep -x sleep || echo none"})

    # Then: none is left
    assert left.content == "none"


async def test_the_bash_description_says_background_processes_end_with_the_call() -> None:
    description = next(s.description for s in tool_specs() if s.name == "Bash")

    assert "is stopped when the call ends" in description


async def test_glob_and_grep_see_the_whole_sandbox_where_bash_does(agent: SessionDriver) -> None:
    glob = await agent.call("Glob", {"pattern": "os-release", "path": "/etc"})
    grep = await agent.call("Grep", {"pattern": "^ID=", "path": "/etc/os-release"})

    assert glob.content == "/etc/os-release"
    assert grep.content == "Found 1 file\n/etc/os-release"
