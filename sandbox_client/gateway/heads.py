"""Whether a connection's first request head has arrived whole: the token listener's test
for which of one address's unnamed connections may be closed to make room.

A remote sandbox sends its request head at once; a connection whose head has not
arrived is either one the network has not yet delivered or one that is stalling on
purpose. Sandboxes behind one NAT share an address, so the token listener, full for
that address, closes the oldest connection whose head has *not* arrived (``Gateway``)
rather than refusing the newcomer: a neighbour that opens connections without end and
never finishes a head cannot keep the others out, and a burst of whole requests is
never reset unread.

What has arrived is what the connection's reader was fed (``HeadWatch`` notes the end
of a head as the transport reads) plus what the kernel holds unread (``MSG_PEEK``).
The end of a head is a blank line, ``\\n\\r?\\n``, as h11 finds it
(``h11._receivebuffer``).
"""

from __future__ import annotations

import asyncio
import enum
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import SupportsIndex

HEAD_END = re.compile(rb"\n\r?\n")
"""A blank line: the end of a request head (h11's own test)."""
PEEK_BYTES = 16_384
"""How much unread data to look at: h11 refuses a longer head (``max_incomplete_event_size``)."""


class HeadWatch(asyncio.StreamReader):
    """A ``StreamReader`` that notes, as data arrives, whether a whole head has.

    ``head_arrived``: a blank line has been fed (or the peer closed: nothing more will
    come, so the connection ends by itself). ``tail``: the last bytes fed before that,
    to find a blank line split across two reads; ``fed``: how many, the last at
    ``fed_at`` (monotonic seconds).
    """

    def __init__(self, *, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.head_arrived = False
        self.tail = b""
        self.fed = 0  # bytes fed, until the head's end
        self.fed_at = 0.0  # when the last of them was (``time.monotonic``)

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        """Pass ``data`` (bytes, from the transport) on, noting a head's end in it."""
        if not self.head_arrived:
            window = self.tail + bytes(data)
            self.fed += len(window) - len(self.tail)
            self.fed_at = time.monotonic()
            self.head_arrived = HEAD_END.search(window) is not None
            self.tail = window[-2:]
        super().feed_data(data)

    def feed_eof(self) -> None:
        """The peer closed its side."""
        self.head_arrived = True
        super().feed_eof()


class Head(enum.Enum):
    """How much of a connection's first request head has reached this host."""

    WHOLE = "whole"  # its blank line (or the peer closed: it ends by itself)
    PART = "part"  # some bytes, no blank line yet
    NONE = "none"  # nothing yet


def head_state(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Head:
    """How much of the connection's first request head has reached this host: fed to
    ``reader`` (a ``HeadWatch``; any other reader counts as whole), or waiting unread in
    the kernel's buffer (a whole one is then noted on ``reader``: it stays whole). A
    socket that cannot be peeked counts as whole (nothing is closed on a guess)."""
    if not isinstance(reader, HeadWatch) or reader.head_arrived:
        return Head.WHOLE
    transport_socket = writer.get_extra_info("socket")
    if transport_socket is None:
        return Head.WHOLE
    try:  # on a duplicate descriptor: asyncio's own socket object refuses reads
        fd = os.dup(transport_socket.fileno())
        try:
            peeking = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            raise
        with peeking:
            unread = peeking.recv(PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        unread = None  # nothing unread
    except OSError:
        return Head.WHOLE
    if unread is not None and (not unread or HEAD_END.search(reader.tail + unread)):
        reader.head_arrived = True  # peeked once: a burst's scans cost one call each
        return Head.WHOLE
    return Head.PART if unread or reader.fed else Head.NONE


def idle_since(reader: asyncio.StreamReader, accepted_at: float) -> float:
    """When the connection last sent part of its head (monotonic seconds): its last bytes
    fed to ``reader``, else its accept time."""
    fed_at = reader.fed_at if isinstance(reader, HeadWatch) else 0.0
    return max(fed_at, accepted_at)


async def start_watched_server(
    connected: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    host: str,
    port: int,
    *,
    limit: int = 2**16,
) -> asyncio.Server:
    """``asyncio.start_server`` whose connections read through a ``HeadWatch``."""
    loop = asyncio.get_running_loop()

    def protocol() -> asyncio.StreamReaderProtocol:
        return asyncio.StreamReaderProtocol(HeadWatch(limit=limit, loop=loop), connected)

    return await loop.create_server(protocol, host, port)
