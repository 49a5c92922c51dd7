"""The sandbox's side of the egress gateway: a loopback port forwarded to the gateway's socket.

A local jail has an empty network namespace: its only way out is the gateway's Unix socket,
bound into the jail by the provider. Programs expect an HTTP proxy on a TCP port
(``HTTP_PROXY=http://127.0.0.1:PORT``), so the server listens there and copies each connection's
bytes both ways to the socket. It understands nothing of HTTP: the gateway decides everything.
"""

from __future__ import annotations

import asyncio
import contextlib

CHUNK = 65536


async def start_forwarder(port: int, socket_path: str) -> asyncio.Server:
    """Listen on ``127.0.0.1:port`` and forward each connection to ``socket_path``."""

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.write(_unavailable())
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return
        pipes = {
            asyncio.ensure_future(_pipe(reader, up_writer)),
            asyncio.ensure_future(_pipe(up_reader, writer)),
        }
        try:
            _, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        finally:
            up_writer.close()
            writer.close()

    return await asyncio.start_server(forward, host="127.0.0.1", port=port)


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await src.read(CHUNK):
            dst.write(data)
            await dst.drain()


def _unavailable() -> bytes:
    body = b"The warroom egress gateway is not reachable from this sandbox right now.\n"
    head = (
        "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body
