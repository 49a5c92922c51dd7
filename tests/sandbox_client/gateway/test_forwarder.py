"""The jail's loopback forwarder carries proxy traffic to the gateway's Unix socket."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx

from sandbox_client.gateway import (
    CallCredentials,
    Caller,
    CertificateAuthority,
    EgressRecord,
    Gateway,
    GatewayOptions,
    Rules,
)


async def _no_audit(_: object) -> None:
    return None


@contextlib.asynccontextmanager
async def _forwarder(socket_path: Path) -> AsyncIterator[int]:
    """The jail's forwarder to ``socket_path``, run alone in a process of its own (its own
    event loop, as in a jail); yields its loopback port."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sandbox_client.server.egress", str(socket_path),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        yield int(await process.stdout.readline())
    finally:
        process.terminate()
        await process.wait()


async def test_the_forwarder_carries_requests_to_the_gateway_socket() -> None:
    # Given a gateway on a Unix socket (as bound into a jail) and the forwarder on loopback
    directory = Path(tempfile.mkdtemp(prefix="wr-fw-"))
    socket_path = directory / "egress.sock"
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, _no_audit)
    await gateway.serve_unix(socket_path, Caller("s-fw"))
    try:
        # When a program uses the forwarder as its HTTP proxy
        async with (
            _forwarder(socket_path) as port,
            httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", trust_env=False) as c,
        ):
            response = await c.get("http://metrics.internal/api/v1/query")
    finally:
        await gateway.aclose()
    # Then the gateway answered it (no rule: blocked, with its text)
    assert response.status_code == 403
    assert "no rule allows metrics.internal:80" in response.text


async def test_without_a_gateway_the_forwarder_answers_502_in_plain_words() -> None:
    directory = Path(tempfile.mkdtemp(prefix="wr-fw-"))
    async with (
        _forwarder(directory / "absent.sock") as port,
        httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", trust_env=False) as c,
    ):
        response = await c.get("http://metrics.internal/")
    assert response.status_code == 502
    assert "egress gateway is not reachable" in response.text


async def _get_through_socket(socket_path: Path, userinfo: str) -> bytes:
    """One proxy request (absolute form) straight to the socket, as the forwarder sends it,
    with a call's proxy credential (``user:password``)."""
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    auth = base64.b64encode(userinfo.encode())
    writer.write(
        b"GET http://metrics.internal/x HTTP/1.1\r\nHost: metrics.internal\r\n"
        b"Proxy-Authorization: Basic " + auth + b"\r\n\r\n"
    )
    await writer.drain()
    reply = await reader.read()
    writer.close()
    return reply


async def test_the_process_running_the_current_command_serves_the_sandbox_socket() -> None:
    # Given two worker processes' gateways and one sandbox socket path
    directory = Path(tempfile.mkdtemp(prefix="wr-fw-"))
    path = directory / "egress.sock"
    seen: dict[str, list[str | None]] = {"one": [], "two": []}

    def audit_for(name: str) -> Callable[[EgressRecord], Awaitable[None]]:
        async def audit(record: EgressRecord) -> None:
            seen[name].append(record.tool_use_id)

        return audit

    authority = CertificateAuthority.create()  # one deployment's: both derive one key
    calls = CallCredentials.derived_from(authority.key)
    options = GatewayOptions(calls=CallCredentials.derived_from(authority.key))
    one = Gateway(Rules(), authority, {}, audit_for("one"), options)
    two = Gateway(Rules(), authority, {}, audit_for("two"), options)
    try:
        # When the first runs toolu_1, then toolu_2, then the second runs toolu_3
        await one.bind(path, Caller("s-1"))
        await _get_through_socket(path, calls.userinfo("s-1", "toolu_1"))
        await one.bind(path, Caller("s-1"))
        await _get_through_socket(path, calls.userinfo("s-1", "toolu_2"))
        await two.bind(path, Caller("s-1"))
        await _get_through_socket(path, calls.userinfo("s-1", "toolu_3"))
    finally:
        await one.aclose()
        await two.aclose()
    # Then each request was served by the process running it, under the call it proved
    assert seen == {"one": ["toolu_1", "toolu_2"], "two": ["toolu_3"]}
