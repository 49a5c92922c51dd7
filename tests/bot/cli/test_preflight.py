"""Start-up stops on a configuration file that would fail every step (``bot.cli.preflight``).

Each service (``serve``, ``worker``, ``chat``, ``gateway``) reads the egress rules and their
secrets, the MCP configuration, the approval policy and the prices before it starts, and
exits 2 naming each problem, as it does for an invalid setting.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.app import app
from bot.cli.preflight import problems
from bot.settings import Settings
from tests.bot.cli_support import WARROOM, warroom_env

CREDENTIALS = {
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "SLACK_BOT_TOKEN": "xoxb-test",
    "SLACK_APP_TOKEN": "xapp-test",
}
SECRET_RULE = (
    "rules:\n  - name: prom\n    hosts: [prom.internal]\n"
    "    inject: {type: bearer, token: {env: T5_PROM_TOKEN}}\n"
    "  - name: pd\n    hosts: [api.pagerduty.com]\n"
    "    inject: {type: basic, username: w, password: {file: /nonexistent/pd-password}}\n"
)
BROKEN_YAML = "rules:\n  - name: prom\n    hosts: [prom.internal\n"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Warroom variable set, data under tmp_path, no .env."""
    for name in warroom_env(tmp_path).keys() ^ os.environ.keys():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WARROOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str, **env: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={**CREDENTIALS, **env})
    return result.exit_code, result.output


COMMANDS = [("serve",), ("worker",), ("chat",), ("gateway",)]
"""Commands that run steps or the gateway (a worker needs REDIS_URL; serve then runs its own
worker, since it has none)."""


def needs(command: tuple[str, ...]) -> dict[str, str]:
    return {"REDIS_URL": "redis://127.0.0.1:1/0"} if command == ("worker",) else {}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_secret_reference_that_does_not_resolve_stops_start_up_naming_each(
    home: Path, command: tuple[str, ...]
) -> None:
    rules = home / "egress.yml"
    rules.write_text(SECRET_RULE)

    code, output = invoke(*command, WARROOM_EGRESS_RULES=str(rules), **needs(command))

    assert code == 2, output
    assert "invalid configuration" in output
    assert "WARROOM_EGRESS_RULES" in output
    assert "rule prom: the secret (env T5_PROM_TOKEN) is missing" in output
    assert "rule pd: the secret (file /nonexistent/pd-password) is missing" in output


@pytest.mark.parametrize("command", COMMANDS)
def test_broken_yaml_in_the_rules_stops_start_up_in_one_line(
    home: Path, command: tuple[str, ...]
) -> None:
    rules = home / "egress.yml"
    rules.write_text(BROKEN_YAML)

    code, output = invoke(*command, WARROOM_EGRESS_RULES=str(rules), **needs(command))

    assert code == 2, output
    line = next(x for x in output.splitlines() if "WARROOM_EGRESS_RULES" in x)
    assert f"{rules}: line 4, column 1: not valid YAML: expected ',' or ']'" in line
    assert "^" not in output  # no excerpt of the file under it


def test_the_chat_with_unresolved_secrets_exits_2_before_reading_a_line(home: Path) -> None:
    # Given an egress rule whose secret is not on this host
    rules = home / "egress.yml"
    rules.write_text(SECRET_RULE)
    env = warroom_env(home / "data", WARROOM_EGRESS_RULES=str(rules), ANTHROPIC_API_KEY="x")

    # When a person starts the chat and types a message
    done = subprocess.run(
        [WARROOM, "chat"], input="why is checkout down?\n", env=env, cwd=home,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    # Then it exits 2 naming the rule, instead of a session that dies silently
    assert done.returncode == 2, done.stdout + done.stderr
    assert "rule prom: the secret (env T5_PROM_TOKEN) is missing" in done.stderr
    assert "Warroom chat" not in done.stdout


def test_an_unreadable_upstream_ca_stops_start_up(home: Path) -> None:
    rules = home / "egress.yml"
    rules.write_text("rules:\n  - name: prom\n    hosts: [prom.internal]\n")
    ca = home / "ca.pem"
    ca.write_text("not a certificate\n")

    code, output = invoke(
        "chat", WARROOM_EGRESS_RULES=str(rules), WARROOM_EGRESS_UPSTREAM_CA=str(ca)
    )

    assert code == 2, output
    assert f"WARROOM_EGRESS_UPSTREAM_CA: {ca}: not a PEM file" in output


@pytest.mark.parametrize("command", [("serve",), ("worker",), ("chat",)])
def test_an_mcp_configuration_naming_an_unset_variable_stops_start_up(
    home: Path, command: tuple[str, ...]
) -> None:
    config = home / ".mcp.json"
    config.write_text('{"mcpServers": {"g": {"type": "http", "url": "${T5_GRAFANA_URL}/mcp"}}}')

    code, output = invoke(*command, WARROOM_MCP_CONFIG=str(config), **needs(command))

    assert code == 2, output
    assert f"WARROOM_MCP_CONFIG: {config}: server g: ${{T5_GRAFANA_URL}} is not set" in output


def test_an_mcp_configuration_that_is_not_json_stops_the_chat(home: Path) -> None:
    config = home / ".mcp.json"
    config.write_text('{"mcpServers": {"g": }')

    code, output = invoke("chat", WARROOM_MCP_CONFIG=str(config))

    assert code == 2, output
    assert f"WARROOM_MCP_CONFIG: {config}: not JSON" in output


def test_an_mcp_server_without_a_command_or_type_stops_start_up_saying_what_it_lacks(
    home: Path,
) -> None:
    config = home / ".mcp.json"
    config.write_text('{"mcpServers": {"grafana": {"args": ["serve"]}}}')

    code, output = invoke("chat", WARROOM_MCP_CONFIG=str(config))

    assert code == 2, output
    assert f'WARROOM_MCP_CONFIG: {config}: server grafana: no "command"' in output
    assert '"type": "http" and "url"' in output
    assert "None" not in output


def test_a_spending_cap_on_an_unpriced_model_stops_start_up(home: Path) -> None:
    code, output = invoke(
        "chat", WARROOM_MODEL="claude-unpriced-1", WARROOM_MAX_SESSION_COST_USD="5"
    )

    assert code == 2, output
    assert "WARROOM_MAX_SESSION_COST_USD: a cap is set, but WARROOM_MODEL=claude-unpriced-1" in (
        output
    )


def test_the_bot_alone_does_not_need_the_workers_secrets(home: Path) -> None:
    rules = home / "egress.yml"
    rules.write_text(SECRET_RULE)
    settings = Settings(egress_rules=rules, redis_url="redis://h:1/0")

    assert problems(settings, "bot") == []
    assert [p.variable for p in problems(settings, "steps")] == ["WARROOM_EGRESS_RULES"] * 2


def test_a_good_configuration_has_no_problem(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = home / "egress.yml"
    rules.write_text(SECRET_RULE.replace("/nonexistent/pd-password", str(home / "pd")))
    (home / "pd").write_text("hunter2\n")
    monkeypatch.setenv("T5_PROM_TOKEN", "tok")
    config = home / ".mcp.json"
    config.write_text('{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}')
    settings = Settings(egress_rules=rules, mcp_config=config, max_session_cost_usd=5.0)

    assert problems(settings) == []


async def test_doctor_names_a_cap_that_an_unpriced_model_could_never_reach(home: Path) -> None:
    from bot.cli.doctor import Status, check_prices

    capped = Settings(model="claude-unpriced-1", max_org_day_cost_usd=50.0)
    uncapped = Settings(model="claude-unpriced-1")

    assert (await check_prices(capped)).status is Status.PROBLEM
    assert "WARROOM_MAX_ORG_DAY_COST_USD" in (await check_prices(capped)).detail
    assert (await check_prices(uncapped)).status is Status.WARNING
    assert (await check_prices(Settings())).status is Status.OK
