"""A byte buffer that keeps the head and the tail of a stream and counts the rest."""

from __future__ import annotations

from collections import deque


class HeadTail:
    """Keeps at most ``max_bytes`` of a stream: the first half and the last half.

    Memory stays bounded however much is appended (a command printing 50 MB keeps
    ``max_bytes``). ``text()`` decodes as UTF-8 with replacement characters and puts a
    one-line marker where bytes were dropped.
    """

    def __init__(self, max_bytes: int) -> None:
        self._head_limit = max_bytes - max_bytes // 2
        self._tail_limit = max_bytes // 2
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self.total_bytes = 0

    def append(self, data: bytes) -> None:
        """Add ``data`` at the end of the stream."""
        self.total_bytes += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data or self._tail_limit == 0:
            return
        self._tail.append(bytes(data[-self._tail_limit :]))
        self._tail_bytes += len(self._tail[-1])
        while self._tail_bytes - len(self._tail[0]) >= self._tail_limit:
            self._tail_bytes -= len(self._tail.popleft())

    @property
    def omitted_bytes(self) -> int:
        """How many bytes of the stream are not kept."""
        kept = len(self._head) + min(self._tail_bytes, self._tail_limit)
        return self.total_bytes - kept

    def text(self) -> str:
        """The kept bytes as text, with ``[... N bytes omitted ...]`` where they were cut."""
        tail = b"".join(self._tail)[-self._tail_limit :] if self._tail_limit else b""
        head = self._head.decode("utf-8", "replace")
        omitted = self.omitted_bytes
        if omitted == 0:
            return head + tail.decode("utf-8", "replace")
        marker = f"\n[... {omitted} bytes omitted ...]\n"
        return head + marker + tail.decode("utf-8", "replace")
