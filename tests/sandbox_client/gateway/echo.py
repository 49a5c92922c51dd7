"""A recording upstream, a gateway in front of it, and a raw client, for the boundary tests.

The upstream is an aiohttp server (HTTPS with a private CA, and plain HTTP) that records each
request as it arrived (method, raw target, headers, body) and echoes it; a test may give a
path its own reply. The raw client writes request bytes as an attacker would (no client
library tidying the path first), through the gateway as a proxy: a plain absolute-form request,
or a ``CONNECT`` then TLS to the gateway (trusting its CA) then any request line.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import h11
from aiohttp import web

from sandbox_client.gateway import (
    Caller,
    CertificateAuthority,
    EgressRecord,
    Gateway,
    GatewayOptions,
    Rules,
    prepare,
)

HOST = "localhost"
Reply = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Seen:
    """One request as the upstream received it."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Echo:
    """The running upstream: its ports, the trust a client needs, what it received."""

    https_port: int
    http_port: int
    trust: ssl.SSLContext
    seen: list[Seen] = field(default_factory=list)
    replies: dict[str, Reply] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(request.method, request.raw_path, dict(request.headers), body))
        reply = self.replies.get(request.path)
        if reply is not None:
            return await reply(request)
        echoed = {
            "method": request.method,
            "target": request.raw_path,
            "headers": dict(request.headers),
            "body": body.decode("latin-1"),
        }
        return web.json_response(echoed)


@asynccontextmanager
async def echo_upstream() -> AsyncIterator[Echo]:
    """An ``Echo`` listening on loopback (HTTPS and HTTP) for the block's duration."""
    authority = CertificateAuthority.create("echo upstream CA")
    trust = ssl.create_default_context(cadata=authority.cert_pem().decode())
    app = web.Application()
    holder: list[Echo] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        return await holder[0].handle(request)

    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tls = web.TCPSite(runner, HOST, 0, ssl_context=authority.server_context(HOST))
    plain = web.TCPSite(runner, HOST, 0)
    await tls.start()
    await plain.start()
    holder.append(Echo(_port(tls), _port(plain), trust))
    try:
        yield holder[0]
    finally:
        await runner.cleanup()


def _port(site: web.TCPSite) -> int:
    server = site._server
    assert server is not None
    return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]


@dataclass
class Front:
    """A gateway serving one caller on loopback: its address, its CA, its audit."""

    gateway: Gateway
    address: tuple[str, int]
    trust: ssl.SSLContext
    audit: list[EgressRecord]

    @property
    def proxy_url(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}"


@asynccontextmanager
async def front(
    echo: Echo, rules_text: str, environ: dict[str, str], **options: object
) -> AsyncIterator[Front]:
    """A gateway with ``rules_text`` (secrets from ``environ``) trusting the echo's CA."""
    rules = Rules.parse(rules_text)
    authority = CertificateAuthority.create()
    audit: list[EgressRecord] = []

    async def record(entry: EgressRecord) -> None:
        audit.append(entry)

    gateway = Gateway(
        rules,
        authority,
        prepare(rules.rules, environ),
        record,
        GatewayOptions(upstream_verify=echo.trust, **options),  # type: ignore[arg-type]
    )
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-t2", "C-INC"))
    address = server.sockets[0].getsockname()[:2]
    trust = ssl.create_default_context(cadata=authority.cert_pem().decode())
    try:
        yield Front(gateway, (address[0], address[1]), trust, audit)
    finally:
        await gateway.aclose()


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


async def raw(
    gw: Front,
    request: bytes,
    *,
    connect: str | None = None,
    method: str = "GET",
) -> Response:
    """Send ``request`` (a whole request, head and body, as bytes) through the gateway and
    read its answer: on the plain connection, or after ``CONNECT connect`` and TLS with the
    gateway (``connect`` is ``host:port``). ``method`` tells the parser whether a body follows
    (HEAD). A reply cut off is returned as far as it came (``status`` 0 if no head came)."""
    reader, writer = await asyncio.open_connection(*gw.address)
    try:
        if connect is not None:
            writer.write(f"CONNECT {connect} HTTP/1.1\r\nHost: {connect}\r\n\r\n".encode())
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            await writer.start_tls(gw.trust, server_hostname=connect.rsplit(":", 1)[0])
        writer.write(request)
        await writer.drain()
        return await _read_response(reader, method)
    finally:
        writer.close()


async def _read_response(reader: asyncio.StreamReader, method: str) -> Response:
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/", headers=[("host", "x")]))
    conn.send(h11.EndOfMessage())
    status, body = 0, b""
    headers: dict[str, str] = {}
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:  # cut off: what arrived so far (status 0: no head)
            return Response(status, headers, body)
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(65_536))
        elif isinstance(event, h11.Response):
            status = event.status_code
            headers = {k.decode(): v.decode("latin-1") for k, v in event.headers}
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return Response(status, headers, body)
