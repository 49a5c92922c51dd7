"""From a real alert to an investigation, with nobody mentioning the bot: a Prometheus rule on
an exporter fires, a real Alertmanager posts to ``warroom serve``'s webhook, a session starts
in the routed channel and queries the real Prometheus through the egress gateway; a repeat is
a reply in the same thread and the resolve reaches the session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import signal
from pathlib import Path

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI, Reply
from bot.fakes.slack_api import FakeSlackApi
from tests.bot.alerts.alertmanager import real_alertmanager
from tests.bot.cli_support import Output, finish, start, warroom_env
from tests.conftest import require_bwrap
from tests.ports import free_port
from tests.sandbox_client.gateway.prometheus import PASSWORD, USER, Prometheus, real_prometheus

ALERT_CHANNEL = "C0ALERTS"
TOKEN = "am-to-warroom-token"
RULES = """\
groups:
  - name: checkout
    rules:
      - alert: CheckoutErrors
        expr: http_requests_total{service="checkout-api",code="500"} > 0
        labels: {severity: critical, service: checkout-api}
        annotations: {summary: "checkout-api returns 500s"}
"""
ROUTES = f"""\
default_channel: C0OTHER
routes:
  - name: checkout
    channel: {ALERT_CHANNEL}
    match: {{service: checkout-api, severity: critical}}
"""


def _egress_rules(directory: Path, prom: Prometheus) -> Path:
    path = directory / "egress.yml"
    path.write_text(
        "rules:\n"
        "  - name: prometheus\n"
        f"    hosts: [{prom.host}]\n"
        f"    ports: [{prom.port}]\n"
        "    paths: [/api/v1/]\n"
        f"    inject: {{type: basic, username: {USER}, password: {{env: PROM_PASSWORD}}}}\n"
        f"    base_url: {prom.base_url}\n"
    )
    return path


def _texts(slack: FakeSlackApi) -> list[tuple[str, str]]:
    """Every message in the alert channel: (thread root ts, text and blocks)."""
    found = []
    for message in slack.state.messages.get(ALERT_CHANNEL, []):
        root = str(message.get("thread_ts") or message["ts"])
        found.append((root, json.dumps([message.get("text"), message.get("blocks")])))
    return found


@pytest.mark.slow
async def test_an_alertmanager_alert_starts_an_investigation_that_sees_repeats_and_the_resolve(
    tmp_path: Path,
) -> None:
    require_bwrap()
    slack = FakeSlackApi()
    await slack.start()
    port = free_port()
    webhook = f"http://127.0.0.1:{port}/alerts/alertmanager"
    query = "http_requests_total"
    try:
        async with (
            real_alertmanager(webhook, token=TOKEN, repeat_interval="2s") as am,
            real_prometheus(rules=RULES, alertmanager=am) as prom,
        ):
            curl = f"curl -sS {shlex.quote(f'{prom.base_url}/api/v1/query?query={query}')}"
            script = [
                Reply.tool("Bash", {"command": curl, "description": "Ask Prometheus"}),
                *[
                    Reply.text(f"Hypothesis: the 500s come from the 14:02 deploy ({n}).")
                    for n in range(20)
                ],
            ]
            data = tmp_path / "data"
            data.mkdir()
            (data / "routes.yml").write_text(ROUTES)
            (data / "ca.pem").write_bytes(prom.ca_pem)
            async with FakeAnthropicAPI(script) as model:
                env = warroom_env(
                    data,
                    WARROOM_SLACK_MODE="http",
                    SLACK_HTTP_PORT=str(port),
                    SLACK_BOT_TOKEN=slack.token,
                    SLACK_SIGNING_SECRET="unused-signing-secret",
                    SLACK_API_URL=slack.base_url,
                    ANTHROPIC_API_KEY="fake-key",
                    ANTHROPIC_BASE_URL=model.base_url,
                    WARROOM_ALERT_TOKEN=TOKEN,
                    WARROOM_ALERT_ROUTES=str(data / "routes.yml"),
                    WARROOM_ALERT_BURST_WINDOW_S="3",
                    WARROOM_ALERT_RETRY_WINDOW_S="1",
                    WARROOM_EGRESS_RULES=str(_egress_rules(data, prom)),
                    WARROOM_EGRESS_UPSTREAM_CA=str(data / "ca.pem"),
                    PROM_PASSWORD=PASSWORD,
                )
                serve = await start("serve", env=env, cwd=tmp_path)
                assert serve.stderr is not None
                log = Output(serve.stderr)
                reading = asyncio.create_task(log.until(lambda _: False, timeout_s=600))
                try:
                    # When the exporter's 500 counter rises, the rule fires
                    prom.exporter.errors_total = 7
                    # Then a thread opens in the routed channel with "on it" and a Stop button
                    await slack.wait_for(
                        lambda: any("on it" in t for _, t in _texts(slack)), timeout_s=90.0
                    )
                    (root,) = {r for r, t in _texts(slack) if "CheckoutErrors" in t or "500s" in t}
                    # and the session asks the real Prometheus through the gateway
                    await slack.wait_for(
                        lambda: any("Hypothesis" in t for _, t in _texts(slack)), timeout_s=90.0
                    )
                    asked = [json.dumps(r.body) for r in model.requests]
                    assert any('\\"status\\":\\"success\\"' in a and query in a for a in asked)
                    # and a later notification of the still-firing group is a reply there
                    await slack.wait_for(
                        lambda: any("Still firing" in t for _, t in _texts(slack)),
                        timeout_s=60.0,
                    )
                    # When the counter falls back, the alert resolves
                    prom.exporter.errors_total = 0
                    await slack.wait_for(
                        lambda: any("Resolved at" in t for _, t in _texts(slack)),
                        timeout_s=90.0,
                    )
                    await slack.wait_for(
                        lambda: any("Resolved at" in json.dumps(r.body) for r in model.requests),
                        timeout_s=60.0,
                    )
                finally:
                    serve.send_signal(signal.SIGTERM)
                    code = await finish(serve)
                    reading.cancel()
                    with contextlib.suppress(asyncio.CancelledError, AssertionError):
                        await reading
    finally:
        await slack.stop()
    # Then everything happened in one thread, and the resolve asked about the hypothesis
    texts = _texts(slack)
    assert {r for r, _ in texts} == {root}
    resolve_asks = [
        json.dumps(r.body) for r in model.requests if "Resolved at" in json.dumps(r.body)
    ]
    assert "hypothesis" in resolve_asks[0]
    assert code == 0, log.text[-3000:]
