"""Which channels are watched by default and whose posts count: parsed from the settings,
refused when an id is not one."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.alerts.slack_view import Sender
from bot.settings import Settings
from bot.slack.watch import WatchPolicy


def test_the_settings_lists_are_parsed_into_ids() -> None:
    policy = WatchPolicy.parse(" C0ALERTS, G0PRIVATE ", "A0DATADOG,B0GRAFANA")

    assert policy.default_channels == frozenset({"C0ALERTS", "G0PRIVATE"})
    assert policy.senders == frozenset({"A0DATADOG", "B0GRAFANA"})


@pytest.mark.parametrize(("channels", "senders"), [("U0ALICE", ""), ("", "C0ALERTS")])
def test_an_id_of_the_wrong_kind_is_refused(channels: str, senders: str) -> None:
    with pytest.raises(ValueError, match="not a channel"):
        WatchPolicy.parse(channels, senders)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("WARROOM_WATCH_CHANNELS", "alerts"), ("WARROOM_WATCH_SENDERS", "Datadog")],
)
def test_the_settings_refuse_what_is_not_an_id(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)

    with pytest.raises(ValidationError, match=variable):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_a_sender_counts_by_bot_or_app_id_and_we_never_do() -> None:
    listed = WatchPolicy(senders=frozenset({"B0GRAFANA"}))
    grafana = Sender("B0GRAFANA", "A0GRAFANA", "Grafana")
    github = Sender("B0GITHUB", "A0GITHUB", "GitHub")

    assert listed.counts(grafana, own_bot_id="B0ME")
    assert not listed.counts(github, own_bot_id="B0ME")
    assert WatchPolicy().counts(github, own_bot_id="B0ME")
    assert not WatchPolicy().counts(Sender("B0ME", "A0ME", "warroom"), own_bot_id="B0ME")
