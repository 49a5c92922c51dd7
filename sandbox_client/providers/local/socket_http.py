"""A small HTTP/1.1 transport for httpx over one local sandbox's Unix socket.

The SBX/1 client's requests to a local jail are short, on a socket nothing else shares,
to a server that speaks a known subset of HTTP/1.1 (``server/http.py``). httpx's default
transport (httpcore over anyio) costs about a millisecond of CPU per request there and
sends a request's head and body in two writes, so the server wakes twice. This one
writes each request in one ``send``, reads ``Content-Length`` and chunked replies (and
replies ended by closing), keeps idle connections for the next request, and raises
httpx's own exceptions, so ``transport.Transport`` maps them as before.

Limits: a reply head over ``MAX_HEAD_BYTES`` or a chunk-size line over ``MAX_LINE_BYTES``
is a protocol error; request bodies are sent whole (the client's are bytes in memory).
A request on a kept connection that finds it closed by the server before any byte of
the reply is sent again once on a new connection (the server had not read it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import httpx

MAX_HEAD_BYTES = 64 * 1024
MAX_LINE_BYTES = 1024
READ_BYTES = 64 * 1024
MAX_IDLE = 4
"""Idle connections kept for later requests."""

_T = TypeVar("_T")
_NO_BODY_STATUSES = frozenset({204, 304})


class UnixSocketTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 to the server listening on the Unix socket ``path`` (see the module)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._idle: list[_Connection] = []
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return the response once its head is read (the body
        streams). Raises httpx's ``TransportError`` subclasses (timeouts included)."""
        if self._closed:
            raise httpx.ConnectError("the transport is closed", request=request)
        timeouts = request.extensions.get("timeout", {})
        message = _encode(request, await request.aread())
        while True:
            connection = self._idle.pop() if self._idle else None
            reused = connection is not None
            if connection is None:
                connection = await _Connection.open(self._path, timeouts.get("connect"), request)
            try:
                connection.send(message)
                head = await connection.read_head(timeouts.get("read"), request)
            except _Stale:
                connection.close()
                if reused:
                    continue  # the server closed it while idle: a new connection
                raise httpx.RemoteProtocolError("no reply", request=request) from None
            except BaseException:
                connection.close()
                raise
            return self._response(request, connection, head, timeouts.get("read"))

    def _response(
        self, request: httpx.Request, connection: _Connection, head: _Head, read_s: float | None
    ) -> httpx.Response:
        status, headers = head
        no_body = request.method == "HEAD" or status in _NO_BODY_STATUSES or status < 200
        body = _Body(self, connection, request, headers, read_s, empty=no_body)
        return httpx.Response(status, headers=headers, stream=body, request=request)

    def keep(self, connection: _Connection) -> None:
        """Take back a connection whose reply was read to its end."""
        if self._closed or len(self._idle) >= MAX_IDLE:
            connection.close()
        else:
            self._idle.append(connection)

    async def aclose(self) -> None:
        """Close the idle connections; those in use close when their reply does."""
        self._closed = True
        while self._idle:
            self._idle.pop().close()


_Head = tuple[int, list[tuple[bytes, bytes]]]


class _Stale(Exception):
    """The connection ended before a byte of the reply came."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, path: str, timeout_s: float | None, request: httpx.Request) -> _Connection:
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await asyncio.open_unix_connection(path, limit=MAX_HEAD_BYTES)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting {path}", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"connecting {path}: {exc}", request=request) from exc
        return cls(reader, writer)

    def send(self, message: bytes) -> None:
        """Queue ``message`` (a Unix socket takes a request at once: no drain needed
        unless it is large, and then the reply waits for it anyway)."""
        if self.writer.is_closing():
            raise _Stale
        self.writer.write(message)

    async def read_head(self, timeout_s: float | None, request: httpx.Request) -> _Head:
        try:
            raw = await _timed(self.reader.readuntil(b"\r\n\r\n"), timeout_s, request)
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise _Stale from None
            raise httpx.RemoteProtocolError("the reply's head was cut", request=request) from exc
        except asyncio.LimitOverrunError as exc:
            raise httpx.RemoteProtocolError(
                "the reply's head is too long", request=request
            ) from exc
        except OSError as exc:
            raise _Stale from exc
        return _parse_head(raw, request)

    def close(self) -> None:
        self.writer.close()


class _Body(httpx.AsyncByteStream):
    """A reply's body as it arrives; its connection goes back to the transport once read
    to its end (else it is closed)."""

    def __init__(
        self,
        owner: UnixSocketTransport,
        connection: _Connection,
        request: httpx.Request,
        headers: list[tuple[bytes, bytes]],
        read_s: float | None,
        *,
        empty: bool,
    ) -> None:
        self._owner = owner
        self._connection: _Connection | None = connection
        self._request = request
        self._read_s = read_s
        self._framing, self._length = _framing(headers, empty=empty)
        self._reusable = not any(
            name.lower() == b"connection" and value.lower() == b"close" for name, value in headers
        )
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        reader = connection.reader
        if self._framing == "length":
            left = self._length
            while left:
                chunk = await self._read(reader.read(min(left, READ_BYTES)))
                if not chunk:
                    raise httpx.RemoteProtocolError("the reply was cut", request=self._request)
                left -= len(chunk)
                yield chunk
        elif self._framing == "chunked":
            async for chunk in self._chunks(reader):
                yield chunk
        elif self._framing == "close":
            while chunk := await self._read(reader.read(READ_BYTES)):
                yield chunk
            self._reusable = False
        self._done = True
        await self.aclose()

    async def _chunks(self, reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
        while True:
            line = await self._line(reader)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx.RemoteProtocolError("a bad chunk size", request=self._request) from None
            if size == 0:
                while await self._line(reader):  # trailers, then the empty line
                    pass
                return
            while size:
                chunk = await self._read(reader.read(min(size, READ_BYTES)))
                if not chunk:
                    raise httpx.RemoteProtocolError("the reply was cut", request=self._request)
                size -= len(chunk)
                yield chunk
            if await self._line(reader):
                raise httpx.RemoteProtocolError("a chunk without its end", request=self._request)

    async def _line(self, reader: asyncio.StreamReader) -> bytes:
        try:
            line = await self._read(reader.readuntil(b"\r\n"))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise httpx.RemoteProtocolError("the reply was cut", request=self._request) from exc
        if len(line) > MAX_LINE_BYTES:
            raise httpx.RemoteProtocolError("a chunk line is too long", request=self._request)
        return line[:-2]

    async def _read(self, work: Awaitable[_T]) -> _T:
        try:
            return await _timed(work, self._read_s, self._request)
        except OSError as exc:
            raise httpx.ReadError(str(exc), request=self._request) from exc

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._done and self._reusable:
            self._owner.keep(connection)
        else:
            connection.close()


async def _timed(work: Awaitable[_T], timeout_s: float | None, request: httpx.Request) -> _T:
    try:
        async with asyncio.timeout(timeout_s):
            return await work
    except TimeoutError as exc:
        raise httpx.ReadTimeout("no reply in time", request=request) from exc


def _encode(request: httpx.Request, body: bytes) -> bytes:
    """The request's line, headers and body in one message (``Content-Length`` framing)."""
    target = request.url.raw_path
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    for name, value in request.headers.raw:
        if name.lower() not in (b"content-length", b"transfer-encoding"):
            lines.append(name + b": " + value)
    if body or request.method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _parse_head(raw: bytes, request: httpx.Request) -> _Head:
    status_line, *header_lines = raw[:-4].split(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError("not an HTTP/1.1 reply", request=request)
    headers = []
    for line in header_lines:
        name, colon, value = line.partition(b":")
        if not colon or not name.strip():
            raise httpx.RemoteProtocolError("a bad reply header", request=request)
        headers.append((name.strip(), value.strip()))
    return int(parts[1]), headers


def _framing(headers: list[tuple[bytes, bytes]], *, empty: bool) -> tuple[str, int]:
    """How the body ends: ``("none"|"length"|"chunked"|"close", length)``."""
    if empty:
        return "none", 0
    for name, value in headers:
        if name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            return "chunked", 0
    for name, value in headers:
        if name.lower() == b"content-length" and value.isdigit():
            return "length", int(value)
    return "close", 0
