"""The gateway in front of a real Prometheus (TLS, basic auth): the password is added at the
boundary and never reaches the caller, and a rule is needed for any of it."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import httpx
import pytest

from sandbox_client.gateway import Caller, CertificateAuthority, Gateway, GatewayOptions, Rules
from sandbox_client.gateway import prepare as prepare_secrets
from tests.sandbox_client.gateway.prometheus import PASSWORD, USER, Prometheus, real_prometheus


@pytest.fixture
async def prometheus() -> AsyncIterator[Prometheus]:
    async with real_prometheus() as running:
        yield running


def _rules(prom: Prometheus) -> Rules:
    return Rules.parse(
        f"""
rules:
  - name: prometheus
    hosts: [{prom.host}]
    ports: [{prom.port}]
    paths: [/api/v1/]
    inject: {{type: basic, username: {USER}, password: {{env: PROM_PASSWORD}}}}
    description: metrics of every service
    base_url: {prom.base_url}
"""
    )


async def _through(prom: Prometheus, rules: Rules, url: str) -> httpx.Response:
    authority = CertificateAuthority.create()
    audit_records: list[object] = []

    async def audit(record: object) -> None:
        audit_records.append(record)

    gateway = Gateway(
        rules,
        authority,
        prepare_secrets(rules.rules, {"PROM_PASSWORD": PASSWORD}),
        audit,
        GatewayOptions(upstream_verify=prom.trust),
    )
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-prom", "C-INC"))
    proxy = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    trust = ssl.create_default_context(cadata=authority.cert_pem().decode())
    try:
        async with httpx.AsyncClient(proxy=proxy, verify=trust, trust_env=False) as client:
            return await client.get(url)
    finally:
        await gateway.aclose()


async def test_a_query_through_the_gateway_returns_data_with_the_password_added_there(
    prometheus: Prometheus,
) -> None:
    # Given the exporter's error counter rising
    prometheus.exporter.errors_total = 42
    # When a caller with no credential queries Prometheus through the gateway
    response = await _through(
        prometheus, _rules(prometheus), f"{prometheus.base_url}/api/v1/query?query=up"
    )
    # Then Prometheus answered (it refuses requests without basic auth) with the scrape result
    assert response.status_code == 200, response.text
    result = response.json()["data"]["result"]
    assert result
    assert result[0]["metric"]["job"] == "checkout-api"
    assert PASSWORD not in response.text


async def test_prometheus_refuses_the_same_query_without_the_gateway(
    prometheus: Prometheus,
) -> None:
    async with httpx.AsyncClient(verify=prometheus.trust, trust_env=False) as client:
        response = await client.get(f"{prometheus.base_url}/api/v1/query?query=up")
    assert response.status_code == 401


async def test_without_a_rule_the_query_is_blocked_with_the_403_text(
    prometheus: Prometheus,
) -> None:
    response = await _through(prometheus, Rules(), f"{prometheus.base_url}/api/v1/query?query=up")
    assert response.status_code == 403
    assert f"no rule allows 127.0.0.2:{prometheus.port}" in response.text
    assert "WARROOM_EGRESS_RULES" in response.text
