"""HTTP to one sandbox: timeouts, retries of idempotent calls, httpx errors mapped.

This is the one place that catches httpx exceptions for the data plane; everything
above it sees ``SandboxUnavailable``/``SandboxTimeout`` (raised ``from`` the original).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from sandbox_client.errors import (
    ProtocolError,
    RequestRejected,
    SandboxTimeout,
    SandboxUnavailable,
)
from sandbox_client.wire import error_message

RETRY_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class ClientOptions:
    """How a ``SandboxClient`` talks to its sandbox.

    Attributes:
        request_timeout_s: one ordinary request, from connecting to the last byte. A
            frozen sandbox accepts connections and then hangs, so this always applies.
        connect_timeout_s: establishing a connection.
        stream_idle_timeout_s: a streamed ``exec`` reply silent this long is dead and the
            client falls back to polling (docs/architecture.md §8: 15 s; keepalives come
            every 5 s).
        poll_interval_s, max_poll_interval_s: polling a running process, doubling from
            the first to the second.
        max_attempts: tries of an idempotent call (GET, PUT, DELETE) on connection
            failures and 502/503/504; other calls are tried once.
        retry_backoff_s: the first pause between tries (doubling).
        kill_wait_s: after killing a process whose deadline passed, how long to wait
            for its final record.
        fs_root: filesystem calls are refused outside this directory.
        max_output_chars: each of stdout, stderr, logs of a record, and the live output
            passed to ``on_output``, is cut to this (head and tail kept).
        max_event_bytes: the longest NDJSON event line read from a stream.
        max_response_bytes: the largest body of an ordinary reply: a longer one is a
            ``ProtocolError``, read no further. What answers is inside the sandbox (a
            command can replace the jail's server), and the worker serves many sessions:
            no reply may make it hold more. The local server's largest honest replies
            are a file (32 MiB) and a process listing (64 MiB of kept output, escaped).
        keepalive_connections: keep idle connections open (local sockets: yes; Blaxel:
            no, so a sandbox can go to standby).
        get_or_start: ``exec`` sends one ``PUT /process/{name}``, which the server answers
            with the known process of that name or else starts it (the local server's own
            call), instead of a lookup and then a ``POST /process``; a server without it
            (404) is asked the other way from then on.
    """

    request_timeout_s: float = 10.0
    connect_timeout_s: float = 3.0
    stream_idle_timeout_s: float = 15.0
    poll_interval_s: float = 0.02
    max_poll_interval_s: float = 1.0
    max_attempts: int = 3
    retry_backoff_s: float = 0.05
    kill_wait_s: float = 5.0
    fs_root: str = "/workspace"
    max_output_chars: int = 1024 * 1024
    max_event_bytes: int = 32 * 1024 * 1024
    max_response_bytes: int = 160 * 1024 * 1024
    keepalive_connections: bool = True
    get_or_start: bool = False


class Transport:
    """An ``httpx.AsyncClient`` for one sandbox, with SBX/1 error mapping."""

    def __init__(
        self,
        sandbox_id: str,
        base_url: str,
        options: ClientOptions,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.sandbox_id = sandbox_id
        self.options = options
        self.get_or_start = options.get_or_start  # False once the server lacked it
        keepalive = None if options.keepalive_connections else 0
        self._client = httpx.AsyncClient(
            base_url=base_url,
            transport=transport,
            headers=dict(headers or {}),
            timeout=self.timeout(options.request_timeout_s),
            limits=httpx.Limits(max_keepalive_connections=keepalive),
        )

    def timeout(self, read_s: float) -> httpx.Timeout:
        """A timeout whose read (and total) part is ``read_s``."""
        return httpx.Timeout(read_s, connect=self.options.connect_timeout_s)

    async def aclose(self) -> None:
        """Close every connection."""
        await self._client.aclose()

    async def request(
        self, method: str, path: str, *, idempotent: bool, **kwargs: Any
    ) -> httpx.Response:
        """Send a request; retry idempotent ones on connection failures and 502/503/504.

        Returns the response whatever its status (callers map 4xx themselves).

        Raises:
            SandboxTimeout: no answer in time (never retried: a frozen sandbox stays so).
            SandboxUnavailable: the connection failed on every try.
        """
        attempts = self.options.max_attempts if idempotent else 1
        backoff_s = self.options.retry_backoff_s
        for attempt in range(1, attempts + 1):
            try:
                response = await self._bounded(self._client.build_request(method, path, **kwargs))
            except httpx.TimeoutException as exc:
                raise self.timeout_error(f"{method} {path}", exc) from exc
            except httpx.TransportError as exc:
                if attempt == attempts:
                    raise self.unavailable(f"{method} {path}", exc) from exc
            else:
                if response.status_code not in RETRY_STATUSES or attempt == attempts:
                    return response
            await asyncio.sleep(backoff_s)
            backoff_s *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    async def _bounded(self, request: httpx.Request) -> httpx.Response:
        """``request``'s reply, its body read whole unless it passes ``max_response_bytes``,
        all of it within the request's read timeout: httpx's applies to each read, so a
        server sending a byte now and then would hold the caller for as long as it likes.

        Raises:
            ProtocolError: the body (as declared, or as sent) is longer than that.
            httpx.TimeoutException, httpx.TransportError: as ``AsyncClient.send``; a reply
                not read whole in time is ``httpx.ReadTimeout``.
        """
        total_s = request.extensions.get("timeout", {}).get("read")
        deadline = asyncio.timeout(total_s)
        try:
            async with deadline:
                return await self._read_bounded(request)
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise httpx.ReadTimeout(
                "the reply took longer than its timeout", request=request
            ) from exc

    async def _read_bounded(self, request: httpx.Request) -> httpx.Response:
        """``_bounded`` without its deadline."""
        most = self.options.max_response_bytes
        response = await self._client.send(request, stream=True)
        try:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and len(declared) < 20 and int(declared) > most:
                raise self.too_long(request, most)
            body = bytearray()
            async for chunk in response.aiter_bytes():  # decoded: a compressed bomb counts
                body += chunk
                if len(body) > most:
                    raise self.too_long(request, most)
        finally:
            await response.aclose()
        framing = (b"content-encoding", b"content-length", b"transfer-encoding")  # undone here
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in framing]
        return httpx.Response(
            response.status_code,
            headers=headers,
            content=bytes(body),
            request=request,
            extensions=response.extensions,
        )

    def too_long(self, request: httpx.Request, most: int) -> ProtocolError:
        """The error for a reply whose body passes ``max_response_bytes``."""
        what = f"{request.method} {request.url.path}"
        return ProtocolError(self.sandbox_id, f"{what}: a reply of more than {most} bytes")

    @asynccontextmanager
    async def stream(
        self, method: str, path: str, *, timeouts: httpx.Timeout, **kwargs: Any
    ) -> AsyncIterator[httpx.Response]:
        """Open a streamed response (sent once: streams are never retried).

        Raises:
            SandboxTimeout, SandboxUnavailable: as for ``request``.
        """
        request = self._client.build_request(method, path, timeout=timeouts, **kwargs)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise self.timeout_error(f"{method} {path}", exc) from exc
        except httpx.TransportError as exc:
            raise self.unavailable(f"{method} {path}", exc) from exc
        try:
            yield response
        finally:
            await response.aclose()

    def timeout_error(self, what: str, exc: Exception) -> SandboxTimeout:
        """The error for a request that got no answer in time."""
        timeout_s = self.options.request_timeout_s
        return SandboxTimeout(self.sandbox_id, f"{what}: {type(exc).__name__}", timeout_s=timeout_s)

    def unavailable(self, what: str, exc: Exception) -> SandboxUnavailable:
        """The error for a request whose connection failed."""
        return SandboxUnavailable(self.sandbox_id, f"{what}: {type(exc).__name__}: {exc}")

    def rejected(self, response: httpx.Response, body: bytes) -> Exception:
        """The error for a non-2xx reply: 5xx → unavailable, 4xx → rejected."""
        message = error_message(body)
        if response.status_code >= 500:
            reason = f"HTTP {response.status_code}: {message}"
            return SandboxUnavailable(self.sandbox_id, reason)
        return RequestRejected(self.sandbox_id, response.status_code, message)
