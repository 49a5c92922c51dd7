"""What is not HTTP/1.1, sent to the gateway's plain port, is answered at once with a 400
that says what the gateway is and what was wrong (a real TLS hello, a typed line), and a
request that is HTTP is still served."""

from __future__ import annotations

import asyncio
import doctest
import ssl
from collections.abc import AsyncIterator

import pytest

from sandbox_client.gateway import (
    Caller,
    CertificateAuthority,
    EgressRecord,
    Gateway,
    GatewayOptions,
    Rules,
    prepare,
)
from sandbox_client.gateway import request_line as request_line_module

ANSWER_DEADLINE_S = 20.0
"""How long a test waits for the gateway's answer; its idle timeout is far longer, so a
gateway that waits for more bytes instead of answering fails the test."""


@pytest.fixture
async def port() -> AsyncIterator[int]:
    rules = Rules.parse("rules: []")

    async def audit(_: EgressRecord) -> None:
        return None

    options = GatewayOptions(idle_timeout_s=600.0)
    gateway = Gateway(
        rules, CertificateAuthority.create(), prepare(rules.rules, {}), audit, options
    )
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-1", "C-1"))
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        await gateway.aclose(0.1)


def client_hello() -> bytes:
    """The first flight of a real TLS client (what ``curl https://gateway:3128`` sends)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="gw.internal")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


async def exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), ANSWER_DEADLINE_S)  # then it closes
    finally:
        writer.close()


async def test_a_tls_hello_on_the_plain_port_gets_a_400_saying_so(port: int) -> None:
    hello = client_hello()
    assert b"\n" not in hello[:5]  # a record header: no line for h11 to finish

    reply = await exchange(port, hello)

    assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"a TLS handshake sent to the plain HTTP port" in reply
    assert b"egress gateway, an HTTP proxy" in reply


@pytest.mark.parametrize("line", [b"HELLO THERE\r\n", b"garbage\n", b"GET / HTTP/1.1 extra\r\n"])
async def test_a_garbage_request_line_gets_a_400_before_any_header(port: int, line: bytes) -> None:
    reply = await exchange(port, line)  # no blank line: the head never ends

    assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"is not 'METHOD target HTTP/1.1'" in reply


async def test_a_request_sent_a_byte_at_a_time_is_still_served(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for byte in b"GET http://nowhere.example/ HTTP/1.1\r\nHost: nowhere.example\r\n\r\n":
            writer.write(bytes([byte]))
            await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), ANSWER_DEADLINE_S)
    finally:
        writer.close()

    assert head.startswith(b"HTTP/1.1 403 Forbidden\r\n")  # judged by the rules, not refused


def test_the_request_line_examples_hold() -> None:
    result = doctest.testmod(request_line_module)

    assert result.attempted > 0
    assert result.failed == 0
