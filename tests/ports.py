"""Ports for servers a test starts in another process (which must be told the port first).

A port the kernel picks for ``bind(("127.0.0.1", 0))`` comes from the ephemeral range,
from which it also picks the local port of every outgoing connection (to PostgreSQL,
Redis, the fakes): between the probe's close and the server's own bind, a connection
opened anywhere on the machine can take it, and the server then fails to start (a CI
flake: ``warroom serve`` exiting 2 before it answered). So the port is drawn from below
that range, where only an explicit bind takes one, and checked free by binding it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20_000


def _first_ephemeral() -> int:
    """The kernel's first ephemeral port (Linux's default 32768 where it cannot be read)."""
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on, outside the ephemeral range.

    Raises:
        OSError: no such port found after 200 tries.
    """
    top = max(_first_ephemeral(), LOWEST + 1_000)
    for _ in range(200):
        port = random.randrange(LOWEST, top)
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError("no free port below the ephemeral range")
