"""Deferred MCP tools (Claude Code's tool search), with the real server-everything: over the
threshold every MCP tool is sent with ``defer_loading`` behind ToolSearch; ToolSearch loads
definitions as ``tool_reference``s; a deferred tool runs only once loaded; through the step and
the strict fake Messages API the tool list keeps its bytes while tools get loaded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness import Inbound, McpServers, ToolContext, run_tool, tool_specs
from harness.tools.mcp_call import mcp_specs
from harness.tools.tool_search import NO_MATCH
from memory_store import FileStore
from tests.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from tests.harness.mcp.support import config_text, everything, running
from tests.harness.step_support import open_kit, prefix_stable, transcript_problems
from tests.harness.tool_support import JailWorkspace, open_store

ECHO = "mcp__everything__echo"
SUM = "mcp__everything__get-sum"


@pytest.fixture
async def deferring() -> AsyncIterator[McpServers]:
    """server-everything with a threshold its 13 tools exceed (500 tokens)."""
    async with running(config_text(everything=everything()), defer_above_tokens=500) as started:
        yield started


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileStore]:
    async with open_store(None, tmp_path / "db") as opened:
        yield opened


def context(store: FileStore, root: Path, servers: McpServers, **extra: Any) -> ToolContext:
    root.mkdir(exist_ok=True)
    return replace(
        ToolContext(
            store=store,
            workspace=JailWorkspace(root),
            org_id="T-MCP",
            channel_id="C-INCIDENT",
            session_id="s-search",
            actor="agent",
            tool_use_id="toolu_search_1",
            mcp=servers,
        ),
        **extra,
    )


async def test_over_the_threshold_mcp_tools_are_deferred_behind_tool_search(
    deferring: McpServers,
) -> None:
    specs = tool_specs(mcp_specs(deferring.tools()))
    built_in = tool_specs()
    assert specs[: len(built_in)] == built_in
    search, *mcp = specs[len(built_in) :]
    assert search.name == "ToolSearch"
    assert not search.defer_loading
    assert set(search.input_schema["properties"]) == {"query", "max_results"}
    assert all(s.defer_loading and s.name.startswith("mcp__everything__") for s in mcp)
    assert f"<available-deferred-tools>\n{mcp[0].name}\n" in search.description
    assert all(f"\n{s.name}\n" in search.description for s in mcp)
    assert '"defer_loading": true' not in str(built_in)


async def test_under_the_threshold_tools_are_sent_whole() -> None:
    async with running(config_text(everything=everything()), defer_above_tokens=100_000) as s:
        specs = mcp_specs(s.tools())
    assert specs
    assert not any(spec.defer_loading for spec in specs)
    assert "ToolSearch" not in [spec.name for spec in specs]


async def test_tool_search_loads_tools_by_name_or_by_keywords(
    deferring: McpServers, store: FileStore, tmp_path: Path
) -> None:
    ctx = context(store, tmp_path / "ws", deferring)
    chosen = await run_tool("ToolSearch", {"query": f"select:{ECHO},{SUM}"}, ctx)
    assert (chosen.tool_references, chosen.content, chosen.is_error) == ((ECHO, SUM), "", False)
    found = await run_tool("ToolSearch", {"query": "sum numbers", "max_results": 2}, ctx)
    assert found.tool_references[0] == SUM
    assert len(found.tool_references) <= 2
    required = await run_tool("ToolSearch", {"query": "+tiny image"}, ctx)
    assert required.tool_references == ("mcp__everything__get-tiny-image",)
    nothing = await run_tool("ToolSearch", {"query": "kubernetes pods"}, ctx)
    assert (nothing.content, nothing.tool_references) == (NO_MATCH, ())
    bad = await run_tool("ToolSearch", {"querry": "x"}, ctx)
    assert bad.is_error
    assert "`query` is missing" in bad.content


async def test_tool_search_is_unknown_when_nothing_is_deferred(
    store: FileStore, tmp_path: Path
) -> None:
    async with running(config_text(everything=everything())) as whole:
        outcome = await run_tool("ToolSearch", {"query": "echo"}, context(store, tmp_path, whole))
    assert outcome.is_error
    assert "No such tool available: ToolSearch" in outcome.content


async def test_a_deferred_tool_runs_only_once_its_definition_is_loaded(
    deferring: McpServers, store: FileStore, tmp_path: Path
) -> None:
    early = await run_tool(ECHO, {"message": "x"}, context(store, tmp_path / "ws", deferring))
    assert early.is_error
    assert f'ToolSearch with query "select:{ECHO}" first' in early.content
    loaded = context(store, tmp_path / "ws", deferring, loaded_tools=frozenset({ECHO}))
    outcome = await run_tool(ECHO, {"message": "now"}, loaded)
    assert (outcome.content, outcome.is_error) == ("Echo: now", False)


def search_then_call(request: RecordedRequest) -> Reply:
    """A model that can only call what it sees: load echo, call it, then answer."""
    last = request.messages[-1]["content"]
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
    if ECHO not in request.visible_tools:
        return Reply.tool("ToolSearch", {"query": f"select:{ECHO}"})
    if results and isinstance(results[0]["content"], list):
        return Reply.tool(ECHO, {"message": "payments are down"})
    return Reply.text(f"The server said: {results[0]['content']}")


async def test_through_the_step_tools_load_without_changing_the_tool_list(
    deferring: McpServers, tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(search_then_call) as fake, open_kit(tmp_path) as kit:
        run = kit.session(fake.base_url, mcp=deferring)
        await run.run((Inbound("U-ALICE", "echo the status", "Alice"),))
    first, second, third = fake.requests
    assert fake.refusals == []
    assert run.answers == ["The server said: Echo: payments are down"]
    # the definitions came as a reference the API expands, and the cached prefix held
    result = second.messages[-1]["content"][0]
    assert result["content"] == [{"type": "tool_reference", "tool_name": ECHO}]
    assert ECHO not in first.visible_tools
    assert ECHO in second.visible_tools
    assert prefix_stable(first, second)
    assert prefix_stable(second, third)
    assert all(transcript_problems(r.messages) == [] for r in fake.requests)
