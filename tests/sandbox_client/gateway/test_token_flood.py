"""Red team of the token listener (remote sandboxes): neighbours that send whole requests
with guessed tokens, or hold head-less connections from many addresses of their own, do
not keep sandboxes out nor make the gateway hold connections without bound."""

from __future__ import annotations

import asyncio
import base64
import secrets
import socket
import threading
import time

from sandbox_client.gateway import (
    Caller,
    CertificateAuthority,
    Gateway,
    GatewayOptions,
    Rules,
)

from .test_tokens import CALLS, LIVE, NAMED_GET, Audit, _first_line

LOOK_UP_S = 0.05
"""An unknown token's look-up: one database query, here a loaded database's."""


async def _db_resolve(token: str) -> Caller | None:
    if token == LIVE:
        return Caller("s-remote", "C-INC")
    await asyncio.sleep(LOOK_UP_S)  # a guess: a query each
    return None


def _guess_head() -> bytes:
    basic = base64.b64encode(f"x:{secrets.token_urlsafe(32)}".encode()).decode()
    return (
        b"GET http://metrics.internal/api HTTP/1.1\r\nHost: metrics.internal\r\n"
        b"Proxy-Authorization: Basic " + basic.encode() + b"\r\n\r\n"
    )


def _exchange(port: int, head: bytes) -> bytes:
    """Connect, send ``head`` at once (a blocking client in a thread, as a sandbox's HTTP
    client is: no head waits on the gateway's loop), and return the status line."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(head)
            answer = b""
            while b"\r\n" not in answer:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
            return answer.split(b"\r\n", 1)[0]
    except ConnectionError:
        return b"reset"


async def test_a_neighbour_sending_whole_heads_with_guesses_does_not_keep_a_sandbox_out() -> None:
    # Given a token listener with its defaults whose look-up of an unknown token takes 50 ms
    gateway = Gateway(
        Rules(), CertificateAuthority.create(), {}, Audit(), GatewayOptions(calls=CALLS)
    )
    server = await gateway.serve_tokens("127.0.0.1", 0, _db_resolve)
    port = server.sockets[0].getsockname()[1]
    stop = threading.Event()
    sent: list[bytes] = []

    def neighbour() -> None:
        # a tenant behind the same NAT: whole heads, each with a fresh guessed token
        while not stop.is_set():
            started = time.monotonic()
            sent.append(_exchange(port, _guess_head()))
            stop.wait(max(0.0, LOOK_UP_S - (time.monotonic() - started)))

    threads = [threading.Thread(target=neighbour, daemon=True) for _ in range(20)]
    for thread in threads:
        thread.start()
    try:
        await asyncio.sleep(0.3)
        # When a sandbox behind that address sends 40 whole requests, one each 25 ms
        statuses = []
        for _ in range(40):
            statuses.append(await asyncio.to_thread(_exchange, port, NAMED_GET))
            await asyncio.sleep(0.025)
    finally:
        stop.set()
        for thread in threads:
            await asyncio.to_thread(thread.join, 10)
        await gateway.aclose()
    # Then every one is judged (403: no rule): its token, once looked up, is answered
    # from memory, and the guesses' look-ups are bounded apart from it
    assert statuses == [b"HTTP/1.1 403 Forbidden"] * 40, [s for s in statuses if b"403" not in s]
    assert b"HTTP/1.1 503 Service Unavailable" in sent  # the guesses did fill the bound


async def test_connections_not_yet_named_are_bounded_over_all_addresses() -> None:
    # Given a token listener that keeps 2 connections per address still sending a head,
    # and 16 of all addresses
    options = GatewayOptions(calls=CALLS, max_unnamed_per_address=2, max_unnamed=16)
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, Audit(), options)
    server = await gateway.serve_tokens("127.0.0.1", 0, _db_resolve)
    port = server.sockets[0].getsockname()[1]
    held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        # When one host opens head-less connections from 64 addresses of its own (any
        # IPv6 host has a /64; here 127.0.1.0/24 of the loopback), two from each
        for n in range(1, 65):
            for _ in range(2):
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, local_addr=(f"127.0.1.{n}", 0)
                )
                writer.write(b"GET http://metrics.internal/api HTTP/1.1\r\nX-Pad: a")
                await writer.drain()
                held.append((reader, writer))
        # Then all but the 16 newest were closed to make room, at once
        closed = [await asyncio.wait_for(r.read(), 5) for r, _ in held[:-16]]
        assert closed == [b""] * (len(held) - 16)
        # And a sandbox at yet another address is judged all along
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, local_addr=("127.0.2.1", 0)
        )
        writer.write(NAMED_GET)
        await writer.drain()
        assert await _first_line(reader) == b"HTTP/1.1 403 Forbidden"
        writer.close()
    finally:
        for _, writer in held:
            writer.close()
        await gateway.aclose()
