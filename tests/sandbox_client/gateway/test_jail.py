"""A real jail reaching a real Prometheus through the gateway: curl and Python work unchanged,
the password is added at the boundary and appears nowhere in the sandbox, and the database
stays out of reach."""

from __future__ import annotations

import asyncio
import os
import shlex
import ssl
import sys
import sysconfig
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox_client import (
    JailEgress,
    LocalProvider,
    SandboxClient,
    SandboxHandle,
    egress_socket,
)
from sandbox_client.gateway import (
    Caller,
    CertificateAuthority,
    EgressRecord,
    Gateway,
    GatewayOptions,
    Rules,
)
from sandbox_client.gateway import prepare as prepare_secrets
from tests.sandbox_client.conftest import local_config
from tests.sandbox_client.gateway.prometheus import PASSWORD, USER, Prometheus, real_prometheus

pytestmark = pytest.mark.bwrap
SITE = sysconfig.get_paths()["purelib"]  # this venv's packages, bound read-only for httpx
PYTHON = os.path.realpath(sys.executable)


@dataclass
class Jail:
    client: SandboxClient
    prometheus: Prometheus
    audit: list[EgressRecord]

    async def run(self, command: str) -> tuple[int | None, str]:
        record = await self.client.exec(f"c-{abs(hash(command))}", command, timeout_s=30)
        return record.exit_code, record.stdout + record.stderr


@pytest.fixture
async def jail(state_dir: Path, tmp_path: Path) -> AsyncIterator[Jail]:
    async with real_prometheus() as prometheus:
        authority = CertificateAuthority.create()
        trust = await asyncio.to_thread(authority.write_trust, tmp_path)
        egress = JailEgress(ca_bundle=trust.ca_bundle, ca_cert=trust.ca_cert)
        provider = LocalProvider(local_config(state_dir, egress=egress, ro_binds=(SITE,)))
        rules = Rules.parse(
            f"rules:\n  - name: prometheus\n    hosts: [{prometheus.host}]\n"
            f"    ports: [{prometheus.port}]\n    paths: [/api/v1/]\n"
            f"    inject: {{type: basic, username: {USER}, password: {{env: PROM_PW}}}}\n"
        )
        audit: list[EgressRecord] = []

        async def record(entry: EgressRecord) -> None:
            audit.append(entry)

        gateway = Gateway(
            rules,
            authority,
            prepare_secrets(rules.rules, {"PROM_PW": PASSWORD}),
            record,
            GatewayOptions(upstream_verify=_trust(prometheus)),
        )
        handle = await provider.provision("gw-jail")
        try:
            await gateway.bind(egress_socket(Path(_socket_of(handle))), Caller("s-j", "C-1"))
            async with provider.connect(handle) as client:
                yield Jail(client, prometheus, audit)
        finally:
            await gateway.aclose()
            await provider.destroy(handle)


def _trust(prometheus: Prometheus) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=prometheus.ca_pem.decode())


async def test_curl_in_the_sandbox_queries_prometheus_with_the_password_added_outside(
    jail: Jail,
) -> None:
    url = f"{jail.prometheus.base_url}/api/v1/query?query=up"
    code, out = await jail.run(f"curl -sS --fail-with-body {shlex.quote(url)}")
    assert code == 0, out
    assert '"status":"success"' in out
    assert '"job":"checkout-api"' in out
    assert [r.outcome.value for r in jail.audit] == ["injected"]


async def test_python_in_the_sandbox_works_through_the_gateway_unchanged(jail: Jail) -> None:
    url = f"{jail.prometheus.base_url}/api/v1/query?query=up"
    script = f"import urllib.request; print(urllib.request.urlopen({url!r}).read().decode())"
    code, out = await jail.run(f"python3 -c {shlex.quote(script)}")
    assert code == 0, out
    assert '"status":"success"' in out


async def test_httpx_in_the_sandbox_works_through_the_gateway_unchanged(jail: Jail) -> None:
    url = f"{jail.prometheus.base_url}/api/v1/query?query=up"
    script = (
        f"import sys; sys.path.insert(0, {SITE!r}); import httpx; print(httpx.get({url!r}).text)"
    )
    code, out = await jail.run(f"{PYTHON} -c {shlex.quote(script)}")
    assert code == 0, out
    assert '"status":"success"' in out


async def test_a_post_to_the_read_only_rule_is_refused_in_words(jail: Jail) -> None:
    url = f"{jail.prometheus.base_url}/api/v1/admin/tsdb/snapshot"
    code, out = await jail.run(f"curl -sS -X POST {shlex.quote(url)}")
    assert code == 0, out
    assert "POST is not allowed to 127.0.0.2 (only GET, HEAD)" in out


async def test_the_password_is_nowhere_in_the_sandbox(jail: Jail) -> None:
    url = f"{jail.prometheus.base_url}/api/v1/query?query=up"
    await jail.run(f"curl -sS {shlex.quote(url)} -o /workspace/reply.json")
    checks = [
        "env",
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'",
        "grep -rla . /workspace /tmp /run/warroom /etc/warroom 2>/dev/null | xargs cat 2>/dev/null",
        "cat /workspace/reply.json",
    ]
    for command in checks:
        _, out = await jail.run(command)
        assert PASSWORD not in out, command


async def test_the_database_stays_unreachable_with_the_gateway_on(jail: Jail) -> None:
    code, _ = await jail.run("curl -sS --max-time 3 --noproxy '*' http://127.0.0.1:5432/")
    assert code != 0
    _, via_proxy = await jail.run("curl -sS --max-time 5 http://10.0.0.1:5432/")
    assert "no rule allows 10.0.0.1:5432" in via_proxy


def _socket_of(handle: SandboxHandle) -> str:
    """A local sandbox's control socket (local handles always have one)."""
    assert handle.socket_path is not None, handle
    return handle.socket_path
