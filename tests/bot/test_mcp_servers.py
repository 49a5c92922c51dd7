"""``WARROOM_MCP_CONFIG``: a worker's runtime starts the MCP servers once, gives them to every
step, and stops them when it closes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.cli.terminal import TerminalReporter
from bot.durable.wiring import Runtime
from bot.mcp_servers import defer_above_tokens, load_mcp_config, open_mcp_servers
from bot.settings import Settings
from harness import MODELS, McpConfigError, StdioServer
from tests.harness.mcp.support import children_named, config_text, everything, until

MODEL = next(m.id for m in MODELS.values() if m.context_tokens == 1_000_000)


async def enqueue(session_id: str, token: str) -> None:
    raise AssertionError("nothing is enqueued here")


async def test_the_runtime_starts_the_servers_for_its_steps_and_stops_them(
    tmp_path: Path,
) -> None:
    config = tmp_path / ".mcp.json"
    config.write_text(config_text(everything=everything()))
    settings = Settings.model_construct(
        data_dir=tmp_path / "data", mcp_config=config, anthropic_api_key="unused"
    )
    runtime = await Runtime.open(
        settings, enqueue=enqueue, reporter=TerminalReporter(io.StringIO())
    )
    try:
        assert runtime.mcp is not None
        assert runtime.driver.mcp is runtime.mcp
        assert "mcp__everything__echo" in [t.name for t in runtime.mcp.tools("C-ANY")]
        assert len(children_named("mcp-server-everything")) == 1
    finally:
        await runtime.close()
    await until(lambda: not children_named("mcp-server-everything"), "the server ends")


async def test_without_a_configuration_there_are_no_servers(tmp_path: Path) -> None:
    settings = Settings.model_construct(data_dir=tmp_path, mcp_config=None)
    assert await open_mcp_servers(settings) is None


def test_variables_in_the_configuration_come_from_the_worker_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "s3cret")
    config = tmp_path / ".mcp.json"
    config.write_text(
        config_text(k8s={"command": "k8s-mcp", "env": {"TOKEN": "${MCP_TEST_TOKEN}"}})
    )
    [server] = load_mcp_config(Settings.model_construct(mcp_config=config))
    assert isinstance(server, StdioServer)
    assert server.env == {"TOKEN": "s3cret"}


def test_an_invalid_configuration_is_refused_saying_why(tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    config.write_text('{"servers": {}}')
    with pytest.raises(McpConfigError, match="mcpServers"):
        load_mcp_config(Settings.model_construct(mcp_config=config))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("auto", 100_000), ("auto:5", 50_000), ("true", 0), ("false", None)],
)
def test_tool_search_mode_sets_the_deferral_threshold(mode: str, expected: int | None) -> None:
    settings = Settings(_env_file=None, WARROOM_MCP_TOOL_SEARCH=mode, WARROOM_MODEL=MODEL)  # type: ignore[call-arg]
    assert defer_above_tokens(settings) == expected


def test_an_unknown_tool_search_mode_is_refused() -> None:
    with pytest.raises(ValidationError, match="WARROOM_MCP_TOOL_SEARCH"):
        Settings(_env_file=None, WARROOM_MCP_TOOL_SEARCH="sometimes")  # type: ignore[call-arg]
