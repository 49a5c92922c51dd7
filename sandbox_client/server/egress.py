"""The sandbox's side of the egress gateway: a loopback port forwarded to the gateway's socket.

A local jail has an empty network namespace: its only way out is the gateway's Unix socket,
bound into the jail by the provider. Programs expect an HTTP proxy on a TCP port
(``HTTP_PROXY=http://127.0.0.1:PORT``), so the server listens there and copies each connection's
bytes both ways to the socket. It understands nothing of HTTP: the gateway decides everything.
"""

from __future__ import annotations

import signal
import socket
import sys

from .loop import Server, Stream, listen, loop, open_unix_connection

CHUNK = 65536
BACKLOG = 100
STREAM_LIMIT = 64 * 1024


def start_forwarder(port: int, socket_path: str) -> Server:
    """Listen on ``127.0.0.1:port`` (0: any free port) and forward each connection to
    ``socket_path``; ``sockets[0]`` is the listening socket, ``close`` stops it.

    Raises:
        OSError: the port cannot be listened on.
    """

    async def forward(client: Stream) -> None:
        try:
            upstream = await open_unix_connection(socket_path, STREAM_LIMIT)
        except OSError:
            client.write(_unavailable())
            client.close()
            return
        the_loop = loop()
        ended = the_loop.create_future()
        pipes = [
            the_loop.create_task(_pipe(client, upstream)),
            the_loop.create_task(_pipe(upstream, client)),
        ]
        for pipe in pipes:
            pipe.add_done_callback(lambda _: ended.set_result(None))
        try:
            await ended  # one way ended: the exchange is over
        finally:
            for pipe in pipes:
                pipe.cancel()
            upstream.close()
            client.close()

    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(("127.0.0.1", port))
        return listen(listening, forward, backlog=BACKLOG, limit=STREAM_LIMIT)
    except BaseException:
        listening.close()
        raise


async def _pipe(src: Stream, dst: Stream) -> None:
    try:
        while data := await src.read(CHUNK):
            dst.write(data)
            await dst.drain()
    except OSError:  # a reset connection on either side ends the exchange
        pass


def _unavailable() -> bytes:
    body = b"The warroom egress gateway is not reachable from this sandbox right now.\n"
    head = (
        "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def main(argv: list[str]) -> None:
    """Run a forwarder alone until SIGTERM: ``python -m sandbox_client.server.egress
    SOCKET_PATH [PORT]``; prints the port it listens on (tests, a look by hand)."""
    port = int(argv[1]) if len(argv) > 1 else 0
    forwarder = start_forwarder(port, argv[0])
    print(forwarder.sockets[0].getsockname()[1], flush=True)
    the_loop = loop()
    stopped = the_loop.create_future()
    the_loop.add_signal_handler(signal.SIGTERM, lambda: stopped.set_result(None))

    async def until_stopped() -> None:
        await stopped

    the_loop.run(until_stopped())
    forwarder.close()


if __name__ == "__main__":
    main(sys.argv[1:])
