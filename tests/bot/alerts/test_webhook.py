"""``POST /alerts/<source>``: each source's payload starts one thread per problem, repeats and
the resolve reach it, retries are recorded once, bad requests change nothing."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.alerts.auth import pagerduty_signature
from bot.alerts.intake import AlertPolicy
from bot.alerts.wiring import build_alerts
from bot.cli.serve import alerts_running
from bot.settings import Settings
from bot.slack.installation import Installation
from tests.bot.alerts.alert_support import PD_SECRET, TOKEN, AlertEdge, alert_edge, payload
from tests.bot.slack_edge import CHANNEL
from tests.fakes.slack_api import TEAM_ID
from tests.ports import free_port


def _texts(edge: AlertEdge, thread_ts: str) -> list[str]:
    messages = edge.edge.slack_api.thread(CHANNEL, thread_ts)
    return [json.dumps(m.get("blocks") or m.get("text")) for m in messages]


async def _only_thread(edge: AlertEdge) -> str:
    roots = [m for m in edge.edge.slack_api.state.messages.get(CHANNEL, []) if "thread_ts" not in m]
    assert len(roots) == 1
    return str(roots[0]["ts"])


@pytest.mark.parametrize(
    ("source", "name", "title"),
    [
        ("alertmanager", "alertmanager_firing", "checkout-api returns 500s"),
        ("grafana", "grafana_firing", "[FIRING:1] High memory usage (blue us-1)"),
        ("pagerduty", "pagerduty_triggered", "checkout-api error rate above 5%"),
        ("datadog", "datadog_triggered", "[Triggered] checkout-api p99 latency is high"),
        ("generic", "generic_firing", "Disk 95% full on checkout-db-1"),
    ],
)
async def test_an_alert_from_each_source_starts_a_session_in_its_own_thread(
    tmp_path: Path, source: str, name: str, title: str
) -> None:
    async with alert_edge(tmp_path) as edge:
        # When the source posts its webhook
        answer = await edge.post(source, payload(name))
        assert answer.status_code == 202, answer.text
        await edge.settled()
        # Then the alert is the root of a thread, the agent says it is on it with a Stop
        # button, and the session's first input is the alert as fenced data
        thread_ts = await _only_thread(edge)
        texts = _texts(edge, thread_ts)
        assert title[:20] in texts[0]
        assert "on it" in texts[1]
        assert "warroom_stop" in texts[1]
        session = await edge.edge.session(thread_ts)
        assert session is not None
        inbox = await edge.edge.inbox_texts(session.id)
        assert "not instructions" in inbox[0]
        assert "```alert" in inbox[0]
        assert edge.edge.enqueued.calls[0][0] == session.id


async def test_repeats_reply_in_the_thread_and_the_resolve_reaches_the_session(
    tmp_path: Path,
) -> None:
    async with alert_edge(tmp_path, policy=AlertPolicy(burst_window_s=0)) as edge:
        first = payload("alertmanager_firing")
        assert (await edge.post("alertmanager", first)).status_code == 202
        await edge.settled()
        thread_ts = await _only_thread(edge)
        # When a second instance of the group fires, then the group resolves
        second = copy.deepcopy(first)
        extra = copy.deepcopy(second["alerts"][0])
        extra["labels"]["instance"] = "10.0.0.8:8080"
        second["alerts"].append(extra)
        assert (await edge.post("alertmanager", second)).status_code == 202
        await edge.settled()
        resolved = copy.deepcopy(second)
        resolved["status"] = "resolved"
        for alert in resolved["alerts"]:
            alert["status"] = "resolved"
            alert["endsAt"] = "2026-12-05T14:31:00Z"
        assert (await edge.post("alertmanager", resolved)).status_code == 202
        await edge.settled()
        # Then both are replies in the one thread and inputs of its one session
        assert await _only_thread(edge) == thread_ts
        texts = _texts(edge, thread_ts)
        assert any("Still firing, 2nd time since 14:02 UTC" in t for t in texts)
        assert any("Resolved at 14:31 UTC" in t for t in texts)
        session = await edge.edge.session(thread_ts)
        assert session is not None
        inbox = await edge.edge.inbox_texts(session.id)
        assert len(inbox) == 3
        assert "hypothesis" in inbox[2]


async def test_a_retried_delivery_is_recorded_once(tmp_path: Path) -> None:
    async with alert_edge(tmp_path) as edge:
        body = payload("alertmanager_firing")
        first = await edge.post("alertmanager", body)
        again = await edge.post("alertmanager", body)
        await edge.settled()
        assert first.json() == {"recorded": 1, "duplicates": 0}
        assert again.json() == {"recorded": 0, "duplicates": 1}
        tally = await edge.store.tally(TEAM_ID)
        assert (tally.received, tally.unaccounted) == (1, 0)


async def test_bad_credentials_are_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    async with alert_edge(tmp_path) as edge:
        no_token = await edge.post("generic", payload("generic_firing"), token=None)
        wrong = await edge.post("generic", payload("generic_firing"), token="nope")
        raw = json.dumps(payload("pagerduty_triggered")).encode()
        forged = await edge.post(
            "pagerduty",
            raw,
            token=None,
            headers={"X-PagerDuty-Signature": pagerduty_signature(raw, "another-secret")},
        )
        assert [r.status_code for r in (no_token, wrong, forged)] == [401, 401, 401]
        assert (await edge.store.tally(TEAM_ID)).received == 0


async def test_a_pagerduty_signature_is_enough(tmp_path: Path) -> None:
    async with alert_edge(tmp_path) as edge:
        raw = json.dumps(payload("pagerduty_triggered")).encode()
        signature = f"v1=00ff,{pagerduty_signature(raw, PD_SECRET)}"  # a rotation: two
        answer = await edge.post(
            "pagerduty", raw, token=None, headers={"X-PagerDuty-Signature": signature}
        )
        assert answer.status_code == 202


@pytest.mark.parametrize(
    ("source", "body", "says"),
    [
        ("alertmanager", b"{not json", "not JSON"),
        ("alertmanager", b"[]", "JSON object"),
        ("alertmanager", b'{"version": "4", "alerts": []}', "groupKey is missing"),
        ("generic", b'{"key": "k"}', "title is missing"),
        ("generic", b'{"key": "k", "title": "t", "status": "exploded"}', "firing or resolved"),
        ("pagerduty", b'{"messages": []}', "no event object"),
    ],
)
async def test_a_bad_body_gets_400_saying_why_and_nothing_is_recorded(
    tmp_path: Path, source: str, body: bytes, says: str
) -> None:
    async with alert_edge(tmp_path) as edge:
        answer = await edge.post(source, body)
        assert answer.status_code == 400
        assert says in answer.json()["error"]
        assert (await edge.store.tally(TEAM_ID)).received == 0


async def test_an_unknown_source_is_404(tmp_path: Path) -> None:
    async with alert_edge(tmp_path) as edge:
        answer = await edge.post("nagios", payload("generic_firing"))
        assert answer.status_code == 404


async def test_in_socket_mode_the_webhook_has_a_listener_of_its_own(tmp_path: Path) -> None:
    async with alert_edge(tmp_path) as edge:
        port = free_port()
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
            data_dir=tmp_path,
            slack_mode="socket",
            alert_token=SecretStr(TOKEN),
            alert_channel=CHANNEL,
            alert_port=port,
        )
        assert edge.edge.deps is not None
        deps = replace(edge.edge.deps, installation=Installation(TEAM_ID, None))
        alerts = build_alerts(settings, deps, edge.edge.database)
        async with alerts_running(alerts, settings) as extra_routes:
            assert extra_routes == ()  # Socket Mode: nothing for a Slack listener
            answer = await edge.http.post(
                f"http://127.0.0.1:{port}/alerts/generic",
                json=payload("generic_firing"),
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert answer.status_code == 202
            await alerts.taker.settled()
        tally = await alerts.intake.store.tally(TEAM_ID)
        assert (tally.received, tally.session_threads, tally.unaccounted) == (1, 1, 0)
