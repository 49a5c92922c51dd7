"""Routing rules: the first matching rule's channel, and a bad rule stopping start-up by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.alerts.model import Alert, AlertStatus
from bot.alerts.routes import Routes, RoutesError
from bot.cli.app import app
from tests.bot.cli_support import warroom_env

RULES = """\
default_channel: C0ALERTS
routes:
  - name: payments-critical
    channel: C0PAY
    match: {service: payments, severity: critical}
  - name: databases
    channel: C0DB
    match_re: {alertname: "Postgres.*|Redis.*"}
    sources: [alertmanager]
"""


def _alert(source: str = "alertmanager", **labels: str) -> Alert:
    service = labels.pop("service", "")
    severity = labels.pop("severity", "")
    return Alert(
        source, "k", AlertStatus.FIRING, "t", service=service, severity=severity, labels=labels
    )


def test_the_first_rule_whose_conditions_all_hold_wins_else_the_default() -> None:
    routes = Routes.parse(RULES)
    assert routes.channel_for(_alert(service="payments", severity="critical")) == "C0PAY"
    assert routes.channel_for(_alert(service="payments", severity="warning")) == "C0ALERTS"
    assert routes.channel_for(_alert(alertname="PostgresDown")) == "C0DB"
    assert routes.channel_for(_alert(alertname="PostgresDownNow2")) == "C0DB"
    assert routes.channel_for(_alert(alertname="MyPostgresDown")) == "C0ALERTS"  # a full match
    assert routes.channel_for(_alert("grafana", alertname="PostgresDown")) == "C0ALERTS"


def test_each_bad_rule_is_named_with_what_is_wrong() -> None:
    bad = (
        "routes:\n"
        "  - {name: db, channel: C0DB, match_re: {alertname: '(unclosed'}}\n"
        "  - {name: lower, channel: general}\n"
        "  - {channel: C0X, colour: red}\n"
    )
    with pytest.raises(RoutesError) as raised:
        Routes.parse(bad, source="routes.yml")
    problems = raised.value.problems
    assert any(p.startswith("rule 'db': match_re") and "regular expression" in p for p in problems)
    assert any(p.startswith("rule 'lower': channel") for p in problems)
    assert any(p.startswith("rule #3: name") for p in problems)
    assert any(p.startswith("rule #3: colour") for p in problems)


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Warroom variable set, data under tmp_path, no .env."""
    for name in warroom_env(tmp_path).keys() ^ os.environ.keys():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WARROOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        ("routes:\n  - {name: db, channel: C0DB, match_re: {a: '('}}\n", "rule 'db': match_re"),
        ("routes: [\n", "not YAML"),
        ("routes: []\n", "WARROOM_ALERT_CHANNEL: alerts are on but no channel"),
    ],
)
def test_serve_with_a_bad_routing_rule_exits_2_naming_it(home: Path, rules: str, says: str) -> None:
    path = home / "routes.yml"
    path.write_text(rules)
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_APP_TOKEN": "xapp-test",
        "WARROOM_ALERT_TOKEN": "alert-token-0123456789",
        "WARROOM_ALERT_ROUTES": str(path),
    }
    result = CliRunner().invoke(app, ["serve"], env=env)
    assert result.exit_code == 2, result.output
    assert "WARROOM_ALERT_" in result.output
    assert says in result.output
