"""MCP tools in the toolbox, against the real server-everything: listed after the built-in
tools, called through ``run_tool``, every failure a tool error, big results kept in a file,
a call interrupted by a crash never sent again."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import McpServers, ToolContext, run_tool, tool_specs
from harness.tools.mcp_call import mcp_specs
from memory_store import FileStore
from tests.harness.mcp.support import children_named, config_text, everything, running
from tests.harness.tool_support import JailWorkspace, open_store

CHANNEL = "C-INCIDENT"
LONG_CALL = {"duration": 30, "steps": 3}


@pytest.fixture
async def servers() -> AsyncIterator[McpServers]:
    text = config_text(everything=everything(), payments=everything(channels=["C-PAY"]))
    async with running(text) as started:
        yield started


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileStore]:
    async with open_store(None, tmp_path / "db") as opened:
        yield opened


def context(
    store: FileStore, root: Path, servers: McpServers | None, channel: str = CHANNEL
) -> ToolContext:
    root.mkdir(exist_ok=True)
    return ToolContext(
        store=store,
        workspace=JailWorkspace(root),
        org_id="T-MCP",
        channel_id=channel,
        session_id="s-mcp",
        actor="agent",
        tool_use_id="toolu_mcp_1",
        mcp=servers,
    )


async def test_mcp_tools_follow_the_built_in_tools_and_serve_only_their_channels(
    servers: McpServers,
) -> None:
    here = [s.name for s in tool_specs(mcp_specs(servers.tools(CHANNEL)))]
    built_in = [s.name for s in tool_specs()]
    assert here[: len(built_in)] == built_in
    assert "mcp__everything__echo" in here[len(built_in) :]
    assert not [n for n in here if n.startswith("mcp__payments__")]
    in_payments = [s.name for s in mcp_specs(servers.tools("C-PAY"))]
    assert "mcp__payments__echo" in in_payments
    assert in_payments == sorted(in_payments)


async def test_an_mcp_tool_runs_through_run_tool(
    servers: McpServers, store: FileStore, tmp_path: Path
) -> None:
    outcome = await run_tool(
        "mcp__everything__echo", {"message": "pods OOM"}, context(store, tmp_path / "ws", servers)
    )
    assert (outcome.content, outcome.is_error) == ("Echo: pods OOM", False)


async def test_a_tool_of_a_server_for_other_channels_is_refused_as_unknown(
    servers: McpServers, store: FileStore, tmp_path: Path
) -> None:
    outcome = await run_tool(
        "mcp__payments__echo", {"message": "x"}, context(store, tmp_path / "ws", servers)
    )
    assert outcome.is_error
    assert "No such tool available: mcp__payments__echo" in outcome.content


async def test_mcp_tools_without_servers_are_unknown_tools(
    store: FileStore, tmp_path: Path
) -> None:
    outcome = await run_tool(
        "mcp__everything__echo", {"message": "x"}, context(store, tmp_path / "ws", None)
    )
    assert outcome.is_error
    assert "No such tool available" in outcome.content


async def test_an_error_result_of_the_server_is_a_tool_error(
    servers: McpServers, store: FileStore, tmp_path: Path
) -> None:
    outcome = await run_tool(
        "mcp__everything__echo", {"message": 42}, context(store, tmp_path / "ws", servers)
    )
    assert outcome.is_error
    assert outcome.content


async def test_a_hanging_call_times_out_as_a_tool_error(store: FileStore, tmp_path: Path) -> None:
    async with running(config_text(everything=everything()), call_timeout_s=1.5) as servers:
        ctx = context(store, tmp_path / "ws", servers)
        outcome = await asyncio.wait_for(
            run_tool("mcp__everything__trigger-long-running-operation", LONG_CALL, ctx), 20
        )
    assert outcome.is_error
    assert "did not answer within 1.5 s" in outcome.content
    assert "unknown" in outcome.content


async def test_a_server_killed_mid_call_is_a_tool_error(store: FileStore, tmp_path: Path) -> None:
    async with running(config_text(everything=everything())) as servers:
        ctx = context(store, tmp_path / "ws", servers)
        call = asyncio.create_task(
            run_tool("mcp__everything__trigger-long-running-operation", LONG_CALL, ctx)
        )
        [pid] = children_named("mcp-server-everything")
        os.kill(pid, signal.SIGKILL)
        outcome = await asyncio.wait_for(call, 30)
        assert outcome.is_error
        assert "mcp__everything__trigger-long-running-operation is unavailable" in outcome.content
        # and while the server is down its tools are not offered; a call says why it fails
        assert not servers.tools(CHANNEL)
        again = await run_tool("mcp__everything__echo", {"message": "x"}, ctx)
        assert again.is_error
        assert "the everything server is down: connection lost" in again.content


async def test_a_five_megabyte_result_comes_back_as_a_persisted_output_preview(
    servers: McpServers, store: FileStore, tmp_path: Path
) -> None:
    big = "line of a big log\n" * (5 * 1024 * 1024 // 18)
    outcome = await run_tool(
        "mcp__everything__echo", {"message": big}, context(store, tmp_path / "ws", servers)
    )
    assert outcome.content.startswith("<persisted-output>\nOutput too large (5MB).")
    assert "/workspace/.warroom/tool-results/toolu_mcp_1.txt" in outcome.content
    assert len(outcome.content) < 3000
    kept = (tmp_path / "ws" / ".warroom" / "tool-results" / "toolu_mcp_1.txt").read_text()
    assert kept == "Echo: " + big


async def test_a_call_interrupted_by_a_crash_has_an_unknown_outcome_and_is_not_sent_again(
    servers: McpServers, store: FileStore, tmp_path: Path
) -> None:
    ctx = context(store, tmp_path / "ws", servers)
    outcome = await run_tool(
        "mcp__everything__trigger-long-running-operation", LONG_CALL, ctx, recovering=True
    )
    assert outcome is None
