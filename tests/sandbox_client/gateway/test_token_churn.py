"""Red team of the token listener (remote sandboxes): a neighbour behind the same address
that opens connections without end must not keep a sandbox out."""

from __future__ import annotations

import asyncio
import collections

from sandbox_client.gateway import GatewayOptions

from .test_tokens import CALLS, NAMED_GET, Audit, _first_line, _token_listener


async def test_a_neighbour_opening_connections_without_end_does_not_keep_a_sandbox_out() -> None:
    # Given a token listener that keeps two connections per client address not yet named,
    # one counting as stalling after 0.2 s
    options = GatewayOptions(calls=CALLS, max_unnamed_per_address=2, head_timeout_s=5.0)
    async with _token_listener(options, Audit()) as port:
        stop = asyncio.Event()
        opened = 0

        async def neighbour() -> None:  # a tenant behind the same NAT, never sending a head
            nonlocal opened
            held: collections.deque[asyncio.StreamWriter] = collections.deque()
            try:
                while not stop.is_set():
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(b"GET http://metrics.internal/api HTTP/1.1\r\nX-Pad: a")
                    held.append(writer)
                    opened += 1
                    while len(held) > 64:
                        held.popleft().close()
                    await asyncio.sleep(0)
            finally:
                for writer in held:
                    writer.close()

        async def sandbox() -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(NAMED_GET)
                await writer.drain()
                return await _first_line(reader)
            finally:
                writer.close()

        flood = asyncio.create_task(neighbour())
        try:
            await asyncio.sleep(0.3)
            # When a sandbox behind that address sends whole requests for 2 s (ten times
            # the stall time), one each 50 ms
            statuses = []
            for _ in range(40):
                statuses.append(await sandbox())
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await flood
    # Then most of them are judged (403: no rule), not turned away
    judged = statuses.count(b"HTTP/1.1 403 Forbidden")
    assert opened > 100
    assert judged >= len(statuses) // 2, (judged, len(statuses), opened)
