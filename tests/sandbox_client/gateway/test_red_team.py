"""Red team, promises 2, 3, 4 and 7 through the real gateway: attempts made after the fixes,
as a planted process writing raw bytes and a hostile upstream writing raw replies would.

Each test passes when the promise holds: no credential over plain HTTP or unverified TLS (2),
no path outside a rule's prefix reaches the upstream (3), no change through a read-only rule
(4), no form of the secret the README lists as covered comes back (7).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from tests.sandbox_client.gateway.echo import HOST, Echo, Front, front, raw

TOKEN = "tok-red-5f1c9a2e7b"
SECRET = TOKEN.encode()


def _rules(echo: Echo, extra: str = "") -> str:
    """api: a GET-only credential rule on /api/ over https; forms: GET and POST on /forms/;
    public: a credential rule on /public/ over https."""
    return (
        "rules:\n"
        f"  - name: api\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
        "    paths: [/api/]\n    inject: {type: bearer, token: {env: API_TOKEN}}\n"
        f"  - name: forms\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
        "    paths: [/forms/]\n    methods: [GET, POST]\n"
        "    inject: {type: bearer, token: {env: API_TOKEN}}\n"
        f"  - name: public\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
        "    paths: [/public/]\n    inject: {type: bearer, token: {env: API_TOKEN}}\n" + extra
    )


async def _tls(gw: Front, echo: Echo, request: bytes, method: str = "GET") -> int:
    return (await raw(gw, request, connect=f"{HOST}:{echo.https_port}", method=method)).status


def _no_secret_in_clear(echo: Echo) -> bool:
    """Whether no request reached the upstream's plain port with the secret (the echo
    records both ports alike, so a secret request on either counts)."""
    return all(TOKEN not in s.headers.get("Authorization", "") for s in echo.seen)


# --- promise 2: a credential goes only over verified TLS ---------------------------------


async def test_p2_http_1_0_absolute_form_to_the_tls_port_gets_no_secret(echo: Echo) -> None:
    rules = _rules(echo).replace(
        f"ports: [{echo.https_port}]", f"ports: [{echo.https_port}, {echo.http_port}]", 1
    )
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        statuses = [
            (await raw(gw, f"GET http://{HOST}:{port}/api/x HTTP/1.0\r\n\r\n".encode())).status
            for port in (echo.https_port, echo.http_port)
        ]
    assert statuses == [403, 403]
    assert echo.seen == []


@pytest.mark.parametrize("host", ["LOCALHOST", "localhost.", "LocalHost.", "127.0.0.1"])
async def test_p2_a_host_spelled_otherwise_over_http_gets_no_secret(echo: Echo, host: str) -> None:
    rules = _rules(echo).replace(
        f"ports: [{echo.https_port}]", f"ports: [{echo.https_port}, {echo.http_port}]", 1
    )
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        head = f"GET http://{host}:{echo.http_port}/api/x HTTP/1.1\r\nHost: {host}\r\n\r\n"
        await raw(gw, head.encode())
    assert _no_secret_in_clear(echo)


async def test_p2_origin_form_on_the_plain_proxy_port_gets_no_secret(echo: Echo) -> None:
    rules = _rules(echo).replace(
        f"ports: [{echo.https_port}]", f"ports: [{echo.https_port}, {echo.http_port}]", 1
    )
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        head = f"GET /api/x HTTP/1.1\r\nHost: {HOST}:{echo.http_port}\r\n\r\n"
        response = await raw(gw, head.encode())
    assert response.status >= 400
    assert echo.seen == []


async def test_p2_an_upstream_certificate_for_another_name_gets_no_secret(echo: Echo) -> None:
    # Given a credential rule naming the upstream by an IP its certificate does not carry
    rules = (
        f"rules:\n  - name: ip\n    hosts: [127.0.0.1]\n    ports: [{echo.https_port}]\n"
        "    inject: {type: bearer, token: {env: API_TOKEN}}\n"
    )
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        response = await raw(
            gw,
            b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            connect=f"127.0.0.1:{echo.https_port}",
        )
    # Then the gateway's TLS to it failed verification: nothing was sent
    assert response.status == 502
    assert echo.seen == []


async def test_p2_a_redirect_to_http_is_not_followed_with_the_secret(echo: Echo) -> None:
    async def redirect(request: web.Request) -> web.StreamResponse:
        raise web.HTTPTemporaryRedirect(f"http://{HOST}:{echo.http_port}/api/stolen")

    echo.replies["/api/go"] = redirect
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        status = await _tls(gw, echo, f"GET /api/go HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    assert status == 307
    assert [s.target for s in echo.seen] == ["/api/go"]


async def test_p2_userinfo_in_an_absolute_url_does_not_move_the_host(echo: Echo) -> None:
    rules = _rules(echo).replace(
        f"ports: [{echo.https_port}]", f"ports: [{echo.https_port}, {echo.http_port}]", 1
    )
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        head = (
            f"GET http://{HOST}:{echo.https_port}@{HOST}:{echo.http_port}/api/x HTTP/1.1\r\n"
            f"Host: {HOST}\r\n\r\n"
        )
        await raw(gw, head.encode())
    assert _no_secret_in_clear(echo)


# --- promise 3: path prefixes hold --------------------------------------------------------


def _inside_public(echo: Echo) -> bool:
    return all(s.target.startswith("/public/") and ".." not in s.target for s in echo.seen)


@pytest.mark.parametrize(
    "target",
    [
        b"/public/%EF%BC%852e%EF%BC%852e/private",  # a fullwidth % before 2e
        b"/public/\xef\xbc\x8e\xef\xbc\x8e/private",  # raw UTF-8 fullwidth dots, not escaped
        b"/public/..",
        b"/public/%2e%2E",
        b"/public//../../private",
        b"/public/.%2E/.%2e/private",
        b"/public/%2e%2e%2f%2e%2e%2fprivate",
        b"/public/\t../private",
        b"/PUBLIC/../private",
        b"http://localhost/public/../private",
    ],
)
async def test_p3_a_climb_in_another_spelling_never_leaves_the_prefix(
    echo: Echo, target: bytes
) -> None:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        await _tls(gw, echo, b"GET " + target + f" HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    assert _inside_public(echo), echo.seen


async def test_p3_a_pipelined_climb_after_an_allowed_request_is_refused(echo: Echo) -> None:
    first = f"GET /public/ok HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
    second = f"GET /public/../private HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        reader, writer = await _tls_connection(gw, echo)
        writer.write((first + second).encode())
        await writer.drain()
        replies = await reader.read()
        writer.close()
    assert b"HTTP/1.1 403" in replies
    assert [s.target for s in echo.seen] == ["/public/ok"]


@pytest.mark.parametrize(
    "header", ["X-Original-URL: /private/admin", "X-Rewrite-URL: /private/admin"]
)
async def test_p3_a_path_override_header_does_not_reach_the_upstream(
    echo: Echo, header: str
) -> None:
    # Given a request inside the prefix carrying a header some servers read as the path
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        head = f"GET /public/x HTTP/1.1\r\nHost: {HOST}\r\n{header}\r\n\r\n"
        status = await _tls(gw, echo, head.encode())
    # Then it is refused, or the header is not passed on
    name = header.split(":")[0].lower()
    assert status == 403 or all(name not in {k.lower() for k in s.headers} for s in echo.seen), (
        echo.seen
    )


async def _tls_connection(
    gw: Front, echo: Echo
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(*gw.address)
    connect = f"{HOST}:{echo.https_port}"
    writer.write(f"CONNECT {connect} HTTP/1.1\r\nHost: {connect}\r\n\r\n".encode())
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")
    await writer.start_tls(gw.trust, server_hostname=HOST)
    return reader, writer


# --- promise 4: read-only rules are read-only ---------------------------------------------


def _no_change_reached(echo: Echo) -> bool:
    """Whether every request that reached the upstream was a plain read or a POST without
    an override (what the rules allow)."""
    for s in echo.seen:
        if s.method not in ("GET", "HEAD", "POST"):
            return False
        overrides = [v for k, v in s.headers.items() if "method" in k.lower()]
        if overrides or b"_method" in s.body.lower() or "_method" in s.target.lower():
            return False
    return True


METHOD_ATTEMPTS = [
    # a folded (obs-fold) override header
    b"GET /api/x HTTP/1.1\r\nHost: localhost\r\nX-HTTP-Method-Override: GET\r\n DELETE\r\n\r\n",
    # a space before the colon
    b"GET /api/x HTTP/1.1\r\nHost: localhost\r\nX-HTTP-Method-Override : DELETE\r\n\r\n",
    # the verb itself in lower case
    b"delete /api/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    # HTTP/1.0 with an override
    b"GET /api/x HTTP/1.0\r\nHost: localhost\r\nX-HTTP-Method-Override: DELETE\r\n\r\n",
    # the same parameter twice, read first or last by different servers
    b"GET /api/x?_method=GET&_method=DELETE HTTP/1.1\r\nHost: localhost\r\n\r\n",
    # a form body, chunked, the parameter's name split between chunks
    b"POST /forms/x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\n\r\n"
    b"4\r\n_met\r\n a\r\nhod=DELETE\r\n0\r\n\r\n",
    # an upper-case content type
    b"POST /forms/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 14\r\n"
    b"Content-Type: APPLICATION/X-WWW-FORM-URLENCODED\r\n\r\n_method=DELETE",
    # two Content-Type headers: a server keeping the first reads a form, the last is JSON
    b"POST /forms/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 14\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\nContent-Type: application/json\r\n"
    b"\r\n_method=DELETE",
    # one Content-Type header naming both
    b"POST /forms/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 14\r\n"
    b"Content-Type: application/json, application/x-www-form-urlencoded\r\n\r\n_method=DELETE",
    # a multipart body with a quoted boundary
    b"POST /forms/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 68\r\n"
    b'Content-Type: multipart/form-data; boundary="zz"\r\n\r\n'
    b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--zz--\r\n',
]


@pytest.mark.parametrize("request_bytes", METHOD_ATTEMPTS)
async def test_p4_an_override_in_another_shape_does_not_reach_the_upstream(
    echo: Echo, request_bytes: bytes
) -> None:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        await _tls(gw, echo, request_bytes)
    assert _no_change_reached(echo), echo.seen


async def test_p4_a_gzip_form_body_naming_a_method_is_not_passed(echo: Echo) -> None:
    # Given a form body compressed (Express's body parser inflates it before method-override)
    body = gzip.compress(b"_method=DELETE")
    head = (
        f"POST /forms/x HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {len(body)}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Encoding: gzip\r\n\r\n"
    )
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        status = await _tls(gw, echo, head.encode() + body)
    # Then the gateway did not pass a body it cannot read the method of
    assert status == 403, echo.seen
    assert echo.seen == []


async def test_p4_a_pipelined_override_after_a_plain_read_is_refused(echo: Echo) -> None:
    first = f"GET /api/a HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
    second = (
        f"GET /api/b HTTP/1.1\r\nHost: {HOST}\r\nX-HTTP-Method-Override: DELETE\r\n"
        "Connection: close\r\n\r\n"
    )
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        reader, writer = await _tls_connection(gw, echo)
        writer.write((first + second).encode())
        await writer.drain()
        replies = await reader.read()
        writer.close()
    assert b"HTTP/1.1 403" in replies
    assert [s.target for s in echo.seen] == ["/api/a"]


# --- promise 7: the scrubber covers the encodings the README lists -----------------------


@dataclass
class Hostile:
    """A plain-HTTP upstream that answers each request with bytes a test built from the
    credential it received (``reply(authorization)``)."""

    port: int = 0
    reply: Callable[[bytes], bytes] = lambda auth: b""
    heads: list[bytes] = field(default_factory=list)


@asynccontextmanager
async def hostile() -> AsyncIterator[Hostile]:
    up = Hostile()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        up.heads.append(head)
        auth = b""
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"authorization:"):
                auth = line.split(b":", 1)[1].strip().removeprefix(b"Bearer ")
        writer.write(up.reply(auth))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, HOST, 0)
    up.port = server.sockets[0].getsockname()[1]
    try:
        yield up
    finally:
        server.close()


def _plain_rule(port: int) -> str:
    return (
        f"rules:\n  - name: hostile\n    hosts: [{HOST}]\n    ports: [{port}]\n"
        "    inject: {type: bearer, token: {env: API_TOKEN}}\n    allow_plaintext: true\n"
    )


def _chunked(parts: list[bytes], trailers: bytes = b"") -> bytes:
    body = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts)
    return body + b"0\r\n" + trailers + b"\r\n"


def _reply(headers: str, body: bytes) -> bytes:
    return f"HTTP/1.1 200 OK\r\n{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return compressor.compress(data) + compressor.flush()


REPLIES: dict[str, Callable[[bytes], bytes]] = {
    "split into one-byte chunks": lambda s: (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + _chunked([bytes([b]) for b in b"<" + s + b">"])
    ),
    "in a chunked trailer": lambda s: (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Debug\r\n\r\n"
        + _chunked([b"ok"], b"X-Debug: " + s + b"\r\n")
    ),
    "in a 103 Early Hints": lambda s: (
        b"HTTP/1.1 103 Early Hints\r\nLink: </" + s + b">; rel=preload\r\n\r\n" + _reply("", b"ok")
    ),
    "in a Location, percent-encoded in mixed case": lambda s: _reply(
        "Location: /x?t="
        + "".join(f"%{b:02x}" if i % 2 else f"%{b:02X}" for i, b in enumerate(s))
        + "\r\n",
        b"ok",
    ),
    "in a Set-Cookie": lambda s: _reply("Set-Cookie: t=" + s.decode() + "; Path=/\r\n", b"ok"),
    "raw deflate (no zlib header)": lambda s: _reply(
        "Content-Encoding: deflate\r\n", _raw_deflate(b"token=" + s)
    ),
    "GZIP in upper case": lambda s: _reply("Content-Encoding: GZIP\r\n", gzip.compress(s)),
    "x-gzip": lambda s: _reply("Content-Encoding: x-gzip\r\n", gzip.compress(s)),
    "gzip twice as content-encoding": lambda s: _reply(
        "Content-Encoding: gzip, gzip\r\n", gzip.compress(gzip.compress(s))
    ),
    "base64 inside a gzip content-encoding": lambda s: _reply(
        "Content-Encoding: gzip\r\n", gzip.compress(base64.b64encode(b"xy" + s))
    ),
    "an HTTP/1.0 reply delimited by the close": lambda s: (
        b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nsecret=" + s
    ),
    "a 101 answer to no upgrade, then raw bytes": lambda s: (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" + s
    ),
    "hex inside a gzip body": lambda s: _reply(
        "Content-Type: application/gzip\r\n", gzip.compress(s.hex().encode())
    ),
}


def _forms(secret: bytes) -> list[bytes]:
    """The forms a reader of the reply could find the secret in."""
    return [
        secret,
        secret.hex().encode(),
        secret.hex().upper().encode(),
        base64.b64encode(b"xy" + secret)[4:-4],
        "".join(f"%{b:02x}" for b in secret).encode(),
    ]


def _readable(reply: bytes) -> bytes:
    """``reply`` with every gzip/deflate stream in it inflated as far as possible, so a
    secret inside one shows."""
    found = [reply]
    for offset in range(len(reply)):
        if reply[offset : offset + 2] == b"\x1f\x8b":
            try:
                inner = zlib.decompressobj(wbits=47).decompress(reply[offset:])
                found.append(inner)
                if inner[:2] == b"\x1f\x8b":
                    found.append(gzip.decompress(inner))
            except (zlib.error, OSError, EOFError):
                pass
    for offset in range(max(0, reply.find(b"\r\n\r\n")), len(reply)):
        try:
            found.append(zlib.decompressobj(wbits=-15).decompress(reply[offset : offset + 4096]))
            break
        except zlib.error:
            continue
    return b"\n".join(found)


@pytest.mark.parametrize("name", list(REPLIES))
async def test_p7_a_hostile_reply_does_not_carry_the_secret_back(name: str) -> None:
    async with hostile() as up:
        up.reply = REPLIES[name]
        echo_stub = Echo(0, 0, __import__("ssl").create_default_context())
        async with front(echo_stub, _plain_rule(up.port), {"API_TOKEN": TOKEN}) as gw:
            reader, writer = await asyncio.open_connection(*gw.address)
            head = f"GET http://{HOST}:{up.port}/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
            writer.write(head.encode() + b"\r\n")
            await writer.drain()
            reply = await reader.read()
            writer.close()
    # Then the upstream got the secret, and no covered form of it came back
    assert any(SECRET in head for head in up.heads)
    readable = _readable(reply)
    for form in _forms(SECRET):
        assert form not in readable, (name, reply[:400])
