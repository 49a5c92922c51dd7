"""Start the SBX/1 server: listen on the Unix socket (the one the host bound and passed
as ``listen_fd``, or ``socket_path``), say ready, serve until SIGTERM."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import sys

from .app import App
from .config import ServerConfig
from .egress import start_forwarder
from .loop import Event, listen, loop

SOCKET_BACKLOG = 64
STREAM_LIMIT_BYTES = 64 * 1024


async def serve(config: ServerConfig) -> None:
    """Serve until SIGTERM or SIGINT, then kill every process group that is left."""
    app = App(config)
    if config.listen_fd >= 0:
        listening = socket.socket(fileno=config.listen_fd)
        listening.set_inheritable(False)  # the commands must not hold the server's socket
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(config.socket_path)
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(config.socket_path)
    server = listen(
        listening, app.handle_connection, backlog=SOCKET_BACKLOG, limit=STREAM_LIMIT_BYTES
    )
    forwarder = None
    if config.egress_port:
        forwarder = start_forwarder(config.egress_port, config.egress_socket)
    stop = Event()
    the_loop = loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        the_loop.add_signal_handler(signum, stop.set)
    _say_ready(config.ready_fd)
    the_loop.call_soon(app.processes.prepare)  # the first command's way, after the start
    await stop.wait()
    server.close()
    if forwarder is not None:
        forwarder.close()
    app.processes.close()


def _limit_self(config: ServerConfig) -> None:
    """Set the resource limits the config asks for (inherited by every command)."""
    for which, value in (
        (resource.RLIMIT_AS, config.rlimit_as_bytes),
        (resource.RLIMIT_NPROC, config.rlimit_nproc),
    ):
        if value > 0:
            resource.setrlimit(which, (value, value))


def _say_ready(fd: int) -> None:
    if fd < 0:
        return
    try:
        os.write(fd, b"ready\n")
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> None:
    """Run the server with the JSON config given as the first argument."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: main CONFIG_JSON")
    config = ServerConfig.from_json(args[0])
    _limit_self(config)
    loop().run(serve(config))
