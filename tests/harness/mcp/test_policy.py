"""The org's approval policy on MCP tools, against the real server-everything (whose tools carry
``readOnlyHint`` annotations): read-only tools run, others need a human's approval and are never
sent, denied tools are never offered; the org's word beats the annotation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import McpConfigError, McpServers, ToolContext, parse_config, run_tool
from harness.mcp.errors import McpApprovalRequired, McpUnavailable
from harness.mcp.policy import Approval, ServerPolicy
from memory_store import FileStore
from tests.harness.mcp.support import (
    Relay,
    config_text,
    everything,
    http_everything,
    running,
)
from tests.harness.tool_support import JailWorkspace, open_store

ECHO = "mcp__everything__echo"
TOGGLE = "mcp__everything__toggle-simulated-logging"  # readOnlyHint: false


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileStore]:
    async with open_store(None, tmp_path / "db") as opened:
        yield opened


def context(store: FileStore, root: Path, servers: McpServers) -> ToolContext:
    root.mkdir(exist_ok=True)
    return ToolContext(
        store=store,
        workspace=JailWorkspace(root),
        org_id="T-MCP",
        channel_id="C-INCIDENT",
        session_id="s-policy",
        actor="agent",
        tool_use_id="toolu_policy_1",
        mcp=servers,
    )


def approvals(servers: McpServers) -> dict[str, Approval]:
    return {t.name: t.approval for tools in servers.listing().values() for t in tools}


async def test_without_a_policy_read_only_tools_are_allowed_and_others_ask() -> None:
    async with running(config_text(everything=everything())) as servers:
        decided = approvals(servers)
        tools = {t.name: t for t in servers.tools()}
    assert tools[ECHO].read_only
    assert decided[ECHO] is Approval.ALLOW
    assert not tools[TOGGLE].read_only
    assert decided[TOGGLE] is Approval.ASK
    assert TOGGLE in tools  # the model sees it, and learns it needs approval when calling it


async def test_a_tool_that_needs_approval_is_a_tool_error_and_never_runs(
    store: FileStore, tmp_path: Path
) -> None:
    async with running(config_text(everything=everything())) as servers:
        outcome = await run_tool(TOGGLE, {}, context(store, tmp_path / "ws", servers))
        with pytest.raises(McpApprovalRequired):
            await servers.call(TOGGLE, {})
    assert outcome.is_error
    assert f"{TOGGLE} was not run" in outcome.content
    assert "approval" in outcome.content
    assert "cannot be requested from Warroom yet" in outcome.content


async def test_an_ask_tool_is_never_sent_to_the_server() -> None:
    async with http_everything() as web, Relay(web.port) as relay:
        policy = {"tools": {"echo": "ask"}}
        text = config_text(web={"type": "http", "url": relay.url, "warroom": policy})
        async with running(text) as servers:
            with pytest.raises(McpApprovalRequired):
                await servers.call("mcp__web__echo", {"message": "restart payments"})
            await servers.call("mcp__web__get-sum", {"a": 1, "b": 2})
    sent = bytes(relay.sent)
    assert b'"get-sum"' in sent  # the allowed call went out
    assert b"restart payments" not in sent


async def test_a_denied_tool_is_not_offered_and_cannot_be_called(
    store: FileStore, tmp_path: Path
) -> None:
    policy = {"tools": {"get-env": "deny"}}
    async with running(config_text(everything=everything(warroom=policy))) as servers:
        offered = [t.name for t in servers.tools()]
        assert "mcp__everything__get-env" not in offered
        assert approvals(servers)["mcp__everything__get-env"] is Approval.DENY  # mcp list shows it
        assert not servers.serves("mcp__everything__get-env", "C-INCIDENT")
        with pytest.raises(McpUnavailable, match="no such MCP tool"):
            await servers.call("mcp__everything__get-env", {})
        outcome = await run_tool(
            "mcp__everything__get-env", {}, context(store, tmp_path / "ws", servers)
        )
    assert outcome.is_error
    assert "No such tool available: mcp__everything__get-env" in outcome.content


async def test_the_orgs_default_and_overrides_beat_the_annotations() -> None:
    policy = {"default": "allow", "tools": {"echo": "ask", "get-sum": "deny"}}
    async with running(config_text(everything=everything(warroom=policy))) as servers:
        decided = approvals(servers)
        toggled = await servers.call(TOGGLE, {})
    assert (decided[TOGGLE], decided[ECHO]) == (Approval.ALLOW, Approval.ASK)
    assert decided["mcp__everything__get-sum"] is Approval.DENY
    assert not toggled.is_error


def test_the_policy_is_read_from_warrooms_own_key() -> None:
    text = config_text(
        grafana={
            "type": "http",
            "url": "http://grafana.internal/mcp",
            "warroom": {"default": "ask", "tools": {"search_dashboards": "allow"}},
        }
    )
    (server,) = parse_config(text, {})
    assert server.policy == ServerPolicy(Approval.ASK, {"search_dashboards": Approval.ALLOW})


@pytest.mark.parametrize(
    ("warroom", "message"),
    [
        ({"default": "yes"}, r"grafana: warroom.default is 'yes'; expected allow, ask or deny"),
        ({"tools": {"x": "never"}}, r"grafana: warroom.tools.x is 'never'"),
        ({"tool": {}}, r'grafana: "warroom" takes'),
        ({"tools": ["x"]}, r'grafana: "warroom.tools" maps tool names'),
    ],
)
def test_a_bad_policy_is_refused_saying_where(warroom: object, message: str) -> None:
    text = config_text(grafana={"type": "http", "url": "http://g/mcp", "warroom": warroom})
    with pytest.raises(McpConfigError, match=message):
        parse_config(text, {})
