"""MCP servers from ``WARROOM_MCP_CONFIG`` at the command line: a scripted model calls an MCP
tool through ``warroom chat``; ``warroom mcp list`` and ``doctor`` show each server's state."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cli.doctor import Status, check_mcp
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.settings import Settings
from tests.bot.cli_support import Output, finish, start, warroom_env
from tests.harness.mcp.support import config_text, everything

ECHO = "mcp__everything__echo"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A short data directory (sandbox sockets live under it: paths < 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="wr-mcp-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_config(directory: Path, **servers: dict[str, object]) -> Path:
    path = directory / ".mcp.json"
    path.write_text(config_text(**servers))
    return path


def echo_then_answer(request: RecordedRequest) -> Reply:
    """Call the echo tool once; answer with what it returned."""
    last = request.messages[-1]["content"]
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results:
        return Reply.text(f"The server said: {results[0]['content']}")
    return Reply.tool(ECHO, {"message": "payments are down"})


@pytest.mark.slow
async def test_a_scripted_model_calls_an_mcp_tool_through_warroom_chat(data_dir: Path) -> None:
    config = write_config(data_dir, everything=everything())
    async with FakeAnthropicAPI(echo_then_answer, api_key="fake-key") as fake:
        env = warroom_env(
            data_dir / "data",
            ANTHROPIC_API_KEY="fake-key",
            ANTHROPIC_BASE_URL=fake.base_url,
            WARROOM_MCP_CONFIG=str(config),
        )
        chat = await start("chat", env=env, cwd=data_dir, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        chat.stdin.write(b"echo the status\n")
        await out.until(lambda text: "warroom> The server said: Echo: payments are down" in text)
        chat.stdin.close()
        assert await finish(chat) == 0
    assert ECHO in [t["name"] for t in fake.requests[0].body["tools"]]


def search_then_echo(request: RecordedRequest) -> Reply:
    """A model that sees only loaded definitions: load echo with ToolSearch, call it, answer."""
    last = request.messages[-1]["content"]
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
    if ECHO not in request.visible_tools:
        return Reply.tool("ToolSearch", {"query": "echo"})
    if results and isinstance(results[0]["content"], list):
        return Reply.tool(ECHO, {"message": "payments are down"})
    return Reply.text(f"The server said: {results[0]['content']}")


@pytest.mark.slow
async def test_warroom_chat_defers_mcp_tools_behind_tool_search(data_dir: Path) -> None:
    config = write_config(data_dir, everything=everything())
    async with FakeAnthropicAPI(search_then_echo, api_key="fake-key") as fake:
        env = warroom_env(
            data_dir / "data",
            ANTHROPIC_API_KEY="fake-key",
            ANTHROPIC_BASE_URL=fake.base_url,
            WARROOM_MCP_CONFIG=str(config),
            WARROOM_MCP_TOOL_SEARCH="true",
        )
        chat = await start("chat", env=env, cwd=data_dir, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        chat.stdin.write(b"echo the status\n")
        await out.until(lambda text: "warroom> The server said: Echo: payments are down" in text)
        chat.stdin.close()
        assert await finish(chat) == 0
    tools = fake.requests[0].body["tools"]
    assert [t["name"] for t in tools if t.get("defer_loading")][:1] == ["mcp__everything__echo"]
    assert "ToolSearch" in [t["name"] for t in tools if not t.get("defer_loading")]
    assert fake.refusals == []


async def test_mcp_list_prints_each_server_its_state_and_its_tools(data_dir: Path) -> None:
    config = write_config(data_dir, everything=everything(), broken={"command": "/nonexistent"})
    env = warroom_env(data_dir / "data", WARROOM_MCP_CONFIG=str(config))
    listing = await start("mcp", "list", env=env, cwd=data_dir)
    assert listing.stdout is not None
    out = await listing.stdout.read()
    assert await finish(listing) == 1  # a server is down: scripts see it
    lines = out.decode().splitlines()
    assert lines[0].startswith("broken: down (")
    assert any(line.startswith("everything: up, ") for line in lines)
    assert any(line.strip().startswith(f"{ECHO}  ") for line in lines)


async def test_mcp_list_shows_the_orgs_decision_for_each_tool(data_dir: Path) -> None:
    policy = {"tools": {"get-env": "deny"}}
    config = write_config(data_dir, everything=everything(warroom=policy))
    env = warroom_env(data_dir / "data", WARROOM_MCP_CONFIG=str(config))
    listing = await start("mcp", "list", env=env, cwd=data_dir)
    assert listing.stdout is not None
    out = (await listing.stdout.read()).decode()
    assert await finish(listing) == 0
    assert f"    {ECHO}  [allow]  " in out  # readOnlyHint: true
    assert "    mcp__everything__toggle-simulated-logging  [ask]  " in out  # readOnlyHint: false
    assert "    mcp__everything__get-env  [deny]  " in out  # listed here, never to the model
    assert "everything: up, 12 tools" in out


async def test_mcp_list_shows_why_a_server_died(data_dir: Path) -> None:
    script = "import sys; print('error: PAGERDUTY_TOKEN is not set', file=sys.stderr); sys.exit(2)"
    config = write_config(data_dir, pagerduty={"command": sys.executable, "args": ["-c", script]})
    env = warroom_env(data_dir / "data", WARROOM_MCP_CONFIG=str(config))
    listing = await start("mcp", "list", env=env, cwd=data_dir)
    assert listing.stdout is not None
    assert listing.stderr is not None
    lines = (await listing.stdout.read()).decode().splitlines()
    err = (await listing.stderr.read()).decode()
    assert await finish(listing) == 1
    assert lines[0].startswith("pagerduty: down (")
    assert lines[1] == "    stderr: error: PAGERDUTY_TOKEN is not set"
    assert "PAGERDUTY_TOKEN" not in err  # said once, in the listing


async def test_mcp_list_with_an_invalid_configuration_exits_2_saying_why(data_dir: Path) -> None:
    config = data_dir / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"grafana": {"type": "sse", "url": "x"}}}))
    env = warroom_env(data_dir / "data", WARROOM_MCP_CONFIG=str(config))
    listing = await start("mcp", "list", env=env, cwd=data_dir)
    assert listing.stderr is not None
    err = (await listing.stderr.read()).decode()
    assert await finish(listing) == 2
    assert "WARROOM_MCP_CONFIG: server grafana: type 'sse' is not supported" in err


async def test_doctor_names_a_down_server_and_why(data_dir: Path) -> None:
    config = write_config(data_dir, everything=everything(), broken={"command": "/nonexistent"})
    result = await check_mcp(_settings(mcp_config=config, data_dir=data_dir))
    assert result.status is Status.WARNING
    assert "broken: down (" in result.detail
    assert "everything: up, " in result.detail
    assert "broken" in result.fix


async def test_doctor_quotes_the_last_stderr_line_of_a_server_that_died(data_dir: Path) -> None:
    script = "import sys; print('error: PAGERDUTY_TOKEN is not set', file=sys.stderr); sys.exit(2)"
    config = write_config(data_dir, pagerduty={"command": sys.executable, "args": ["-c", script]})
    result = await check_mcp(_settings(mcp_config=config, data_dir=data_dir))
    assert result.status is Status.WARNING
    assert "; stderr: error: PAGERDUTY_TOKEN is not set)" in result.detail


async def test_doctor_skips_mcp_without_a_configuration(data_dir: Path) -> None:
    result = await check_mcp(_settings(mcp_config=None, data_dir=data_dir))
    assert result.status is Status.SKIPPED


def _settings(**values: Any) -> Settings:
    """Settings from these values only (no ``.env`` file)."""
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]
