"""Red team of the sandbox client's bound on replies: whatever answers on a sandbox's socket
is inside the sandbox, so no reply may make the worker hang."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from sandbox_client import ClientOptions, SandboxClient, SandboxTimeout


async def _drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A server that answers a head at once, then its body a byte every 0.1 s."""
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n"
            b'content-disposition: attachment; filename="log"\r\ncontent-length: 100000\r\n\r\n'
        )
        while True:
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.write(b"x")
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


@pytest.fixture
async def dripping() -> AsyncIterator[str]:
    server = await asyncio.start_server(_drip, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def test_a_reply_dripped_a_byte_at_a_time_ends_within_the_request_timeout(
    dripping: str,
) -> None:
    # Given a sandbox server (a command replaced the jail's) that sends its reply's body a
    # byte every 0.1 s, never silent for a whole read timeout
    options = ClientOptions(request_timeout_s=0.5, max_attempts=1)
    async with SandboxClient(dripping, sandbox_id="s", options=options) as client:
        started = time.monotonic()
        # When the worker reads a file, or a range of one (the background watcher's read)
        for read in (
            lambda: client.read_file("/workspace/log"),
            lambda: client.read_range("/workspace/log", 0),
        ):
            # Then it ends as a timeout once the request's time has passed, not when (if
            # ever) the reply ends
            with pytest.raises(SandboxTimeout):
                await asyncio.wait_for(read(), 5)
    assert time.monotonic() - started < 3
