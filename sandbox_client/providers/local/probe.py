"""Asking a local sandbox's server ``GET /health`` over its Unix socket, with a deadline."""

from __future__ import annotations

import asyncio
import contextlib

_REQUEST = b"GET /health HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\r\n"


async def answers(socket_path: str, timeout_s: float) -> bool:
    """True when the server answers 200 within ``timeout_s`` (a frozen one never does)."""
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_unix_connection(socket_path)
            writer.write(_REQUEST)
            status_line = await reader.readline()
            return status_line.startswith(b"HTTP/1.1 200")
    except (OSError, TimeoutError):
        return False
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def wait_until_answers(socket_path: str, timeout_s: float, attempt_s: float = 0.5) -> bool:
    """Probe until the server answers or ``timeout_s`` passes (tries back to back)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout_s
    while loop.time() < give_up:
        if await answers(socket_path, min(attempt_s, max(0.001, give_up - loop.time()))):
            return True
        await asyncio.sleep(0.001)
    return False
