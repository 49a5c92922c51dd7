"""Remote sandboxes reach the gateway over the network with a per-session token in their proxy
URL: a live token names its session, anything else is answered 407; the call is proved by its
per-call credential after the token, never taken from the user name alone."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest

from sandbox_client.gateway import (
    CallCredentials,
    Caller,
    CertificateAuthority,
    EgressRecord,
    Gateway,
    GatewayOptions,
    Rules,
)

CALLS = CallCredentials.generate()
LIVE_RAW = "live-token-Zb1" + "x" * 29  # 43 random characters, as the database makes one
LIVE = CALLS.signed_token(LIVE_RAW)  # as a sandbox is given it, with its tag


@dataclass
class Audit:
    records: list[EgressRecord] = field(default_factory=list)

    async def __call__(self, record: EgressRecord) -> None:
        self.records.append(record)


async def _resolve(token: str) -> Caller | None:
    return Caller("s-remote", "C-INC") if token == LIVE else None


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[str, Audit]]:
    audit = Audit()
    options = GatewayOptions(calls=CALLS)
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, audit, options)
    server = await gateway.serve_tokens("127.0.0.1", 0, _resolve)
    yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}", audit
    await gateway.aclose()


async def _get(proxy: str) -> httpx.Response:
    async with httpx.AsyncClient(proxy=proxy, trust_env=False) as client:
        return await client.get("http://metrics.internal/api")


async def test_a_live_token_names_its_session_and_the_call_its_credential_proves(
    gateway: tuple[str, Audit],
) -> None:
    address, audit = gateway
    userinfo = CALLS.userinfo("s-remote", "toolu_9", password_prefix=f"{LIVE}.")
    response = await _get(f"http://{userinfo}@{address}")
    assert response.status_code == 403  # authenticated; no rule for the host
    (record,) = audit.records
    assert (record.session_id, record.tool_use_id) == ("s-remote", "toolu_9")


async def test_a_call_id_in_the_user_name_without_its_credential_proves_no_call(
    gateway: tuple[str, Audit],
) -> None:
    # Given a process that knows the session token and the approved call's id
    address, audit = gateway
    # When it names the call in the proxy URL's user name, as the old URL form did
    response = await _get(f"http://toolu_approved:{LIVE}@{address}")
    # Then the request is the session's, from no call: the user name is not believed
    assert response.status_code == 403
    (record,) = audit.records
    assert (record.session_id, record.tool_use_id) == ("s-remote", None)


@pytest.mark.parametrize(
    "credential",
    [
        "A" * 43,  # a guess of the right length
        CALLS.issue("s-remote", "toolu_other"),  # another call's
        CALLS.issue("s-other", "toolu_approved"),  # the same call id in another session
        CallCredentials.generate().issue("s-remote", "toolu_approved"),  # another key's
    ],
    ids=["guessed", "another-call", "another-session", "another-key"],
)
async def test_a_credential_not_the_calls_own_is_answered_407_and_audited(
    gateway: tuple[str, Audit], credential: str
) -> None:
    address, audit = gateway
    response = await _get(f"http://toolu_approved:{LIVE}.{credential}@{address}")
    assert response.status_code == 407
    (record,) = audit.records
    assert (record.session_id, record.tool_use_id, record.status) == ("s-remote", None, 407)
    assert (record.method, record.host, record.path) == ("GET", "metrics.internal", "/api")


@pytest.mark.parametrize("credentials", ["", "toolu_9:revoked-or-guessed@"])
async def test_no_token_or_a_dead_one_is_answered_407(
    gateway: tuple[str, Audit], credentials: str
) -> None:
    address, audit = gateway
    response = await _get(f"http://{credentials}{address}")
    assert response.status_code == 407
    assert "proxy credentials" in response.text
    assert audit.records == []


async def test_the_407_carries_its_reason_phrase(gateway: tuple[str, Audit]) -> None:
    host, _, port = gateway[0].partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET http://metrics.internal/api HTTP/1.1\r\nHost: metrics.internal\r\n\r\n")
    await writer.drain()
    status = await reader.readline()
    writer.close()
    assert status == b"HTTP/1.1 407 Proxy Authentication Required\r\n"


CREDENTIAL = base64.b64encode(
    CALLS.userinfo("s-remote", "toolu_9", password_prefix=f"{LIVE}.").encode()
).decode()
NAMED_GET = (
    "GET http://metrics.internal/api HTTP/1.1\r\nHost: metrics.internal\r\n"
    f"Proxy-Authorization: Basic {CREDENTIAL}\r\n\r\n"
).encode()
"""A request of session ``s-remote``'s call ``toolu_9``, through its live token."""


@contextlib.asynccontextmanager
async def _token_listener(options: GatewayOptions, audit: Audit) -> AsyncIterator[int]:
    """A gateway with no rules serving the token listener; yields its port."""
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, audit, options)
    server = await gateway.serve_tokens("127.0.0.1", 0, _resolve)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        await gateway.aclose()


async def _first_line(reader: asyncio.StreamReader) -> bytes:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    return head.split(b"\r\n", 1)[0]


async def test_a_remote_sandbox_past_its_connections_is_answered_503_audited() -> None:
    # Given a token listener that takes two open connections from one session
    audit = Audit()
    options = GatewayOptions(calls=CALLS, max_connections_per_session=2)
    held: list[asyncio.StreamWriter] = []
    async with _token_listener(options, audit) as port:
        try:
            # and two connections of that session held open, each sending a request's body
            for _ in range(2):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(
                    b"POST http://metrics.internal/api HTTP/1.1\r\nHost: metrics.internal\r\n"
                    b"Proxy-Authorization: Basic " + CREDENTIAL.encode() + b"\r\n"
                    b"Content-Length: 100\r\n\r\nfirst bytes"
                )
                await writer.drain()
                held.append(writer)
            # When the same session opens a third (once the two are counted)
            for _ in range(1000):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(NAMED_GET)
                await writer.drain()
                status = await _first_line(reader)
                writer.close()
                if status != b"HTTP/1.1 403 Forbidden":  # one of the two not read yet
                    break
                await asyncio.sleep(0.01)
            # Then it is answered 503, and the refusal is in the audit under the session
            assert status == b"HTTP/1.1 503 Service Unavailable"
            assert [(r.session_id, r.status) for r in audit.records if r.status != 403] == [
                ("s-remote", 503)
            ]
        finally:
            for held_writer in held:
                held_writer.close()


async def test_connections_without_a_head_are_bounded_per_address_and_in_time() -> None:
    # Given a token listener that keeps two connections per client address still
    # sending their first request head, counts one that has sent nothing as stalling
    # after 0.2 s, and gives a head two seconds
    options = GatewayOptions(
        calls=CALLS, max_unnamed_per_address=2, head_grace_s=0.2, head_timeout_s=2.0
    )
    stalled: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    async with _token_listener(options, Audit()) as port:

        async def status_from(address: str) -> bytes:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(address, 0)
            )
            try:
                writer.write(NAMED_GET)
                await writer.drain()
                return await _first_line(reader)
            finally:
                writer.close()

        async def stall(head: bytes) -> asyncio.StreamReader:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head)
            await writer.drain()
            stalled.append((reader, writer))
            return reader

        try:
            # and a client at that address (a NAT's) holding two connections whose heads
            # never end, idle for the grace time: one not begun, one sent in part
            silent = await stall(b"")
            partial = await stall(b"GET http://metrics.internal/api HTTP/1.1\r\nX-Pad: a")
            await asyncio.sleep(0.25)  # the grace time
            # When a sandbox behind the same address sends a whole request at once, twice
            # Then each is judged (403: no rule) at once, closing the oldest stalling
            # connection to make room, long before its head would time out
            assert await status_from("127.0.0.1") == b"HTTP/1.1 403 Forbidden"
            assert await asyncio.wait_for(silent.read(), 0.5) == b""
            third = await stall(b"GET http://metrics.internal/api HTTP/1.1\r\n")
            assert await status_from("127.0.0.1") == b"HTTP/1.1 403 Forbidden"
            assert await asyncio.wait_for(partial.read(), 0.5) == b""
            # And a sandbox at another address is judged all along, and the stalled ones
            # left are closed when their heads are late
            fourth = await stall(b"G")
            fifth = await stall(b"GET http://metrics.internal/api HTTP/1.1\r\nX-Pad: a\r\n")
            assert await status_from("127.0.0.2") == b"HTTP/1.1 403 Forbidden"
            for late in (third, fourth, fifth):
                await asyncio.wait_for(late.read(), 10)  # the gateway closed it
            assert await status_from("127.0.0.1") == b"HTTP/1.1 403 Forbidden"
        finally:
            for _, writer in stalled:
                writer.close()


def _guess(n: int) -> bytes:
    """A request with a guessed token of the untagged kind (looked up: it has a token's
    length; one with a wrong tag is refused without a look-up)."""
    basic = base64.b64encode(f"x:guess-{n}".ljust(45, "g").encode()).decode()
    return (
        b"GET http://metrics.internal/api HTTP/1.1\r\nHost: metrics.internal\r\n"
        b"Proxy-Authorization: Basic " + basic.encode() + b"\r\n\r\n"
    )


async def test_guessed_tokens_are_looked_up_a_bounded_few_at_a_time_per_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a token listener that looks up at most two tokens of one client address at a
    # time, whose look-ups of unknown tokens hang (a slow database)
    looking_up = 0
    release = asyncio.Event()

    async def slow_resolve(token: str) -> Caller | None:
        nonlocal looking_up
        looking_up += 1
        try:
            await release.wait()
        finally:
            looking_up -= 1
        return None

    options = GatewayOptions(calls=CALLS, max_lookups_per_address=2, head_timeout_s=10)
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, Audit(), options)
    server = await gateway.serve_tokens("127.0.0.1", 0, slow_resolve)
    port = server.sockets[0].getsockname()[1]
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        # When one client sends ten whole heads, each with a guessed token
        for guess in range(10):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_guess(guess))
            await writer.drain()
            opened.append((reader, writer))
        pending = {asyncio.ensure_future(_first_line(reader)) for reader, _ in opened}
        done: set[asyncio.Future[bytes]] = set()
        while len(done) < 8:
            more, pending = await asyncio.wait(
                pending, timeout=10, return_when=asyncio.FIRST_COMPLETED
            )
            assert more, "no answer within 10 s"
            done |= more
        # Then two are looked up, and the eight others answered 503 at once: a client
        # without a token cannot pile up look-ups
        assert looking_up == 2
        assert [a.result() for a in done] == [b"HTTP/1.1 503 Service Unavailable"] * 8
        for waiting in pending:
            waiting.cancel()
    finally:
        release.set()
        for _, writer in opened:
            writer.close()
        await gateway.aclose()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_sandboxs_live_token_is_served_while_guesses_fill_its_addresss_look_ups() -> None:
    # Given a token listener that looks up one token of an address at a time, keeps an
    # answer 0.3 s, and whose look-ups of unknown tokens hang (the sandbox's own is quick)
    release, guessing = asyncio.Event(), asyncio.Event()
    live_look_ups = 0

    async def resolve(token: str) -> Caller | None:
        nonlocal live_look_ups
        if token == LIVE:
            live_look_ups += 1
            return Caller("s-remote", "C-INC")
        guessing.set()
        await release.wait()
        return None

    options = GatewayOptions(calls=CALLS, max_lookups_per_address=1, token_ttl_s=0.3)
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, Audit(), options)
    server = await gateway.serve_tokens("127.0.0.1", 0, resolve)
    port = server.sockets[0].getsockname()[1]

    async def status_of(head: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(head)
            await writer.drain()
            return await _first_line(reader)
        finally:
            writer.close()

    guesses: list[asyncio.StreamWriter] = []
    try:
        # and a sandbox that has used its token once
        assert await status_of(NAMED_GET) == b"HTTP/1.1 403 Forbidden"
        # When a neighbour at its address holds the one look-up with a guess, and guesses
        # again
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_guess(1))
        guesses.append(writer)
        await asyncio.wait_for(guessing.wait(), 5)
        assert await status_of(_guess(2)) == b"HTTP/1.1 503 Service Unavailable"
        # Then the sandbox's requests are judged (403: no rule), from memory, and again once
        # that answer is old (looked up outside the address's bound)
        assert await status_of(NAMED_GET) == b"HTTP/1.1 403 Forbidden"
        await asyncio.sleep(0.35)  # the answer's time
        assert await status_of(NAMED_GET) == b"HTTP/1.1 403 Forbidden"
        assert live_look_ups == 2
    finally:
        release.set()
        for writer in guesses:
            writer.close()
        await gateway.aclose()


@pytest.mark.parametrize(
    ("per_address", "of_all", "last"),
    [(2, 1024, b"HTTP/1.1 403 Forbidden"), (16, 2, b"HTTP/1.1 503 Service Unavailable")],
    ids=["past-its-address", "past-all"],
)
async def test_a_burst_of_whole_requests_from_one_address_is_not_reset(
    per_address: int, of_all: int, last: bytes
) -> None:
    # Given a token listener that keeps two connections still sending their first request
    # head, per client address or of all
    options = GatewayOptions(calls=CALLS, max_unnamed_per_address=per_address, max_unnamed=of_all)
    async with _token_listener(options, Audit()) as port:
        loop = asyncio.get_running_loop()
        # When three sandboxes behind one address (a NAT's) each send a whole request at
        # the same moment (all three arrive before the gateway reads any of them)
        sockets = []
        try:
            for _ in range(3):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(NAMED_GET)
                sock.setblocking(False)
                sockets.append(sock)
            answers = []
            for sock in sockets:
                try:
                    answers.append(await asyncio.wait_for(loop.sock_recv(sock, 64), 10))
                except ConnectionResetError:
                    answers.append(b"reset")
        finally:
            for sock in sockets:
                sock.close()
        # Then none of them is reset unanswered (none stalled): past its address's bound
        # each is judged (403: no rule), its head read in a moment; past the bound of all,
        # the third is turned away (503: retry)
        assert [answer.split(b"\r\n", 1)[0] for answer in answers] == [
            b"HTTP/1.1 403 Forbidden",
            b"HTTP/1.1 403 Forbidden",
            last,
        ]


async def test_a_connection_whose_head_is_on_its_way_is_not_closed_for_newcomers() -> None:
    # Given a token listener whose address is full of connections waiting on the look-up
    # of a guessed token (whole heads: none stalling), the look-ups hanging
    release, guessing = asyncio.Event(), asyncio.Event()

    async def resolve(token: str) -> Caller | None:
        if token == LIVE:
            return Caller("s-remote", "C-INC")
        guessing.set()
        await release.wait()
        return None

    options = GatewayOptions(calls=CALLS, max_unnamed_per_address=4, max_lookups_per_address=4)
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, Audit(), options)
    server = await gateway.serve_tokens("127.0.0.1", 0, resolve)
    port = server.sockets[0].getsockname()[1]
    held: list[asyncio.StreamWriter] = []
    try:
        for n in range(4):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_guess(n))
            held.append(writer)
        await asyncio.wait_for(guessing.wait(), 5)
        # When a sandbox connects, and its head is still on its way when more whole
        # requests of the address come
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        held.append(writer)
        for n in range(4, 8):
            _, later = await asyncio.open_connection("127.0.0.1", port)
            later.write(_guess(n))
            await later.drain()
            held.append(later)
        writer.write(NAMED_GET)
        await writer.drain()
        # Then its request is judged (403: no rule): a connection that has sent nothing
        # yet is not taken for a stalling one before the grace time
        assert await asyncio.wait_for(_first_line(reader), 5) == b"HTTP/1.1 403 Forbidden"
    finally:
        release.set()
        for writer in held:
            writer.close()
        await gateway.aclose()
