"""The token listener over real sockets (red team 2): a client sending many requests with
one token (an ended session's) shares one look-up and holds no more connections than
its bound."""

from __future__ import annotations

import asyncio
import base64
import contextlib

from sandbox_client.gateway import (
    Caller,
    CertificateAuthority,
    Gateway,
    GatewayOptions,
    Rules,
)

from .test_tokens import CALLS, LIVE_RAW, Audit

ENDED = CALLS.signed_token("ended-session-token" + "e" * 24)  # a tag, its session over


async def test_one_client_cannot_hold_unbounded_look_ups_with_an_ended_sessions_token() -> None:
    # Given a token listener with bounds far below the flood (4 unnamed per address, 16 of
    # all, 16 look-ups per address) over a database that is slow to answer
    gate = asyncio.Event()
    in_flight = [0, 0]  # now, most
    all_in = asyncio.Event()  # 200 look-ups in flight

    async def resolve(token: str) -> Caller | None:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        if in_flight[0] >= 200:
            all_in.set()
        try:
            await gate.wait()
        finally:
            in_flight[0] -= 1
        return Caller("s-remote", "C-INC") if token == LIVE_RAW else None

    options = GatewayOptions(
        calls=CALLS, max_unnamed_per_address=4, max_unnamed=16, max_lookups_per_address=16
    )
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, Audit(), options)
    server = await gateway.serve_tokens("127.0.0.1", 0, resolve)
    port = server.sockets[0].getsockname()[1]
    basic = base64.b64encode(f"x:{ENDED}".encode())
    head = (
        b"GET http://metrics.internal/api HTTP/1.1\r\nHost: metrics.internal\r\n"
        b"Proxy-Authorization: Basic " + basic + b"\r\n\r\n"
    )
    held = []
    try:
        # When one address opens 200 connections, each sending a whole head with the
        # token of a session that has ended (a sandbox keeps its proxy URL)
        for _ in range(200):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head)
            held.append((reader, writer))
        # (a bounded gateway never gets there: the wait ends after 5 s)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_in.wait(), 5)
        # Then the gateway holds no more than a bounded few of them, and runs a bounded
        # few queries: here 16 per address (requests naming one token share its look-up)
        assert in_flight[1] <= 16, in_flight
    finally:
        gate.set()
        for _, writer in held:
            writer.close()
        await gateway.aclose()
