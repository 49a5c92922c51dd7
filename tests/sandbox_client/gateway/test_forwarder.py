"""The jail's loopback forwarder carries proxy traffic to the gateway's Unix socket."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx

from sandbox_client.gateway import Caller, CertificateAuthority, Gateway, Rules
from sandbox_client.server.egress import start_forwarder


async def _no_audit(_: object) -> None:
    return None


async def test_the_forwarder_carries_requests_to_the_gateway_socket() -> None:
    # Given a gateway on a Unix socket (as bound into a jail) and the forwarder on loopback
    directory = Path(tempfile.mkdtemp(prefix="wr-fw-"))
    socket_path = directory / "egress.sock"
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, _no_audit)
    await gateway.serve_unix(socket_path, Caller("s-fw"))
    forwarder = await start_forwarder(0, str(socket_path))
    port = forwarder.sockets[0].getsockname()[1]
    try:
        # When a program uses the forwarder as its HTTP proxy
        async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", trust_env=False) as c:
            response = await c.get("http://metrics.internal/api/v1/query")
    finally:
        forwarder.close()
        await gateway.aclose()
    # Then the gateway answered it (no rule: blocked, with its text)
    assert response.status_code == 403
    assert "no rule allows metrics.internal:80" in response.text


async def test_without_a_gateway_the_forwarder_answers_502_in_plain_words() -> None:
    directory = Path(tempfile.mkdtemp(prefix="wr-fw-"))
    forwarder = await start_forwarder(0, str(directory / "absent.sock"))
    port = forwarder.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", trust_env=False) as c:
            response = await c.get("http://metrics.internal/")
    finally:
        forwarder.close()
    assert response.status_code == 502
    assert "egress gateway is not reachable" in response.text
