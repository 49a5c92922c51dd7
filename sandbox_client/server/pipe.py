"""Reading one pipe end on the event loop without letting it buffer more than a chunk."""

from __future__ import annotations

import os

from .loop import Event, loop

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

CHUNK_BYTES = 64 * 1024


class PipeReader:
    """Calls ``on_data(chunk)`` for each read of ``fd`` and sets ``eof`` at its end.

    The reader owns ``fd`` and closes it at end of file or on ``close()``. Each
    readiness callback reads at most ``CHUNK_BYTES``, so memory use does not grow with
    a writer that is faster than its consumer (the consumer caps what it keeps).
    """

    def __init__(self, fd: int, on_data: Callable[[bytes], None]) -> None:
        self._fd = fd
        self._on_data = on_data
        self._loop = loop()
        self.eof = Event()
        os.set_blocking(fd, False)
        self._loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, CHUNK_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._on_data(data)
        else:
            self.close()

    def close(self) -> None:
        """Stop reading and close the descriptor (idempotent)."""
        if self._fd < 0:
            return
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = -1
        self.eof.set()
