"""A ``warroom.tools`` entry naming a tool the server does not have (a typo, a renamed tool)
is said out loud: in ``warroom mcp list``, in ``doctor`` and in the worker's log."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.doctor import Status, check_mcp
from bot.settings import Settings
from harness import McpServers, parse_config
from tests.bot.cli_support import finish, start, warroom_env
from tests.harness.mcp.support import config_text, everything

POLICY = {"tools": {"get_env": "deny", "echo": "allow"}}  # the server's tool is get-env


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="wr-mcpn-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_config(directory: Path) -> Path:
    path = directory / ".mcp.json"
    path.write_text(config_text(everything=everything(warroom=POLICY)))
    return path


async def test_mcp_list_warns_of_a_deny_naming_a_tool_the_server_does_not_have(
    data_dir: Path,
) -> None:
    env = warroom_env(data_dir / "data", WARROOM_MCP_CONFIG=str(write_config(data_dir)))

    listing = await start("mcp", "list", env=env, cwd=data_dir)
    assert listing.stdout is not None
    out = (await listing.stdout.read()).decode()

    assert await finish(listing) == 0
    assert (
        "    warning: \"warroom.tools\" names 'get_env', which everything does not have: its "
        "decision applies to nothing"
    ) in out
    assert "    mcp__everything__get-env  [deny]" not in out  # the tool meant is not denied
    assert "'echo', which" not in out  # a name the server has is no warning


async def test_doctor_warns_of_a_policy_name_no_server_has(data_dir: Path) -> None:
    settings = Settings(_env_file=None, mcp_config=write_config(data_dir), data_dir=data_dir)  # type: ignore[call-arg]

    result = await check_mcp(settings)

    assert result.status is Status.WARNING
    assert "everything has no 'get_env'" in result.detail
    assert "WARROOM_MCP_CONFIG" in result.fix


async def test_the_worker_logs_a_policy_name_the_server_does_not_have(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    configs = parse_config(write_config(data_dir).read_text(), {})
    servers = McpServers(configs, start_timeout_s=60)
    with caplog.at_level(logging.WARNING, logger="harness.mcp.servers"):
        await servers.start()
        await servers.aclose()

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "MCP server everything has no tool 'get_env'" in w and "(deny)" in w for w in warnings
    )
