"""The egress gateway, end to end on loopback: real TLS both ways, a real upstream server.

The upstream is an aiohttp HTTPS server with its own private CA that echoes what it received;
clients are httpx through the gateway as a proxy, trusting only the gateway's CA.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import doctest
import gzip
import json
import socket
import ssl
import stat
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from sandbox_client.gateway import (
    REDACTED,
    CallCredentials,
    Caller,
    CertificateAuthority,
    EgressRecord,
    Gateway,
    GatewayOptions,
    Outcome,
    Rules,
    prepare,
)
from sandbox_client.gateway import proxy as proxy_module
from sandbox_client.gateway.replies import INFLATE_STEP_BYTES

TOKEN = "prom-token-5f1c2a9e"
PASSWORD = "s3cret-basic-pass"
CALLS = CallCredentials.generate()
HOST = "localhost"


async def _echo(request: web.Request) -> web.Response:
    """Echo the request back, secrets included: the gateway must scrub them."""
    body = await request.read()
    seen = {
        "method": request.method,
        "path": request.path,
        "query": dict(request.query),
        "headers": dict(request.headers),
        "body": body.decode(),
    }
    return web.json_response(
        seen, headers={"X-Echo-Auth": request.headers.get("Authorization", "")}
    )


@dataclass
class Upstream:
    https_port: int
    http_port: int
    trust: ssl.SSLContext


@dataclass
class Audit:
    records: list[EgressRecord] = field(default_factory=list)
    written: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at each row (the gateway writes its rows after answering)."""

    async def __call__(self, record: EgressRecord) -> None:
        self.records.append(record)
        self.written.set()


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    authority = CertificateAuthority.create("upstream test CA")
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _echo)
    runner = web.AppRunner(app)
    await runner.setup()
    tls = web.TCPSite(runner, HOST, 0, ssl_context=authority.server_context(HOST))
    plain = web.TCPSite(runner, HOST, 0)
    await tls.start()
    await plain.start()
    trust = ssl.create_default_context(cadata=authority.cert_pem().decode())
    try:
        yield Upstream(_port(tls), _port(plain), trust)
    finally:
        await runner.cleanup()


def _port(site: web.TCPSite) -> int:
    server = site._server
    assert server is not None
    return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]


def _rules(up: Upstream) -> Rules:
    return Rules.parse(
        f"""
rules:
  - name: prometheus
    hosts: [{HOST}]
    ports: [{up.https_port}]
    paths: [/api/]
    inject: {{type: bearer, token: {{env: PROM_TOKEN}}}}
    description: Prometheus
  - name: grafana
    hosts: [{HOST}]
    ports: [{up.http_port}]
    methods: [GET, POST]
    inject: {{type: basic, username: viewer, password: {{env: GRAFANA_PASSWORD}}}}
    allow_plaintext: true
"""
    )


@dataclass
class Running:
    gateway: Gateway
    audit: Audit
    proxy_url: str
    trust: ssl.SSLContext


@pytest.fixture
async def gateway(upstream: Upstream) -> AsyncIterator[Running]:
    rules = _rules(upstream)
    environ = {"PROM_TOKEN": TOKEN, "GRAFANA_PASSWORD": PASSWORD}
    authority = CertificateAuthority.create()
    audit = Audit()
    gateway = Gateway(
        rules,
        authority,
        prepare(rules.rules, environ),
        audit,
        GatewayOptions(upstream_verify=upstream.trust, calls=CALLS),
    )
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-1", "C-INC"))
    port = server.sockets[0].getsockname()[1]
    trust = ssl.create_default_context(cadata=authority.cert_pem().decode())
    userinfo = CALLS.userinfo("s-1", "toolu_1")
    try:
        yield Running(gateway, audit, f"http://{userinfo}@127.0.0.1:{port}", trust)
    finally:
        await gateway.aclose()


def _client(running: Running) -> httpx.AsyncClient:
    return httpx.AsyncClient(proxy=running.proxy_url, verify=running.trust, trust_env=False)


async def test_a_credential_rule_injects_the_token_over_https_and_scrubs_it_from_the_reply(
    gateway: Running, upstream: Upstream
) -> None:
    # Given a sandbox client that sends no credential
    async with _client(gateway) as client:
        # When it queries the credential rule's host through the gateway
        url = f"https://{HOST}:{upstream.https_port}/api/v1/query?query=up"
        response = await client.get(url)
    # Then the upstream got the token (it echoes it) but the sandbox never sees it
    assert response.status_code == 200
    assert TOKEN not in response.text
    assert TOKEN not in str(response.headers)
    seen = response.json()
    assert seen["headers"]["Authorization"] == f"Bearer {REDACTED.decode()}"
    assert response.headers["x-echo-auth"] == f"Bearer {REDACTED.decode()}"
    assert seen["query"] == {"query": "up"}
    # And the audit has the request, with query names only
    (record,) = gateway.audit.records
    assert (record.method, record.path, record.status) == ("GET", "/api/v1/query?query", 200)
    assert (record.rule, record.outcome, record.tool_use_id) == (
        "prometheus",
        Outcome.INJECTED,
        "toolu_1",
    )


async def test_a_write_to_a_read_only_rule_is_refused_with_a_403_that_says_why(
    gateway: Running, upstream: Upstream
) -> None:
    async with _client(gateway) as client:
        url = f"https://{HOST}:{upstream.https_port}/api/v1/admin/tsdb/delete_series"
        response = await client.post(url, content=b"match[]=up")
    assert response.status_code == 403
    assert "POST is not allowed to localhost (only GET, HEAD)" in response.text
    assert "WARROOM_EGRESS_RULES" in response.text
    assert gateway.audit.records[-1].outcome is Outcome.BLOCKED


async def test_a_host_without_a_rule_is_blocked(gateway: Running) -> None:
    async with _client(gateway) as client:
        plain = await client.get("http://127.0.0.2:9/anything")
        tls = await client.get("https://example.internal/x")
    assert plain.status_code == 403
    assert "no rule allows 127.0.0.2:9" in plain.text
    assert tls.status_code == 403
    assert "no rule allows example.internal:443" in tls.text
    assert [r.outcome for r in gateway.audit.records] == [Outcome.BLOCKED, Outcome.BLOCKED]


async def test_a_path_outside_the_rule_is_blocked(gateway: Running, upstream: Upstream) -> None:
    async with _client(gateway) as client:
        response = await client.get(f"https://{HOST}:{upstream.https_port}/metrics")
    assert response.status_code == 403


async def test_basic_auth_over_plain_http_is_injected_and_every_form_is_scrubbed(
    gateway: Running, upstream: Upstream
) -> None:
    async with _client(gateway) as client:
        response = await client.post(
            f"http://{HOST}:{upstream.http_port}/api/dashboards", content=b"{}"
        )
    assert response.status_code == 200
    encoded = base64.b64encode(f"viewer:{PASSWORD}".encode()).decode()
    assert encoded not in response.text
    assert PASSWORD not in response.text
    assert json.loads(response.text)["headers"]["Authorization"].startswith("Basic [secret")


async def test_a_client_credential_is_replaced_not_forwarded(
    gateway: Running, upstream: Upstream
) -> None:
    async with _client(gateway) as client:
        response = await client.get(
            f"https://{HOST}:{upstream.https_port}/api/x",
            headers={"Authorization": "Bearer guessed"},
        )
    assert "guessed" not in response.text


def test_a_rules_file_error_names_its_line() -> None:
    text = "rules:\n  - name: prom\n    hosts: [prom.internal]\n    ports: [99999]\n"
    with pytest.raises(ValueError, match=r"line 4: rules\.0\.ports"):
        Rules.parse(text)


def test_a_yaml_syntax_error_is_one_line_naming_where_and_what() -> None:
    text = "rules:\n  - name: prom\n    hosts: [prom.internal\n"
    with pytest.raises(ValueError, match=r"line 4, column 1: not valid YAML: expected") as bad:
        Rules.parse(text)
    assert "\n" not in str(bad.value).split(":", 1)[1]  # no excerpt of the file


def test_a_secret_must_be_given_by_reference() -> None:
    text = (
        "rules:\n  - name: prom\n    hosts: [prom.internal]\n"
        "    inject: {type: bearer, token: abc}\n"
    )
    with pytest.raises(ValueError, match=r"line 4: rules\.0\.inject") as refused:
        Rules.parse(text)
    # the message says how to give it, and does not echo the value
    assert "{env: NAME} or {file: /path}, never its value" in str(refused.value)
    assert "abc" not in str(refused.value)


def test_an_unknown_http_method_is_refused_naming_the_known_ones() -> None:
    text = "rules:\n  - name: prom\n    hosts: [prom.internal]\n    methods: [get, FETCH]\n"
    with pytest.raises(ValueError, match=r"line 4: .*unknown HTTP method FETCH \(methods are GET"):
        Rules.parse(text)


def test_a_missing_secret_is_named_without_its_value() -> None:
    rules = Rules.parse(
        "rules:\n  - name: prom\n    hosts: [p]\n"
        "    inject: {type: bearer, token: {env: PROM_TOKEN}}\n"
    )
    with pytest.raises(LookupError, match="rule prom: the secret \\(env PROM_TOKEN\\) is missing"):
        prepare(rules.rules, {})


async def _status_through(
    rules: Rules, upstream: Upstream, caller: Caller
) -> tuple[httpx.Response, Audit]:
    """GET the upstream's ``/status`` over HTTPS through a gateway with ``rules`` serving
    ``caller``, by a client that trusts only the upstream's own CA; the answer and audit."""
    audit = Audit()
    gateway = Gateway(rules, CertificateAuthority.create(), {}, audit)
    server = await gateway.serve_tcp("127.0.0.1", 0, caller)
    proxy = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with httpx.AsyncClient(proxy=proxy, verify=upstream.trust) as client:
            return await client.get(f"https://{HOST}:{upstream.https_port}/status"), audit
    finally:
        await gateway.aclose()


async def test_a_tunnel_rule_passes_tls_through_untouched(upstream: Upstream) -> None:
    # Given a tunnel rule: the gateway sees only host and port
    rules = Rules.parse(
        f"rules:\n  - name: status\n    hosts: [{HOST}]\n    ports: [{upstream.https_port}]\n"
        "    tunnel: true\n"
    )
    # When a client that trusts only the upstream's own CA calls it
    response, audit = await _status_through(rules, upstream, Caller("s-2"))
    # Then the upstream's certificate reached it (no interception), and the tunnel is audited
    assert response.status_code == 200
    assert response.json()["path"] == "/status"
    (record,) = audit.records
    assert (record.method, record.outcome, record.rule) == ("CONNECT", Outcome.ALLOWED, "status")


def test_a_credential_rule_cannot_tunnel() -> None:
    text = (
        "rules:\n  - name: prom\n    hosts: [p]\n    tunnel: true\n"
        "    inject: {type: bearer, token: {env: T}}\n"
    )
    with pytest.raises(ValueError, match="cannot tunnel"):
        Rules.parse(text)


def test_the_ca_is_made_once_with_a_private_key_file(tmp_path: Path) -> None:
    first = CertificateAuthority.load_or_create(tmp_path / "gw")
    again = CertificateAuthority.load_or_create(tmp_path / "gw")
    assert again.cert_pem() == first.cert_pem()
    assert stat.S_IMODE((tmp_path / "gw" / "ca-key.pem").stat().st_mode) == 0o600


async def _status_line(address: tuple[str, int], request: bytes) -> bytes:
    """The first line the gateway answers ``request`` with, on a raw connection."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(request)
        await writer.drain()
        return (await reader.readline()).rstrip(b"\r\n")
    finally:
        writer.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nobody listens once the socket is closed


async def test_every_status_the_gateway_writes_has_its_standard_reason_phrase(
    upstream: Upstream,
) -> None:
    # Given a gateway with a rule for a port where nothing listens, and one for the upstream
    closed = _closed_port()
    rules = Rules.parse(
        f"rules:\n  - name: down\n    hosts: [127.0.0.1]\n    ports: [{closed}]\n"
        f"  - name: up\n    hosts: [{HOST}]\n    ports: [{upstream.http_port}]\n"
    )
    gateway = Gateway(rules, CertificateAuthority.create(), {}, Audit())
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-3"))
    address = server.sockets[0].getsockname()[:2]
    requests = [
        (f"GET http://{HOST}:{upstream.http_port}/x HTTP/1.1", b"HTTP/1.1 200 OK"),
        ("CONNECT example.internal:443 HTTP/1.1", b"HTTP/1.1 200 OK"),
        ("GET /x HTTP/1.1", b"HTTP/1.1 400 Bad Request"),
        ("GET http://127.0.0.2:9/x HTTP/1.1", b"HTTP/1.1 403 Forbidden"),
        (f"GET http://127.0.0.1:{closed}/ HTTP/1.1", b"HTTP/1.1 502 Bad Gateway"),
    ]
    try:
        # When each is sent on a raw connection
        lines = [
            await _status_line(address, f"{line}\r\nHost: x\r\n\r\n".encode())
            for line, _ in requests
        ]
    finally:
        await gateway.aclose()
    # Then each status line carries the phrase RFC 9110 gives its code
    assert lines == [expected for _, expected in requests]


async def test_what_is_not_http_gets_a_400_saying_what_the_gateway_is(
    gateway: Running,
) -> None:
    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    for garbage in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n\r\n", b"HELLO THERE\r\n\r\n"):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(garbage)
            await writer.drain()
            reply = await reader.read()  # the gateway answers, then closes
        finally:
            writer.close()
        assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n")
        assert b"egress gateway, an HTTP proxy" in reply


def test_the_proxys_examples_hold() -> None:
    result = doctest.testmod(proxy_module)
    assert result.attempted > 0
    assert result.failed == 0


@dataclass
class OneShotUpstream:
    """A plain HTTP upstream that answers the first request of each connection (keeping it
    open, as HTTP/1.1 allows) and drops the connection at the second one, unanswered: the
    race a kept-alive connection loses when the upstream's idle timeout ends it."""

    connections: int = 0
    answered: list[bytes] = field(default_factory=list)

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                 if line.startswith(b"content-length:")), 0,
            )  # fmt: skip
            await reader.readexactly(length)
            self.answered.append(head.split(b" ")[0])
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()
            await reader.readuntil(b"\r\n\r\n")  # the next request on this connection
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def one_shot() -> AsyncIterator[tuple[OneShotUpstream, int]]:
    upstream = OneShotUpstream()
    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    try:
        yield upstream, server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_a_kept_alive_connection_the_upstream_dropped_is_retried_for_a_get_only(
    one_shot: tuple[OneShotUpstream, int],
) -> None:
    # Given a gateway whose allow rule reaches the one-shot upstream
    upstream, port = one_shot
    rules = Rules.parse(
        f"rules:\n  - name: up\n    hosts: [127.0.0.1]\n    ports: [{port}]\n"
        "    methods: [GET, POST]\n"
    )
    gateway = Gateway(rules, CertificateAuthority.create(), {}, Audit())
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-4"))
    proxy = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    url = f"http://127.0.0.1:{port}/x"
    try:
        async with httpx.AsyncClient(proxy=proxy, trust_env=False) as client:
            # When a GET follows a first request on the kept-alive upstream connection
            first = await client.get(url)
            again = await client.get(url)
            # and then a POST does
            post = await client.post(url, content=b"{}")
    finally:
        await gateway.aclose()
    # Then the GET was sent again on a new connection; the POST was not (it may have run)
    assert (first.status_code, first.text, again.status_code, again.text) == (200, "ok", 200, "ok")
    assert post.status_code == 502
    assert upstream.answered == [b"GET", b"GET"]


async def test_an_upstream_whose_certificate_is_not_trusted_is_not_reached(
    upstream: Upstream,
) -> None:
    # Given a gateway trusting only the system's CAs, and an upstream with a private CA
    rules = _rules(upstream)
    environ = {"PROM_TOKEN": TOKEN, "GRAFANA_PASSWORD": PASSWORD}
    authority = CertificateAuthority.create()
    gateway = Gateway(rules, authority, prepare(rules.rules, environ), Audit())
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-5"))
    trust = ssl.create_default_context(cadata=authority.cert_pem().decode())
    proxy = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with httpx.AsyncClient(proxy=proxy, verify=trust, trust_env=False) as client:
            response = await client.get(f"https://{HOST}:{upstream.https_port}/api/v1/query")
    finally:
        await gateway.aclose()
    # Then the token was never sent: the gateway answered 502, naming the certificate
    assert response.status_code == 502
    assert "CERTIFICATE_VERIFY_FAILED" in response.text


async def test_a_query_credential_replaces_the_clients_and_is_scrubbed_from_the_echo(
    upstream: Upstream,
) -> None:
    # Given a rule that adds the key as a query parameter
    rules = Rules.parse(
        f"rules:\n  - name: status\n    hosts: [{HOST}]\n    ports: [{upstream.http_port}]\n"
        "    inject: {type: query, name: api_key, value: {env: STATUS_KEY}}\n"
        "    allow_plaintext: true\n"
    )
    audit = Audit()
    gateway = Gateway(
        rules, CertificateAuthority.create(), prepare(rules.rules, {"STATUS_KEY": TOKEN}), audit
    )
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-6"))
    proxy = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with httpx.AsyncClient(proxy=proxy, trust_env=False) as client:
            # When the client sends its own (guessed) key along with other parameters
            response = await client.get(
                f"http://{HOST}:{upstream.http_port}/api/status?page=2&api_key=guessed"
            )
    finally:
        await gateway.aclose()
    # Then the upstream got the rule's key, not the client's, and the echo carries neither
    seen = response.json()
    assert seen["query"] == {"page": "2", "api_key": REDACTED.decode()}
    assert TOKEN not in response.text
    assert "guessed" not in response.text
    assert audit.records[-1].path == "/api/status?page&api_key"


async def _gzipped_echo(request: web.Request) -> web.Response:
    """Echo the Authorization header gzipped, whatever the client accepts (some servers do)."""
    if request.path == "/brotli":
        return web.Response(body=b"\x0b\x02\x80hi\x03", headers={"Content-Encoding": "br"})
    if request.path == "/big":  # 8 MiB inflated from a few KB, a secret across a piece edge
        edge = INFLATE_STEP_BYTES - len(TOKEN) // 2
        plain = b"x" * edge + TOKEN.encode() + b"y" * (8 * 1024 * 1024 - edge - len(TOKEN))
        return web.Response(body=gzip.compress(plain), headers={"Content-Encoding": "gzip"})
    body = gzip.compress(f"you sent {request.headers.get('Authorization')}".encode())
    return web.Response(body=body, headers={"Content-Encoding": "gzip"})


async def test_a_compressed_reply_is_decoded_so_the_secret_in_it_is_scrubbed() -> None:
    # Given an upstream that gzips its echo of the credential, and one that uses brotli
    app = web.Application()
    app.router.add_get("/{tail:.*}", _gzipped_echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = _port(site)
    rules = Rules.parse(
        f"rules:\n  - name: gz\n    hosts: [127.0.0.1]\n    ports: [{port}]\n"
        "    inject: {type: bearer, token: {env: GZ_TOKEN}}\n"
        "    allow_plaintext: true\n"
    )
    gateway = Gateway(
        rules, CertificateAuthority.create(), prepare(rules.rules, {"GZ_TOKEN": TOKEN}), Audit()
    )
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-7"))
    proxy = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with httpx.AsyncClient(proxy=proxy, trust_env=False) as client:
            # When a client asks through the gateway
            gzipped = await client.get(f"http://127.0.0.1:{port}/echo")
            brotli = await client.get(f"http://127.0.0.1:{port}/brotli")
            big = await client.get(f"http://127.0.0.1:{port}/big")
    finally:
        await gateway.aclose()
        await runner.cleanup()
    # Then the reply reached it decoded, the token scrubbed; an unreadable encoding is refused
    assert gzipped.text == f"you sent Bearer {REDACTED.decode()}"
    assert "content-encoding" not in gzipped.headers
    assert brotli.status_code == 502
    assert "content-encoding br" in brotli.text
    # And a small body that inflates to megabytes is streamed whole, scrubbed across the
    # edge between two inflated pieces
    assert len(big.content) == 8 * 1024 * 1024 - len(TOKEN) + len(REDACTED)
    assert TOKEN.encode() not in big.content
    assert big.content[INFLATE_STEP_BYTES - len(TOKEN) // 2 :].startswith(REDACTED)


async def test_a_change_through_a_credential_rule_passes_only_within_an_approved_call(
    upstream: Upstream,
) -> None:
    # Given a gateway that asks whether the call a request proves it comes from was approved
    rules = _rules(upstream)
    approved = {("s-1", "toolu_approved")}
    asked: list[tuple[str, str]] = []

    async def check(session_id: str, tool_use_id: str) -> bool:
        asked.append((session_id, tool_use_id))
        return (session_id, tool_use_id) in approved

    authority = CertificateAuthority.create()
    audit = Audit()
    options = GatewayOptions(upstream_verify=upstream.trust, approved=check, calls=CALLS)
    environ = {"PROM_TOKEN": TOKEN, "GRAFANA_PASSWORD": PASSWORD}
    gateway = Gateway(rules, authority, prepare(rules.rules, environ), audit, options)
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-1", "C-INC"))
    port = server.sockets[0].getsockname()[1]
    trust = ssl.create_default_context(cadata=authority.cert_pem().decode())
    url = f"http://{HOST}:{upstream.http_port}/api/dashboards/db"

    def client(tool_use_id: str) -> httpx.AsyncClient:
        proxy = f"http://{CALLS.userinfo('s-1', tool_use_id)}@127.0.0.1:{port}"
        return httpx.AsyncClient(proxy=proxy, verify=trust, trust_env=False)

    try:
        async with client("toolu_plain") as plain, client("toolu_approved") as approved_call:
            # When a command the policy let through POSTs to a credential rule allowing POST
            refused = await plain.post(url, content=b"{}")
            # A GET still goes
            read = await plain.get(url)
            # And from the approved call the same POST goes
            passed = await approved_call.post(url, content=b"{}")
    finally:
        await gateway.aclose()
    # Then the unapproved POST was refused saying why, never reaching the upstream
    assert refused.status_code == 403
    assert "POST through the rule grafana outside an approved call" in refused.text
    assert "approved in the thread" in refused.text
    assert read.status_code == 200
    assert passed.status_code == 200
    assert passed.json()["method"] == "POST"
    assert asked == [("s-1", "toolu_plain"), ("s-1", "toolu_approved")]  # only changes ask
    assert [(r.outcome, r.tool_use_id) for r in audit.records] == [
        (Outcome.BLOCKED, "toolu_plain"),
        (Outcome.INJECTED, "toolu_plain"),
        (Outcome.INJECTED, "toolu_approved"),
    ]


async def test_a_refused_request_is_audited_when_its_client_hangs_up_before_the_answer(
    upstream: Upstream,
) -> None:
    # Given a client that resets its connection while the gateway decides on its request
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setblocking(False)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    async def check(session_id: str, tool_use_id: str) -> bool:
        client.close()  # SO_LINGER 0: a reset, so the 403 cannot be written
        return False

    audit = Audit()
    rules = _rules(upstream)
    environ = {"PROM_TOKEN": TOKEN, "GRAFANA_PASSWORD": PASSWORD}
    options = GatewayOptions(upstream_verify=upstream.trust, approved=check, calls=CALLS)
    gateway = Gateway(
        rules, CertificateAuthority.create(), prepare(rules.rules, environ), audit, options
    )
    server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-1", "C-INC"))
    port = server.sockets[0].getsockname()[1]
    credential = base64.b64encode(CALLS.userinfo("s-1", "toolu_plain").encode()).decode()
    request = (
        f"POST http://{HOST}:{upstream.http_port}/api/dashboards/db HTTP/1.1\r\n"
        f"Host: {HOST}:{upstream.http_port}\r\nProxy-Authorization: Basic {credential}\r\n"
        "Content-Length: 2\r\n\r\n{}"
    ).encode()
    loop = asyncio.get_running_loop()
    try:
        # When it sends a change the gateway refuses (no approved call), and hangs up
        await loop.sock_connect(client, ("127.0.0.1", port))
        await loop.sock_sendall(client, request)
        await asyncio.wait_for(audit.written.wait(), 10)
    finally:
        client.close()
        await gateway.aclose()
    # Then the refused attempt is in the audit all the same
    (record,) = audit.records
    assert (record.method, record.status, record.outcome, record.tool_use_id) == (
        "POST",
        403,
        Outcome.BLOCKED,
        "toolu_plain",
    )


@pytest.mark.parametrize(
    "request_line",
    [
        "CONNECT localhost:99999",
        "CONNECT localhost:abc",
        "CONNECT :443",
        "CONNECT [::1",
        "GET http://localhost:99999/x",
        "GET http://[::1/x",
    ],
)
async def test_a_target_without_a_readable_authority_is_refused_400_and_audited(
    gateway: Running, request_line: str
) -> None:
    # Given a sandbox that sends a request whose host or port cannot be read
    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"{request_line} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        # When the gateway answers
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    # Then it is a 400 (not a dropped connection), and the attempt is in the audit
    assert answer.startswith(b"HTTP/1.1 400 ")
    (record,) = gateway.audit.records
    assert (record.method, record.status, record.outcome) == (
        request_line.split()[0],
        400,
        Outcome.BLOCKED,
    )


async def test_each_request_on_a_kept_alive_connection_is_its_own_callers(
    gateway: Running, upstream: Upstream
) -> None:
    # Given three plain requests on one connection: the first with call toolu_1's proxy
    # credential, the next with toolu_2's, the last with a credential that is no call's
    def request(userinfo: str) -> bytes:
        credential = base64.b64encode(userinfo.encode()).decode()
        return (
            f"GET http://{HOST}:{upstream.http_port}/api/x HTTP/1.1\r\n"
            f"Host: {HOST}:{upstream.http_port}\r\nProxy-Authorization: Basic {credential}\r\n\r\n"
        ).encode()

    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            request(CALLS.userinfo("s-1", "toolu_1"))
            + request(CALLS.userinfo("s-1", "toolu_2"))
            + request("toolu_3:not-a-credential")
        )
        # When the gateway has answered them all (it closes after the 407)
        answers = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    # Then each was judged and audited as its own call's; the last one refused
    statuses = [line.split()[1] for line in answers.split(b"\r\n") if line.startswith(b"HTTP/")]
    assert statuses == [b"200", b"200", b"407"]
    assert [(r.status, r.tool_use_id) for r in gateway.audit.records] == [
        (200, "toolu_1"),
        (200, "toolu_2"),
        (407, None),
    ]


async def test_a_client_that_waits_for_100_continue_gets_it_then_its_answer(
    gateway: Running,
) -> None:
    # Given a client that sends its body only once told to continue (RFC 9110 §10.1.1)
    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"POST http://127.0.0.2:9/x HTTP/1.1\r\nHost: 127.0.0.2:9\r\n"
            b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n"
        )
        # When it waits for the gateway's word before sending the body
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.write(b"hello")
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    # Then it was told to continue, and its request was then refused and audited
    assert interim.startswith(b"HTTP/1.1 100 ")
    assert answer.startswith(b"HTTP/1.1 403 ")
    (record,) = gateway.audit.records
    assert (record.method, record.status) == ("POST", 403)


async def _connect_as(
    gateway: Running, tool_use_id: str, authority: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection to the gateway that has sent ``CONNECT authority`` as the call."""
    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    credential = base64.b64encode(CALLS.userinfo("s-1", tool_use_id).encode()).decode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
        f"Proxy-Authorization: Basic {credential}\r\n\r\n".encode()
    )
    return reader, writer


async def test_a_tunnel_that_carries_no_request_is_audited_as_its_connect(
    gateway: Running,
) -> None:
    # Given a client that opens a tunnel to a host no rule allows
    audit = gateway.audit
    reader, writer = await _connect_as(gateway, "toolu_probe", "nowhere.internal:443")
    # When it reads the 200 and hangs up instead of completing TLS (a program that does not
    # trust the gateway's CA does as much)
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    await writer.wait_closed()
    await asyncio.wait_for(audit.written.wait(), 10)
    # Then the attempt is in the audit, blocked, under its call
    assert head.startswith(b"HTTP/1.1 200")
    (record,) = audit.records
    assert (record.method, record.host, record.port, record.outcome, record.tool_use_id) == (
        "CONNECT",
        "nowhere.internal",
        443,
        Outcome.BLOCKED,
        "toolu_probe",
    )


async def test_a_tunnelled_request_cut_short_is_audited_under_its_call(
    gateway: Running, upstream: Upstream
) -> None:
    # Given a call that opens a tunnel and, inside it, sends a request head whose body it
    # never finishes (the tunnel carried a request, so its CONNECT is not audited either)
    audit = gateway.audit
    reader, writer = await _connect_as(gateway, "toolu_cut", f"{HOST}:{upstream.https_port}")
    await reader.readuntil(b"\r\n\r\n")
    await writer.start_tls(gateway.trust, server_hostname=HOST)
    writer.write(b"POST /api/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nabc")
    await writer.drain()
    # When it hangs up mid-body
    writer.close()
    await asyncio.wait_for(audit.written.wait(), 10)
    # Then the attempt is in the audit, refused, under its call
    (record,) = audit.records
    assert (record.method, record.path, record.outcome, record.tool_use_id) == (
        "POST",
        "/api/x",
        Outcome.BLOCKED,
        "toolu_cut",
    )


async def test_a_client_gone_after_100_continue_is_audited(gateway: Running) -> None:
    # Given a call's DELETE to a host no rule allows, told to continue before any decision
    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    credential = base64.b64encode(CALLS.userinfo("s-1", "toolu_gone").encode()).decode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"DELETE http://127.0.0.2:9/x HTTP/1.1\r\nHost: 127.0.0.2:9\r\nContent-Length: 5\r\n"
        b"Expect: 100-continue\r\nProxy-Authorization: Basic " + credential.encode() + b"\r\n\r\n"
    )
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    # When it hangs up instead of sending the body
    writer.close()
    await asyncio.wait_for(gateway.audit.written.wait(), 10)
    # Then the attempt is in the audit under its call
    assert interim.startswith(b"HTTP/1.1 100 ")
    (record,) = gateway.audit.records
    assert (record.method, record.host, record.outcome, record.tool_use_id) == (
        "DELETE",
        "127.0.0.2",
        Outcome.BLOCKED,
        "toolu_gone",
    )


async def test_a_malformed_request_on_a_kept_alive_connection_is_audited(
    gateway: Running, upstream: Upstream
) -> None:
    # Given a connection whose first request, toolu_1's, went out, and whose second is one
    # h11 refuses (two Content-Lengths: a smuggling attempt)
    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    credential = base64.b64encode(CALLS.userinfo("s-1", "toolu_1").encode()).decode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"GET http://{HOST}:{upstream.http_port}/a HTTP/1.1\r\nHost: x\r\n"
            f"Proxy-Authorization: Basic {credential}\r\n\r\n"
            f"POST http://{HOST}:{upstream.http_port}/b HTTP/1.1\r\nHost: x\r\n"
            "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab".encode()
        )
        # When the gateway has answered both (a 400 for the second, then it closes)
        answers = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    statuses = [line.split()[1] for line in answers.split(b"\r\n") if line.startswith(b"HTTP/")]
    assert statuses == [b"200", b"400"]
    # Then the refused second request has its row too: the session's, from no call (its
    # credential was never read), blocked, named by its request line
    first, refused = gateway.audit.records
    assert (first.status, first.tool_use_id) == (200, "toolu_1")
    assert (refused.status, refused.session_id, refused.tool_use_id) == (400, "s-1", None)
    assert (refused.method, refused.host, refused.path) == ("POST", HOST, "/b")
    assert refused.outcome is Outcome.BLOCKED


async def test_a_tunnel_is_audited_under_the_rule_that_let_it_through(upstream: Upstream) -> None:
    # Given two tunnel rules for one host: the first for another channel only
    rules = Rules.parse(
        f"rules:\n  - name: ops-only\n    hosts: [{HOST}]\n    ports: [{upstream.https_port}]\n"
        "    tunnel: true\n    channels: [C-OPS]\n"
        f"  - name: status\n    hosts: [{HOST}]\n    ports: [{upstream.https_port}]\n"
        "    tunnel: true\n"
    )
    # When a session of channel C-INC tunnels to it
    response, audit = await _status_through(rules, upstream, Caller("s-2", "C-INC"))
    # Then its row names the rule that allowed it, not the other channel's
    assert response.status_code == 200
    (record,) = audit.records
    assert (record.method, record.outcome, record.rule) == ("CONNECT", Outcome.ALLOWED, "status")


async def _status_of(reader: asyncio.StreamReader) -> bytes:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    return head.split(b"\r\n", 1)[0]


@dataclass
class Uploads:
    """A gateway with small body budgets, a listener per session, and raw POSTs to them."""

    gateway: Gateway
    audit: Audit
    ports: dict[str, int]
    url: str

    async def post(
        self, session_id: str, sent: bytes
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A POST whose body is 1,000 bytes, of which ``sent`` are sent now."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.ports[session_id])
        head = f"POST {self.url} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 1000\r\n\r\n"
        writer.write(head.encode() + sent)
        await writer.drain()
        return reader, writer

    async def held(self, size_bytes: int) -> None:
        """Wait until the gateway holds ``size_bytes`` of bodies (at most 10 s)."""
        for _ in range(1000):
            if self.gateway.bodies.held_bytes == size_bytes:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"held {self.gateway.bodies.held_bytes} bytes, not {size_bytes}")


@contextlib.asynccontextmanager
async def _uploads(
    up: Upstream, *, limit: int, per_session: int, max_request_bytes: int = 1024
) -> AsyncIterator[Uploads]:
    rules = _rules(up)
    environ = {"PROM_TOKEN": TOKEN, "GRAFANA_PASSWORD": PASSWORD}
    options = GatewayOptions(
        upstream_verify=up.trust,
        calls=CALLS,
        max_request_bytes=max_request_bytes,
        max_held_body_bytes=limit,
        max_held_body_bytes_per_session=per_session,
    )
    audit = Audit()
    authority = CertificateAuthority.create()
    gateway = Gateway(rules, authority, prepare(rules.rules, environ), audit, options)
    ports = {}
    for session_id in ("s-1", "s-2"):
        server = await gateway.serve_tcp("127.0.0.1", 0, Caller(session_id, "C-INC"))
        ports[session_id] = server.sockets[0].getsockname()[1]
    try:
        yield Uploads(gateway, audit, ports, f"http://{HOST}:{up.http_port}/upload")
    finally:
        await gateway.aclose()


async def test_bodies_held_at_once_are_bounded_over_all_connections(upstream: Upstream) -> None:
    # Given a gateway that holds at most 1,500 bytes of request bodies at once
    async with _uploads(upstream, limit=1500, per_session=10_000) as uploads:
        # and a connection whose body is 900 bytes in, the rest not sent yet
        slow_reader, slow_writer = await uploads.post("s-1", b"a" * 900)
        await uploads.held(900)
        # When another request's body would take the held bytes past the bound
        busy_reader, busy_writer = await uploads.post("s-2", b"b" * 700)
        # Then that request is answered 503 and audited, and its bytes are given back
        assert await _status_of(busy_reader) == b"HTTP/1.1 503 Service Unavailable"
        busy_writer.close()
        await uploads.held(900)
        # while the first one, once finished, goes out; then nothing is held
        slow_writer.write(b"a" * 100)
        assert await _status_of(slow_reader) == b"HTTP/1.1 200 OK"
        slow_writer.close()
        await uploads.held(0)
        # and a request as large as the first fits again
        next_reader, next_writer = await uploads.post("s-2", b"c" * 1000)
        assert await _status_of(next_reader) == b"HTTP/1.1 200 OK"
        next_writer.close()
        refused = [r for r in uploads.audit.records if r.outcome is Outcome.BLOCKED]
        assert [(r.session_id, r.path, r.status) for r in refused] == [("s-2", "/upload", 503)]


async def test_one_sandbox_cannot_spend_the_other_sessions_share(upstream: Upstream) -> None:
    # Given a gateway whose sessions may each hold 1,000 bytes of bodies, of 3,000 in all,
    # and one session's sandbox holding 900 of its share
    async with _uploads(upstream, limit=3000, per_session=1000) as uploads:
        _, slow_writer = await uploads.post("s-1", b"a" * 900)
        await uploads.held(900)
        # When that sandbox sends another body, and another session's sandbox sends one
        mine_reader, mine_writer = await uploads.post("s-1", b"b" * 700)
        other_reader, other_writer = await uploads.post("s-2", b"c" * 1000)
        # Then the first session's is refused 503 and the other session's goes out
        assert await _status_of(mine_reader) == b"HTTP/1.1 503 Service Unavailable"
        assert await _status_of(other_reader) == b"HTTP/1.1 200 OK"
        assert uploads.gateway.bodies.held_by("s-1") == 900
        for writer in (slow_writer, mine_writer, other_writer):
            writer.close()
        await uploads.held(0)
        assert uploads.gateway.bodies.held_by("s-1") == 0


async def test_a_body_in_pieces_too_small_is_refused_at_once(upstream: Upstream) -> None:
    # Given a gateway reading a chunked body
    async with _uploads(upstream, limit=1 << 20, per_session=1 << 20) as uploads:
        reader, writer = await asyncio.open_connection("127.0.0.1", uploads.ports["s-1"])
        head = f"POST {uploads.url} HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\n\r\n"
        # When the body comes a byte at a time
        writer.write(head.encode() + b"1\r\na\r\n" * 65_535 + b"0\r\n\r\n")
        await writer.drain()
        status = await _status_of(reader)
        writer.close()
        # Then it is refused and audited once a few dozen pieces came (parsed to its end,
        # 65,535 pieces cost the event loop a third of a second), and nothing is held
        assert status == b"HTTP/1.1 403 Forbidden"
        await uploads.held(0)
        (record,) = uploads.audit.records
        assert (record.method, record.status, record.outcome) == ("POST", 403, Outcome.BLOCKED)


async def test_a_sandbox_past_its_connections_is_answered_503_and_others_are_served(
    upstream: Upstream,
) -> None:
    # Given a gateway that takes three open connections from one sandbox
    rules = _rules(upstream)
    environ = {"PROM_TOKEN": TOKEN, "GRAFANA_PASSWORD": PASSWORD}
    options = GatewayOptions(upstream_verify=upstream.trust, max_connections_per_session=3)
    authority = CertificateAuthority.create()
    gateway = Gateway(rules, authority, prepare(rules.rules, environ), Audit(), options)
    ports = {}
    for session_id in ("s-1", "s-2"):
        server = await gateway.serve_tcp("127.0.0.1", 0, Caller(session_id, "C-INC"))
        ports[session_id] = server.sockets[0].getsockname()[1]
    url = f"http://{HOST}:{upstream.http_port}/x"
    get = f"GET {url} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()

    async def status_of_a_get(session_id: str) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", ports[session_id])
        try:
            with contextlib.suppress(ConnectionError):
                writer.write(get)
                await writer.drain()
            return await _status_of(reader)
        finally:
            writer.close()

    held: list[asyncio.StreamWriter] = []
    try:
        # and three connections of that sandbox held open (a request head half sent)
        for _ in range(3):
            _, writer = await asyncio.open_connection("127.0.0.1", ports["s-1"])
            writer.write(b"GET http://" + HOST.encode())
            await writer.drain()
            held.append(writer)
        # When it opens a fourth, and another session's sandbox opens one
        turned_away = await status_of_a_get("s-1")
        other = await status_of_a_get("s-2")
        # Then the fourth is answered 503 unread, and the other session is served
        assert turned_away == b"HTTP/1.1 503 Service Unavailable"
        assert other == b"HTTP/1.1 200 OK"
        # and once one of the three closes, the sandbox is served again
        held.pop().close()
        for _ in range(1000):
            if (served := await status_of_a_get("s-1")) != turned_away:
                break
            await asyncio.sleep(0.01)
        assert served == b"HTTP/1.1 200 OK"
    finally:
        for writer in held:
            writer.close()
        await gateway.aclose()


async def test_a_body_refused_for_want_of_room_still_gets_its_503_read(upstream: Upstream) -> None:
    # Given a gateway whose session share is 100 kB, with requests up to 4 MB
    async with _uploads(
        upstream, limit=1 << 30, per_session=100_000, max_request_bytes=4 << 20
    ) as uploads:
        # When a sandbox sends a 1 MB body whole, as clients do, then reads the answer
        size = 1_000_000
        head = f"POST {uploads.url} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {size}\r\n\r\n"

        def client() -> bytes:
            with socket.create_connection(("127.0.0.1", uploads.ports["s-1"]), 10) as sock:
                try:
                    sock.sendall(head.encode() + b"a" * size)
                except OSError as exc:
                    sent_error = repr(exc)
                else:
                    sent_error = ""
                try:
                    return sock.recv(4096).split(b"\r\n", 1)[0] or b"EOF " + sent_error.encode()
                except OSError as exc:
                    return f"{exc!r} (sending: {sent_error})".encode()

        # Then it reads the 503 that tells it to try again (not a reset connection)
        status = await asyncio.to_thread(client)
        assert status == b"HTTP/1.1 503 Service Unavailable"


@contextlib.asynccontextmanager
async def _big_answers(size_bytes: int, reached: asyncio.Event) -> AsyncIterator[int]:
    """An upstream on ``HOST`` answering every request with ``size_bytes`` (``reached`` is
    set once it has read a request); yields its port."""

    async def big(request: web.Request) -> web.Response:
        await request.read()
        reached.set()
        return web.Response(body=b"x" * size_bytes)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", big)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, HOST, 0)
    await site.start()
    try:
        yield _port(site)
    finally:
        await runner.cleanup()


async def test_a_sandbox_that_never_reads_its_answer_holds_no_body_and_is_let_go() -> None:
    # Given a gateway (2 s without progress is idle) before an upstream answering 64 MiB
    reached = asyncio.Event()
    async with _big_answers(64 << 20, reached) as up_port:
        rules = Rules.parse(
            f"rules:\n  - name: big\n    hosts: [{HOST}]\n    ports: [{up_port}]\n"
            "    methods: [GET, POST]\n"
        )
        options = GatewayOptions(
            idle_timeout_s=2.0,
            max_request_bytes=100_000,
            max_held_body_bytes=1_000_000,
            max_held_body_bytes_per_session=100_000,
        )
        authority = CertificateAuthority.create()
        audit = Audit()
        gateway = Gateway(rules, authority, prepare(rules.rules, {}), audit, options)
        server = await gateway.serve_tcp("127.0.0.1", 0, Caller("s-1", "C-INC"))
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024)
        try:
            # When a sandbox sends a 100 kB body and never reads the answer
            writer.write(
                f"POST http://{HOST}:{up_port}/u HTTP/1.1\r\nHost: {HOST}\r\n"
                f"Content-Length: 100000\r\n\r\n".encode()
                + b"a" * 100_000
            )
            await writer.drain()
            # Then the body's bytes are given back once sent upstream, while the answer
            # still waits for the sandbox
            await asyncio.wait_for(reached.wait(), 10)
            for _ in range(1000):
                if gateway.bodies.held_by("s-1") == 0:
                    break
                await asyncio.sleep(0.01)
            assert gateway.bodies.held_by("s-1") == 0
            assert gateway._open_by_listener == {"s-1": 1}
            # and the connection is closed once the sandbox took nothing for the idle time
            for _ in range(1000):
                if not gateway._open_by_listener:
                    break
                await asyncio.sleep(0.01)
            assert not gateway._open_by_listener
        finally:
            writer.close()
            await gateway.aclose()


async def test_a_malformed_first_request_on_a_sandboxs_own_listener_is_audited(
    gateway: Running, upstream: Upstream
) -> None:
    # Given a sandbox's own listener (its session known before any request), and a first
    # request on a new connection that h11 refuses (two Content-Lengths: a smuggling attempt)
    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"POST http://{HOST}:{upstream.http_port}/b HTTP/1.1\r\nHost: x\r\n"
            "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab".encode()
        )
        # When the gateway has answered it (400, then it closes)
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 400 ")
    # Then it is in the audit as the session's, from no call, blocked, by its request line
    (refused,) = gateway.audit.records
    assert (refused.status, refused.session_id, refused.tool_use_id) == (400, "s-1", None)
    assert (refused.method, refused.host, refused.path) == ("POST", HOST, "/b")
    assert refused.outcome is Outcome.BLOCKED


async def test_a_malformed_request_after_a_served_one_inside_a_tunnel_is_audited(
    gateway: Running, upstream: Upstream
) -> None:
    # Given a CONNECT to a rule's host, terminated by the gateway, whose first request inside
    # went out and whose second is one h11 refuses (two Content-Lengths)
    port = int(gateway.proxy_url.rsplit(":", 1)[1])
    credential = base64.b64encode(CALLS.userinfo("s-1", "toolu_1").encode()).decode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"CONNECT {HOST}:{upstream.https_port} HTTP/1.1\r\nHost: {HOST}\r\n"
            f"Proxy-Authorization: Basic {credential}\r\n\r\n".encode()
        )
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        await writer.start_tls(gateway.trust, server_hostname=HOST)
        writer.write(
            f"GET /api/a HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
            f"POST /api/b HTTP/1.1\r\nHost: {HOST}\r\n"
            "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab".encode()
        )
        # When the gateway has answered both
        answers = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    statuses = [line.split()[1] for line in answers.split(b"\r\n") if line.startswith(b"HTTP/")]
    assert statuses == [b"200", b"400"]
    # Then the refused one is the session's, from no call, named by its request line
    first, refused = gateway.audit.records
    assert (first.status, first.tool_use_id) == (200, "toolu_1")
    assert (refused.status, refused.session_id, refused.tool_use_id) == (400, "s-1", None)
    assert (refused.method, refused.host, refused.path) == ("POST", HOST, "/api/b")
