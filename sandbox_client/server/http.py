"""The little HTTP/1.1 the server speaks: parse a request, write a reply, stream chunks.

Only what the SBX/1 client sends is supported: bodies with ``Content-Length`` (no
chunked request bodies), keep-alive by default. A full framework would cost tens of
milliseconds of import time in every sandbox start (so would ``dataclasses``: these are plain
classes).
"""

from __future__ import annotations

import json

from .loop import IncompleteReadError, LimitOverrunError, Stream

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_REASONS = {
    200: "OK",
    206: "Partial Content",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    416: "Range Not Satisfiable",
    422: "Unprocessable Entity",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
}


class HttpError(Exception):
    """A request the server answers with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Request:
    """One parsed request. ``path`` is percent-decoded; header names are lower case."""

    __slots__ = ("body", "headers", "keep_alive", "method", "path", "query")

    def __init__(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        headers: dict[str, str],
        body: bytes = b"",
        keep_alive: bool = True,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive

    def json(self) -> Any:
        """The body parsed as JSON (an empty body is ``{}``).

        Raises:
            HttpError: 400 when the body is not JSON.
        """
        if not self.body:
            return {}
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise HttpError(400, f"invalid JSON body: {exc}") from exc


class Reply:
    """A complete (non-streaming) response."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        status: int = 200,
        body: bytes = b"",
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}

    @classmethod
    def of_json(cls, value: object, status: int = 200) -> Reply:
        """A JSON reply (UTF-8, non-ASCII kept as is)."""
        body = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
        return cls(status=status, body=body)

    @classmethod
    def error(cls, status: int, message: str) -> Reply:
        """The SBX/1 error shape: ``{"error": message}``."""
        return cls.of_json({"error": message}, status)


async def read_request(reader: Stream, max_body_bytes: int) -> Request | None:
    """Read one request; None when the peer closed the connection between requests.

    Raises:
        HttpError: malformed request line or headers, or a body over ``max_body_bytes``.
    """
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise HttpError(400, "incomplete request head") from exc
    except LimitOverrunError as exc:
        raise HttpError(431, "request head too large") from exc
    method, target, version, headers = _parse_head(head)
    body = await _read_body(reader, headers, max_body_bytes)
    path, _, query_text = target.partition("?")
    keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
    return Request(method, unquote(path), _parse_query(query_text), headers, body, keep_alive)


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError(400, "malformed header line")
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], parts[2], headers


async def _read_body(reader: Stream, headers: dict[str, str], max_body_bytes: int) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise HttpError(411, "chunked request bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError as exc:
        raise HttpError(400, "invalid Content-Length") from exc
    if length < 0:
        raise HttpError(400, "invalid Content-Length")
    if length > max_body_bytes:
        raise HttpError(413, f"request body of {length} bytes is over {max_body_bytes} bytes")
    try:
        return await reader.readexactly(length) if length else b""
    except IncompleteReadError as exc:
        raise HttpError(400, "incomplete request body") from exc


_HEX = frozenset("0123456789abcdefABCDEF")


def unquote(text: str) -> str:
    """Percent-decode ``text`` as UTF-8 (``urllib.parse`` costs import time at start-up).

    >>> unquote("/filesystem//work%20space/%C3%A9")
    '/filesystem//work space/é'
    """
    if "%" not in text:
        return text
    first, *rest = text.split("%")
    out = bytearray(first.encode())
    for part in rest:
        if len(part) >= 2 and part[0] in _HEX and part[1] in _HEX:
            out.append(int(part[:2], 16))
            out += part[2:].encode()
        else:
            out += b"%" + part.encode()
    return out.decode("utf-8", "replace")


def _parse_query(text: str) -> dict[str, str]:
    query: dict[str, str] = {}
    for pair in text.split("&"):
        if pair:
            key, _, value = pair.partition("=")
            query[unquote(key)] = unquote(value.replace("+", " "))
    return query


def encode_reply(reply: Reply, keep_alive: bool) -> bytes:
    """The bytes of ``reply`` on the wire, with ``Content-Length``."""
    headers = {
        "Content-Type": reply.content_type,
        "Content-Length": str(len(reply.body)),
        "Connection": "keep-alive" if keep_alive else "close",
        **reply.headers,
    }
    return _status_and_headers(reply.status, headers) + reply.body


def _status_and_headers(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class ChunkedWriter:
    """A streaming 200 reply in chunked transfer encoding (one chunk per ``send``)."""

    def __init__(self, writer: Stream, content_type: str) -> None:
        self._writer = writer
        headers = {
            "Content-Type": content_type,
            "Transfer-Encoding": "chunked",
            "Cache-Control": "no-cache",
            "Connection": "keep-alive",
        }
        writer.write(_status_and_headers(200, headers))

    async def send(self, data: bytes) -> None:
        """Send one chunk and wait until the transport's buffer drains.

        Raises:
            ConnectionError: the peer went away.
        """
        if data:
            self._writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self._writer.drain()

    async def end(self, data: bytes = b"") -> None:
        """Send ``data`` as a last chunk and the terminating empty chunk, in one write."""
        last = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
        self._writer.write(last + b"0\r\n\r\n")
        await self._writer.drain()
