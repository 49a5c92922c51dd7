"""A sandbox on a slow link (its head in two TCP segments a few ms apart) behind a NAT with
a neighbour that opens connections sending one byte each (red team 3): a connection still
sending its head within ``head_grace_s`` does not rank with one that sent a byte and
stopped; the neighbour's own connections go first."""

from __future__ import annotations

import asyncio

from sandbox_client.gateway import GatewayOptions

from .test_tokens import CALLS, NAMED_GET, Audit, _first_line, _token_listener


async def test_a_head_split_across_two_segments_survives_a_one_byte_flood() -> None:
    options = GatewayOptions(
        calls=CALLS, max_unnamed_per_address=4, head_grace_s=0.1, head_timeout_s=5.0
    )
    held: list[asyncio.StreamWriter] = []
    async with _token_listener(options, Audit()) as port:
        try:

            async def neighbour() -> asyncio.StreamReader:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"G")
                await writer.drain()
                held.append(writer)
                return reader

            # Given a neighbour holding 3 one-byte connections that have sent nothing more
            # for the grace time
            first = [await neighbour() for _ in range(3)]
            await asyncio.sleep(0.15)  # the grace time
            # and a sandbox at the same address whose first segment has just arrived
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            held.append(writer)
            writer.write(NAMED_GET[:40])
            await writer.drain()
            # When the neighbour opens 5 more one-byte connections before the second
            # segment arrives
            later = [await neighbour() for _ in range(5)]
            for closed in first:  # the neighbour's idle ones made room, oldest first
                assert await asyncio.wait_for(closed.read(), 5) == b""
            writer.write(NAMED_GET[40:])
            await writer.drain()
            # Then the sandbox's request is judged (403: no rule), not cut
            assert await asyncio.wait_for(_first_line(reader), 5) == b"HTTP/1.1 403 Forbidden"
            del later
        finally:
            for w in held:
                w.close()
