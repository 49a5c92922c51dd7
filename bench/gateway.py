"""The egress gateway's cost: latency added over a direct request, and throughput.

Run: ``.venv/bin/python bench/gateway.py [RUNS]`` (default 400). Prints one JSON line. The
upstream is a local aiohttp server (plain HTTP and HTTPS with a private CA); each mode is
measured interleaved with a direct request to the same upstream in the same run, over kept-alive
connections, so the figures are ratios of like with like on a noisy machine:

* ``plain_added_p50_ms``/``_p99_ms``: ``GET http://…`` through the gateway (an allow rule)
  minus direct;
* ``tunnel_added_p50_ms``/``_p99_ms``: HTTPS through a ``CONNECT`` tunnel (a tunnel rule);
* ``tls_inject_added_p50_ms``/``_p99_ms``: HTTPS terminated by the gateway, a bearer token
  injected and scrubbed from the reply (a credential rule);
* ``rps_50_clients``/``direct_rps_50_clients``: requests a second with 50 concurrent clients
  through the credential rule, and direct; ``errors``: failed requests in the whole run.
Goals (issue #14): added p50 ≤ 1 ms for tunnels, ≤ 3 ms with TLS termination, 0 errors.

The per-call binding is on, as in a worker (issue #24): every client's proxy URL carries a
call's per-call credential, checked by the gateway on each connection, and an approval check
is configured (reads do not consult it).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import httpx
from aiohttp import web

from sandbox_client.gateway import (
    CallCredentials,
    Caller,
    CertificateAuthority,
    Gateway,
    GatewayOptions,
    Rules,
)
from sandbox_client.gateway import prepare as prepare_secrets

HOST = "localhost"
BODY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


async def _ok(_: web.Request) -> web.Response:
    return web.Response(body=BODY, content_type="application/json")


def _pct(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def _timed(call: Callable[[], Awaitable[httpx.Response]], errors: list[int]) -> float:
    started = time.perf_counter()
    try:
        response = await call()
        if response.status_code != 200:
            errors.append(response.status_code)
    except httpx.HTTPError:
        errors.append(0)
    return (time.perf_counter() - started) * 1000


async def main(runs: int) -> dict[str, float | int]:
    upstream_ca = CertificateAuthority.create("bench upstream CA")
    app = web.Application()
    app.router.add_get("/{tail:.*}", _ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tls_site = web.TCPSite(runner, HOST, 0, ssl_context=upstream_ca.server_context(HOST))
    plain_site = web.TCPSite(runner, HOST, 0)
    await tls_site.start()
    await plain_site.start()
    tls_port = tls_site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    plain_port = plain_site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    upstream_trust = ssl.create_default_context(cadata=upstream_ca.cert_pem().decode())

    rules = Rules.parse(
        f"""
rules:
  - name: plain
    hosts: [{HOST}]
    ports: [{plain_port}]
  - name: tunnel
    hosts: [127.0.0.1]
    ports: [{tls_port}]
    tunnel: true
  - name: prom
    hosts: [{HOST}]
    ports: [{tls_port}]
    inject: {{type: bearer, token: {{env: TOKEN}}}}
"""
    )
    authority = CertificateAuthority.create()

    async def audit(_: object) -> None:
        return None

    async def approved(_session_id: str, _tool_use_id: str) -> bool:
        return True

    calls = CallCredentials.derived_from(authority.key)

    gateway = Gateway(
        rules,
        authority,
        prepare_secrets(rules.rules, {"TOKEN": "bench-token-0123456789"}),
        audit,
        GatewayOptions(upstream_verify=upstream_trust, approved=approved, calls=calls),
    )
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("bench"))
    userinfo = calls.userinfo("bench", "toolu_bench")
    proxy = f"http://{userinfo}@127.0.0.1:{server.sockets[0].getsockname()[1]}"
    gateway_trust = ssl.create_default_context(cadata=authority.cert_pem().decode())
    # the tunnel goes to 127.0.0.1, whose certificate the upstream CA must name
    tunnel_trust = ssl.create_default_context(cadata=upstream_ca.cert_pem().decode())
    tunnel_trust.check_hostname = False

    limits = httpx.Limits(max_connections=60, max_keepalive_connections=60)
    direct_plain = httpx.AsyncClient(trust_env=False, limits=limits)
    direct_tls = httpx.AsyncClient(verify=upstream_trust, trust_env=False, limits=limits)
    via_plain = httpx.AsyncClient(proxy=proxy, trust_env=False, limits=limits)
    via_tunnel = httpx.AsyncClient(proxy=proxy, verify=tunnel_trust, trust_env=False)
    direct_tunnel = httpx.AsyncClient(verify=tunnel_trust, trust_env=False)
    via_tls = httpx.AsyncClient(proxy=proxy, verify=gateway_trust, trust_env=False, limits=limits)
    plain_url = f"http://{HOST}:{plain_port}/api/v1/query?query=up"
    tls_url = f"https://{HOST}:{tls_port}/api/v1/query?query=up"
    tunnel_url = f"https://127.0.0.1:{tls_port}/api/v1/query?query=up"
    errors: list[int] = []
    pairs = {
        "plain": (lambda: direct_plain.get(plain_url), lambda: via_plain.get(plain_url)),
        "tunnel": (lambda: direct_tunnel.get(tunnel_url), lambda: via_tunnel.get(tunnel_url)),
        "tls_inject": (lambda: direct_tls.get(tls_url), lambda: via_tls.get(tls_url)),
    }
    out: dict[str, float | int] = {"runs": runs}
    try:
        for name, (direct, via) in pairs.items():
            for _ in range(20):  # warm the pools, the host certificate and the tunnel
                await direct()
                await via()
            added: list[float] = []
            for _ in range(runs):
                d = await _timed(direct, errors)
                v = await _timed(via, errors)
                added.append(v - d)
            out[f"{name}_added_p50_ms"] = round(statistics.median(added), 3)
            out[f"{name}_added_p99_ms"] = round(_pct(added, 0.99), 3)
        for label, client, url in (
            ("rps_50_clients", via_tls, tls_url),
            ("direct_rps_50_clients", direct_tls, tls_url),
        ):
            started = time.perf_counter()
            total = 0

            async def worker(c: httpx.AsyncClient = client, u: str = url) -> int:
                for _ in range(max(runs // 10, 10)):
                    await _timed(lambda: c.get(u), errors)
                return max(runs // 10, 10)

            total = sum(await asyncio.gather(*(worker() for _ in range(50))))
            out[label] = round(total / (time.perf_counter() - started), 1)
        out["errors"] = len(errors)
        out["goal_tunnel_added_p50_ms"], out["goal_tls_inject_added_p50_ms"] = 1.0, 3.0
        out["goals_met"] = int(
            out["tunnel_added_p50_ms"] <= 1.0
            and out["tls_inject_added_p50_ms"] <= 3.0
            and not errors
        )
    finally:
        for client in (direct_plain, direct_tls, via_plain, via_tunnel, direct_tunnel, via_tls):
            await client.aclose()
        await gateway.aclose()
        await runner.cleanup()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 400))))
