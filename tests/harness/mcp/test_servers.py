"""MCP servers outside the sandbox, against real servers: listing under Claude Code's names,
calls of every content type, a server that fails to start, hangs, or dies mid-call."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.mcp.config import parse_config
from harness.mcp.errors import McpTimeout, McpUnavailable
from harness.mcp.servers import McpServers, ServerState
from tests.harness.mcp.support import children_named, everything_command, time_command

HANGS = [sys.executable, "-c", "import time; time.sleep(3600)"]


def _config(**servers: dict[str, object]) -> str:
    return json.dumps({"mcpServers": servers})


@pytest.fixture
async def servers() -> AsyncIterator[McpServers]:
    text = _config(
        everything={"command": everything_command(), "args": ["stdio"]},
        time={"command": time_command(), "args": ["--local-timezone", "UTC"]},
        broken={"command": "/nonexistent/mcp-server"},
    )
    running = McpServers(parse_config(text, os.environ), start_timeout_s=60)
    await running.start()
    yield running
    await running.aclose()


async def test_tools_appear_under_claude_codes_names_in_a_stable_order(
    servers: McpServers,
) -> None:
    names = [t.name for t in servers.tools()]
    assert "mcp__everything__echo" in names
    assert "mcp__time__get_current_time" in names
    assert names == sorted(names)
    echo = next(t for t in servers.tools() if t.name == "mcp__everything__echo")
    assert echo.input_schema["properties"]["message"]["type"] == "string"
    assert echo.description


async def test_a_server_that_cannot_start_is_left_out_and_says_why(servers: McpServers) -> None:
    state, reason = servers.states()["broken"]
    assert state is ServerState.DOWN
    assert reason
    assert not [t for t in servers.tools() if t.server == "broken"]
    with pytest.raises(McpUnavailable, match="no such MCP tool"):
        await servers.call("mcp__broken__anything", {})


async def test_calls_return_text_images_and_structured_content(servers: McpServers) -> None:
    echo = await servers.call("mcp__everything__echo", {"message": "pods are crash-looping"})
    assert (echo.text, echo.is_error) == ("Echo: pods are crash-looping", False)
    image = await servers.call("mcp__everything__get-tiny-image", {})
    assert "[image: image/png," in image.text
    now = await servers.call("mcp__time__get_current_time", {"timezone": "UTC"})
    assert '"timezone": "UTC"' in now.text or "UTC" in now.text


async def test_a_bad_call_is_an_error_result_not_a_crash(servers: McpServers) -> None:
    result = await servers.call("mcp__time__get_current_time", {"timezone": "Mars/Olympus"})
    assert result.is_error


async def test_a_five_megabyte_result_comes_back_whole(servers: McpServers) -> None:
    big = "x" * (5 * 1024 * 1024 - 100)
    result = await servers.call("mcp__everything__echo", {"message": big})
    assert len(result.text) == len(big) + len("Echo: ")


async def test_a_call_past_its_timeout_raises_mcp_timeout(servers: McpServers) -> None:
    with pytest.raises(McpTimeout):
        await servers.call(
            "mcp__everything__trigger-long-running-operation",
            {"duration": 30, "steps": 3},
            timeout_s=1.0,
        )


async def test_a_server_that_hangs_at_start_is_marked_down_in_time() -> None:
    text = _config(stuck={"command": HANGS[0], "args": HANGS[1:]})
    running = McpServers(parse_config(text, os.environ), start_timeout_s=2)
    try:
        await asyncio.wait_for(running.start(), 10)
        assert running.states()["stuck"][0] is ServerState.DOWN
        assert running.tools() == ()
    finally:
        await running.aclose()


async def test_a_server_killed_mid_call_is_reported_then_comes_back(servers: McpServers) -> None:
    # Given a long call running on the everything server
    call = asyncio.create_task(
        servers.call(
            "mcp__everything__trigger-long-running-operation", {"duration": 20, "steps": 2}
        )
    )
    pids = list(children_named("mcp-server-everything"))
    assert pids, "the stdio server is a child of this process"
    pid = pids[0]
    # When the server process dies mid-call
    os.kill(pid, signal.SIGKILL)
    # Then the call ends as unavailable (the outcome is unknown), not a crash
    with pytest.raises(McpUnavailable):
        await asyncio.wait_for(call, 30)
    # And the server is reconnected, its tools listed again
    deadline = asyncio.get_running_loop().time() + 30
    while servers.states()["everything"][0] is not ServerState.UP:
        assert asyncio.get_running_loop().time() < deadline, servers.states()
        await asyncio.sleep(0.1)
    again = await servers.call("mcp__everything__echo", {"message": "back"})
    assert again.text == "Echo: back"


def test_variables_expand_from_the_environment_with_defaults() -> None:
    text = _config(
        grafana={
            "type": "http",
            "url": "${GRAFANA_URL:-http://grafana.internal}/mcp",
            "headers": {"Authorization": "Bearer ${GRAFANA_TOKEN}"},
            "channels": ["C-PAY"],
        }
    )
    (server,) = parse_config(text, {"GRAFANA_TOKEN": "glsa_x"})
    assert server.url == "http://grafana.internal/mcp"  # type: ignore[union-attr]
    assert server.headers == {"Authorization": "Bearer glsa_x"}  # type: ignore[union-attr]
    assert server.channels == ("C-PAY",)


def test_a_missing_variable_names_itself() -> None:
    text = _config(grafana={"type": "http", "url": "${GRAFANA_URL}"})
    with pytest.raises(ValueError, match=r"grafana: \$\{GRAFANA_URL\} is not set"):
        parse_config(text, {})


async def test_a_server_that_dies_at_start_keeps_its_last_stderr_lines() -> None:
    script = (
        "import sys\n"
        "for i in range(200): print(f'loading plugin {i}', file=sys.stderr)\n"
        "print('error: GRAFANA_TOKEN is not set', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    text = _config(grafana={"command": sys.executable, "args": ["-c", script]})
    running = McpServers(parse_config(text, os.environ), start_timeout_s=30)
    try:
        await running.start()
        assert running.states()["grafana"][0] is ServerState.DOWN
        tail = running.stderr_tail("grafana")
    finally:
        await running.aclose()
    assert tail.endswith("error: GRAFANA_TOKEN is not set")
    assert "loading plugin 199" in tail
    assert "loading plugin 0\n" not in tail  # only the end is kept
    assert len(tail) <= 2000


ODD_NAMES_SERVER = """
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("odd")


@server.tool(
    name="pods.list v2",
    description="List the pods of a namespace.",
    annotations=ToolAnnotations(readOnlyHint=True),
)
def pods_list(namespace: str) -> str:
    return f"pods in {namespace}"


server.run("stdio")
"""


async def test_a_tool_name_the_api_would_refuse_is_normalised_and_still_reaches_it(
    tmp_path: Path,
) -> None:
    # Given a server (on the official SDK) whose tool name has a dot and a space, which the
    # Messages API refuses in a tool name
    script = tmp_path / "odd.py"
    script.write_text(ODD_NAMES_SERVER)
    text = _config(odd={"command": sys.executable, "args": [str(script)]})
    servers = McpServers(parse_config(text, os.environ), start_timeout_s=60)
    await servers.start()
    try:
        # Then the tool is listed under a name the API accepts
        assert [t.name for t in servers.tools()] == ["mcp__odd__pods_list_v2"]
        # And a call by that name reaches the server's own tool
        pods = await servers.call("mcp__odd__pods_list_v2", {"namespace": "prod"})
        assert pods.text == "pods in prod"
    finally:
        await servers.aclose()
