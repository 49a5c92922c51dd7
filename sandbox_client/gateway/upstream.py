"""The gateway's upstream side: HTTP/1.1 over asyncio streams, framed by ``h11``, with
connections kept alive and reused per origin.

The proxy already speaks ``h11`` to the sandbox; speaking it upstream too keeps a request's
cost to two parses and two writes (an ``httpx`` client cost the gateway most of its time per
request: ``bench/gateway.py``). TLS is the standard library's: certificates are verified
against the trust the gateway is given, for the host name (or IP address) asked for, as any
client does. Redirects are not followed and no proxy is used: the sandbox's client sees what
the upstream answered.

A kept-alive connection the upstream has closed meanwhile is noticed before reuse when its
end has arrived; a reused connection that ends before any byte of the answer (the race with
the upstream's idle timeout) is retried once on a new connection, for idempotent methods only
(RFC 9110 §9.2.2).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import h11

READ_CHUNK = 65_536
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})
Origin = tuple[str, str, int]  # scheme, host, port


class UpstreamError(Exception):
    """The upstream could not be reached, or broke the exchange before its answer began."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    conn: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))
    idle_since: float = 0.0
    reused: bool = False

    def usable(self, now: float, expiry_s: float) -> bool:
        return not self.reader.at_eof() and now - self.idle_since < expiry_s

    def close(self) -> None:
        self.writer.close()


@dataclass(frozen=True)
class Answer:
    """The upstream's response head; the body comes from ``Exchange.body``."""

    status: int
    reason: bytes
    headers: Sequence[tuple[bytes, bytes]]


class Exchange:
    """One request's response, read as it arrives; ``aclose`` returns the connection to the
    pool when the exchange ended cleanly, else closes it."""

    def __init__(self, pool: Upstream, origin: Origin, connection: _Connection, answer: Answer):
        self.answer = answer
        self._pool = pool
        self._origin = origin
        self._connection = connection
        self._done = False

    async def body(self) -> AsyncIterator[tuple[bytes, bool]]:
        """The body as ``(bytes, last)``: first what arrived with the head (maybe nothing),
        then what each read from the upstream brings, so the caller writes once per read.

        Raises:
            UpstreamError: the upstream broke the body off or timed out.
        """
        while True:
            parts: list[bytes] = []
            while (event := self._connection.conn.next_event()) is not h11.NEED_DATA:
                if isinstance(event, h11.Data):
                    parts.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self._done = True
                    yield b"".join(parts), True
                    return
                else:
                    raise UpstreamError("the upstream ended the body early")
            yield b"".join(parts), False
            await self._pool.receive(self._connection)

    async def aclose(self) -> None:
        """Give the connection back for reuse, or close it."""
        self._pool.done(self._origin, self._connection, clean=self._done)


class Upstream:
    """A pool of upstream connections (see the module docstring).

    Args:
        verify: True (the system's trust store), False (no verification: tests only) or a
            context to verify with (a private CA).
        timeout_s: the longest a connect or any one read may take.
        max_idle: kept-alive connections per origin.
        idle_expiry_s: an idle connection older than this is closed, not reused.
    """

    def __init__(
        self,
        verify: ssl.SSLContext | bool = True,
        *,
        timeout_s: float = 30.0,
        max_idle: int = 64,
        idle_expiry_s: float = 30.0,
    ) -> None:
        self._tls = _client_context(verify)
        self._timeout_s = timeout_s
        self._max_idle = max_idle
        self._idle_expiry_s = idle_expiry_s
        self._idle: dict[Origin, list[_Connection]] = {}

    async def send(
        self,
        origin: Origin,
        method: str,
        target: str,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
    ) -> Exchange:
        """Send one request to ``origin`` (``headers`` without ``Host`` and framing headers:
        they are added here) and return once the response head arrived.

        Raises:
            UpstreamError: the upstream could not be reached, or answered nothing.
        """
        request = _request(origin, method, target, headers, body)
        for attempt in (1, 2):
            connection = await self._acquire(origin)
            try:
                answer = await self._exchange(connection, request, body)
            except (OSError, TimeoutError, h11.ProtocolError, UpstreamError) as exc:
                connection.close()
                if attempt == 1 and connection.reused and method in IDEMPOTENT:
                    continue  # it was closed under us: once more on a new connection
                raise UpstreamError(f"{type(exc).__name__}: {exc}") from exc
            return Exchange(self, origin, connection, answer)
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def receive(self, connection: _Connection) -> None:
        """Read once from ``connection`` into its parser (within ``timeout_s``).

        Raises:
            UpstreamError: a timeout, a broken connection or a protocol error.
        """
        try:
            data = await asyncio.wait_for(connection.reader.read(READ_CHUNK), self._timeout_s)
            connection.conn.receive_data(data)
        except (OSError, TimeoutError, h11.ProtocolError) as exc:
            raise UpstreamError(f"{type(exc).__name__}: {exc}") from exc

    def done(self, origin: Origin, connection: _Connection, *, clean: bool) -> None:
        """Keep ``connection`` for the next request to ``origin`` when both sides may go on;
        close it otherwise."""
        conn = connection.conn
        idle = self._idle.setdefault(origin, [])
        reusable = clean and conn.our_state is h11.DONE and conn.their_state is h11.DONE
        if reusable and len(idle) < self._max_idle:
            conn.start_next_cycle()
            connection.idle_since = time.monotonic()
            connection.reused = True
            idle.append(connection)
            return
        connection.close()

    async def aclose(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()

    async def _acquire(self, origin: Origin) -> _Connection:
        idle = self._idle.get(origin, [])
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.usable(now, self._idle_expiry_s):
                return connection
            connection.close()
        scheme, host, port = origin
        tls = self._tls if scheme == "https" else None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None),
                self._timeout_s,
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise UpstreamError(f"{type(exc).__name__}: {exc}") from exc
        return _Connection(reader, writer)

    async def _exchange(self, connection: _Connection, request: h11.Request, body: bytes) -> Answer:
        conn, writer = connection.conn, connection.writer
        data = conn.send(request) or b""
        if body:
            data += conn.send(h11.Data(data=body)) or b""
        data += conn.send(h11.EndOfMessage()) or b""
        writer.write(data)
        await writer.drain()
        while True:
            event = connection.conn.next_event()
            if event is h11.NEED_DATA:
                await self.receive(connection)
            elif isinstance(event, h11.InformationalResponse):
                continue  # 100 Continue and the like: the final answer follows
            elif isinstance(event, h11.Response):
                return Answer(event.status_code, bytes(event.reason), list(event.headers))
            else:
                raise UpstreamError("the upstream closed the connection without answering")


def _request(
    origin: Origin, method: str, target: str, headers: Sequence[tuple[bytes, bytes]], body: bytes
) -> h11.Request:
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    authority = shown if port == default else f"{shown}:{port}"
    head = [(b"host", authority.encode("ascii", "replace")), *headers]
    if body or method in ("POST", "PUT", "PATCH"):
        head.append((b"content-length", str(len(body)).encode()))
    return h11.Request(method=method, target=target.encode("latin-1"), headers=head)


def _client_context(verify: ssl.SSLContext | bool) -> ssl.SSLContext:
    """The TLS context for upstream connections (made once: contexts are costly)."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    with contextlib.suppress(NotImplementedError):
        context.set_alpn_protocols(["http/1.1"])
    return context
