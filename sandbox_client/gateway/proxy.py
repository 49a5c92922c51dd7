"""The egress gateway: an HTTP proxy that decides each request by the rules (§11).

Plain HTTP requests arrive in absolute form (``GET http://host/path``); HTTPS arrives as
``CONNECT host:443``. For a tunnel rule the bytes pass untouched. Otherwise the gateway answers
the ``CONNECT`` itself, terminates TLS with a certificate for the host minted by its own CA,
reads each request inside, decides it by method and path as the upstream will read them (the
path in one normal form, ``paths``; the method with any override, ``methods``), adds the
rule's credential, sends it upstream over a normally verified TLS connection, and scrubs the
credential from the response before the sandbox sees it (``scrubber``, ``replies``). A plain
``http://`` request gets a credential only from a rule that says ``allow_plaintext``. Blocked
requests get a 403 whose body says which rule is missing. Every request is reported to the
audit sink.

HTTP parsing is ``h11``'s on both sides; upstream connections are kept alive and reused
(``upstream.Upstream``), and the host's proxy variables are never consulted.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import ipaddress
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit

import h11

from sandbox_client.gateway.bodies import BodyBudget, BodyHold
from sandbox_client.gateway.ca import CertificateAuthority
from sandbox_client.gateway.calls import (
    BadProxyAuthorization,
    CallCredentials,
    proxy_authorization,
)
from sandbox_client.gateway.credentials import Injected
from sandbox_client.gateway.heads import Head, head_state, idle_since, start_watched_server
from sandbox_client.gateway.methods import AmbiguousMethod, effective_method, judged_method
from sandbox_client.gateway.paths import (
    AmbiguousPath,
    after_authority,
    origin_form,
    refuse_path_override,
    split_target,
)
from sandbox_client.gateway.replies import ReplyBody, UnreadableBody
from sandbox_client.gateway.request_line import not_http
from sandbox_client.gateway.rules import (
    READ_ONLY_METHODS,
    Decision,
    Outcome,
    RequestLine,
    Rule,
    Rules,
    decide_override,
)
from sandbox_client.gateway.scrubber import Scrubber
from sandbox_client.gateway.tokens import TokenBook, TokensBusy
from sandbox_client.gateway.upstream import Upstream, UpstreamError

logger = logging.getLogger(__name__)

HOP_BY_HOP = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
        "accept-encoding",
    }
)
HOP_BY_HOP_BYTES = frozenset(name.encode() for name in HOP_BY_HOP)


BODY_PIECES_FREE = 64
BODY_PIECE_MIN_BYTES = 128
"""A request's body may come in ``BODY_PIECES_FREE`` pieces (chunks of a chunked body, or
reads) plus one per ``BODY_PIECE_MIN_BYTES`` bytes it holds so far. Each piece costs the
parser a few microseconds on the event loop, shared by every session: a body sent a byte
at a time is refused at once rather than parsed for a third of a second, again and again."""


class _Unread(enum.Enum):
    """Why a request's body was not read to its end (the value: the audit's reason)."""

    TOO_LARGE = "the request body is too large"
    TOO_MANY_PIECES = "the request body comes in too many small pieces"
    NO_ROOM = "the gateway holds too many request bodies"


TOO_MANY_CONNECTIONS = (
    "The warroom egress gateway has too many connections open from this sandbox;"
    " close some and try again.\n"
)
TOKENS_BUSY = (
    "The warroom egress gateway is looking up too many tokens from this address;"
    " try again in a moment.\n"
)
READ_CHUNK = 65_536
ALL_CLIENTS = "all clients"
"""What ``max_unnamed`` bounds (``Gateway._await_head``)."""
BURST_FACTOR = 4
"""How far past its bound a client's unnamed connections may go while every one has its
head whole (a burst read in a moment, or look-ups in flight)."""
_Heading = tuple[asyncio.Task[None], float, asyncio.StreamReader]
"""An unnamed connection of the token listener: its handler, since (monotonic s), reader."""
ADMIN_HINT = "an admin allows it with a rule in the egress rules file (WARROOM_EGRESS_RULES)"


@dataclass(frozen=True)
class Caller:
    """Whose sandbox a request comes from, and from which of its calls.

    A listener serves one session (``tool_use_id`` None); a request carrying a valid per-call
    proxy credential (``calls.CallCredentials``) is then that call's: ``tool_use_id`` is set
    only from a credential checked by the gateway, never from what the sandbox claims.
    """

    session_id: str
    channel_id: str | None = None
    tool_use_id: str | None = None


@dataclass(frozen=True)
class EgressRecord:
    """One request through the gateway, for the audit log (no query values, no secrets).

    ``tool_use_id`` is the call whose per-call proxy credential the request carried (None: it
    carried none, so it came from no call's own environment); ``path`` keeps query parameter
    names only (``/api/v1/query?query``); ``bytes`` counts the response body sent to the
    sandbox; ``duration_ms`` runs from the request line to the end of the response.
    """

    at: datetime
    session_id: str
    tool_use_id: str | None
    method: str
    host: str
    port: int
    path: str
    status: int
    bytes: int
    duration_ms: float
    rule: str | None
    outcome: Outcome


AuditSink = Callable[[EgressRecord], Awaitable[None]]
TokenResolver = Callable[[str], Awaitable["Caller | None"]]
"""``token -> Caller`` (its session, no call) for a remote sandbox's session token, None if
unknown or revoked."""


ApprovalCheck = Callable[[str, str], Awaitable[bool]]
"""``(session_id, tool_use_id) -> bool``: a human approved that call and it is running now."""

APPROVAL_HINT = (
    "a request that changes something goes out only from the processes of a command a human "
    "approved in the thread, while it runs: run it as its own command, which asks for approval"
)


@dataclass(frozen=True)
class GatewayOptions:
    """Limits and trust: ``upstream_verify`` is what upstream certificates are checked against
    (True: the system's trust store; a context: a private CA, for tests). ``approved``: when
    set, a request with a method other than GET or HEAD through any rule passes only when it
    carries the per-call credential of a call that is approved and in flight
    (docs/architecture.md §13), whatever the command looked like to the policy; None: not
    checked. ``calls`` checks per-call credentials (None: a request carrying one is refused
    407, so none is from a call). ``max_request_bytes``: one request's body, larger is
    refused 403; ``max_held_body_bytes``: the bodies read and not yet answered, over all
    connections (``bodies.BodyBudget``), past which a request is answered 503, and
    ``max_held_body_bytes_per_session`` those of one session's sandbox.
    ``max_connections_per_session``: open connections from one session's sandbox (its
    listener's, or the token listener's once a request names the session: past it that
    request is answered 503, audited); ``max_token_connections``: all those to the token
    listener (remote sandboxes) whose request named a session. A connection past a
    sandbox's listener's limit is answered 503 unread and closed: each holds buffers of its
    own (up to ~200 KiB). ``max_unnamed_per_address``: the token listener's connections of
    one client (an address; an IPv6 client by its /64) still sending their first request
    head, and ``max_unnamed`` those of all clients; a new one past either closes the oldest
    of them that is stalling (``heads``; a sandbox sends its head at once): its head not
    whole, and nothing of it sent for ``head_grace_s``; so nobody can hold
    the token listener's connections without a token, nor keep out sandboxes that share
    its address (NAT). When none is (a burst), the new one is let in past a client's
    bound, up to ``BURST_FACTOR`` times it; past that, or past the bound of all, the oldest
    whose head is not whole is closed, and when every one has its head whole, the new
    one is answered 503 unread.
    ``head_timeout_s``: the longest a connection's first request head may take to arrive,
    whole (a head sent a byte at a time holds no slot for long). Session tokens
    (``tokens.TokenBook``): one carrying ``calls``'s tag is looked up at once, one with a
    token's length and no tag (issued before tags) under ``max_lookups_per_address`` in
    flight per client, all under ``max_lookups`` (past either: 503), requests naming one
    token sharing its look-up; anything else is refused unlooked; an answer is used
    for ``token_ttl_s`` (the most a revoked token keeps working), ``max_remembered_tokens``
    live ones and as many refused."""

    upstream_verify: ssl.SSLContext | bool = True
    upstream_timeout_s: float = 30.0
    idle_timeout_s: float = 60.0
    max_request_bytes: int = 16 * 1024 * 1024
    max_held_body_bytes: int = 256 * 1024 * 1024
    max_held_body_bytes_per_session: int = 64 * 1024 * 1024
    max_connections_per_session: int = 128
    max_token_connections: int = 1024
    max_unnamed_per_address: int = 16
    max_unnamed: int = 1024
    head_grace_s: float = 0.25
    token_ttl_s: float = 5.0
    max_remembered_tokens: int = 4096
    max_lookups_per_address: int = 16
    max_lookups: int = 256
    head_timeout_s: float = 10.0
    approved: ApprovalCheck | None = None
    calls: CallCredentials | None = None


class Gateway:
    """The proxy core; one per process, one listener per sandbox (``serve_unix``)."""

    def __init__(
        self,
        rules: Rules,
        authority: CertificateAuthority,
        injected: dict[str, Injected],
        audit: AuditSink,
        options: GatewayOptions | None = None,
    ) -> None:
        self.rules = rules
        self.authority = authority
        self._injected = injected
        self._audit = audit
        self.options = options or GatewayOptions()
        self._upstream = Upstream(
            self.options.upstream_verify, timeout_s=self.options.upstream_timeout_s
        )
        self.bodies = BodyBudget(
            self.options.max_held_body_bytes, self.options.max_held_body_bytes_per_session
        )
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._open_by_listener: dict[str, int] = {}  # open connections by ``_enter`` key
        # the token listener's connections still sending their first request head, oldest
        # first, by client (``_await_head``), each with its handler; and all of them
        self._heading: dict[str, dict[asyncio.StreamWriter, _Heading]] = {}
        self._all_heading: dict[asyncio.StreamWriter, str] = {}
        self._evicted: set[asyncio.Task[None]] = set()  # handlers cancelled to make room
        self._turned_away: set[str] = set()  # keys at their limit, warned about once
        self._bound: dict[Path, _Binding] = {}

    async def serve_unix(self, path: Path, caller: Caller) -> asyncio.Server:
        """Listen on a Unix socket at ``path`` for one sandbox's requests."""
        server = await asyncio.start_unix_server(
            lambda r, w: self._handle(r, w, caller), path=str(path)
        )
        self._servers.append(server)
        return server

    async def bind(self, path: Path, caller: Caller) -> None:
        """Serve a sandbox's socket at ``path`` from this process, for ``caller`` from now on.

        Idempotent and cheap when this process already serves ``path``: only the caller
        changes (the ``tool_use`` now running). Otherwise the socket file is replaced by a new
        one served here: the jail binds the socket's directory, not the file, so it sees the
        new socket at once. Whichever process runs the sandbox's current command therefore
        serves its requests, and a dead process's socket is replaced on the next command.
        """
        binding = self._bound.get(path)
        if binding is not None and _inode(path) == binding.inode:
            binding.caller = caller
            return
        if binding is not None:
            binding.server.close()
        await asyncio.to_thread(_remove, path, -1)
        holder = _Binding(caller=caller)
        holder.server = await asyncio.start_unix_server(
            lambda r, w: self._handle(r, w, holder.caller), path=str(path)
        )
        holder.inode = _inode(path)
        self._bound[path] = holder
        self._servers.append(holder.server)

    async def unbind(self, path: Path) -> None:
        """Stop serving ``path`` (the sandbox is gone)."""
        binding = self._bound.pop(path, None)
        if binding is not None:
            binding.server.close()
            await asyncio.to_thread(_remove, path, binding.inode)

    async def serve_tcp(self, host: str, port: int, caller: Caller) -> asyncio.Server:
        """Listen on ``host:port`` (0 for any free port) for one caller's requests."""
        server = await asyncio.start_server(
            lambda r, w: self._handle(r, w, caller), host=host, port=port
        )
        self._servers.append(server)
        return server

    async def serve_tokens(self, host: str, port: int, resolve: TokenResolver) -> asyncio.Server:
        """Listen on ``host:port`` for remote sandboxes, each naming itself by a token.

        A sandbox's proxy URL is ``http://<tool_use_id>:<token>.<credential>@host:port``:
        clients send it as ``Proxy-Authorization: Basic …``. ``resolve`` maps the session token
        to its session (None: unknown or revoked, answered 407); the per-call credential, when
        there, must be that call's (else 407) and makes the request the call's.
        """
        book = TokenBook(
            resolve,
            ttl_s=self.options.token_ttl_s,
            max_remembered=self.options.max_remembered_tokens,
            max_per_client=self.options.max_lookups_per_address,
            max_in_flight=self.options.max_lookups,
            signer=self.options.calls,
        )
        server = await start_watched_server(lambda r, w: self._handle(r, w, None, book), host, port)
        self._servers.append(server)
        return server

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Stop every listener, let connections in flight end within ``grace_s`` (then cancel
        them), and close upstream connections."""
        for server in self._servers:
            server.close()
        if self._connections:
            _, late = await asyncio.wait(self._connections, timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()
        await self._upstream.aclose()

    async def _handle(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        caller: Caller | None,
        book: TokenBook | None = None,
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)
        keys: list[str] = []
        address = ""
        resolve: TokenResolver | None = None
        if caller is not None:  # a sandbox's own listener
            limit = self.options.max_connections_per_session
            if not self._enter(caller.session_id, limit):
                await self._turn_away(writer, caller.session_id, limit)
                return
            keys.append(caller.session_id)
        else:  # the token listener: by client address until a request names its session
            address = _client_key(writer)
            if book is not None:
                resolve = functools.partial(book.caller, client=address)
            past = self._await_head(address, reader, writer, task)
            if past is not None:
                await self._turn_away(writer, *past)
                return
        try:
            conn = h11.Connection(h11.SERVER)
            seen = bytearray()  # its first bytes: the audit row of one h11 refuses
            try:
                async with asyncio.timeout(self.options.head_timeout_s):
                    request = await self._first_request(conn, reader, seen)
            except h11.RemoteProtocolError as exc:
                if caller is None:  # the token listener: no session before a request
                    raise
                await self._malformed_recorded(conn, writer, exc, caller, bytes(seen))
                return
            if request is None:
                return
            listener = caller
            try:
                caller = await self._proved(conn, writer, request, listener, resolve)
            except TokensBusy:  # guesses from this client fill its look-ups
                await self._busy(conn, writer)
                return
            if caller is None:
                return
            if listener is None:  # the token listener: the session is known from now on
                self._headed(address, writer)
                for named, most in (
                    ("", self.options.max_token_connections),
                    (caller.session_id, self.options.max_connections_per_session),
                ):
                    if not self._enter(named, most):
                        await self._too_many(conn, writer, request, caller)
                        return
                    keys.append(named)
            if request.method == b"CONNECT":
                # a remote sandbox's requests inside the tunnel carry no credentials of
                # their own: each is proved again by the CONNECT's (its token still live)
                recheck = None
                if listener is None:
                    recheck = functools.partial(
                        self._proved,
                        writer=writer,
                        request=request,
                        listener=None,
                        resolve=resolve,
                    )
                await self._connect(conn, request, reader, writer, caller, recheck)
            else:  # each request carries its own proxy credentials: each is identified
                identify = functools.partial(
                    self._proved, conn, writer, listener=listener, resolve=resolve
                )
                await self._serve(
                    conn, request, reader, writer, caller, scheme="http", identify=identify
                )
        except h11.RemoteProtocolError as exc:
            await self._malformed(conn, writer, exc)
        except (ConnectionError, TimeoutError, h11.ProtocolError, ssl.SSLError):
            pass
        except TokensBusy:  # a later request's token, past the client's look-ups
            await self._busy(conn, writer)
        except asyncio.CancelledError:  # closed to make room (``_await_head``): it ends here
            if task not in self._evicted or task.uncancel():
                raise
        finally:
            if address:
                self._evicted.discard(task)
                self._headed(address, writer)
            for counted in keys:
                self._leave(counted)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _await_head(
        self,
        client: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        task: asyncio.Task[None],
    ) -> tuple[str, int] | None:
        """Count a token listener's connection among those of ``client`` not yet named
        (sending their first request head, or their token being looked up); None, or
        (what is full, its limit) when it must be turned away (counting nothing).

        Past ``max_unnamed_per_address`` for ``client``, or ``max_unnamed`` for all, the
        oldest of those connections that is stalling (``_stalling``) is closed to make
        room: a sandbox sends its head at once, so neither connections that trickle their
        heads nor a neighbour opening them without end, from an address several sandboxes
        share (NAT), can keep the others out, and a sandbox's connection just accepted is
        not taken for one. When none of the client's is (a burst of whole requests, or
        look-ups), the new one is let in, up to ``BURST_FACTOR`` times the bound; there,
        and at the bound of all, the oldest whose head is not whole is closed, and when
        every one has its head whole the new one is turned away (503, none reset
        unread)."""
        for of_client in (True, False):
            if of_client:
                among: dict[asyncio.StreamWriter, Any] = self._heading.get(client, {})
                key, limit = client, self.options.max_unnamed_per_address
            else:
                among, key, limit = self._all_heading, ALL_CLIENTS, self.options.max_unnamed
            if len(among) < limit:
                continue
            # at a client's hard bound, or the bound of all, even a connection that sent
            # part of its head within the grace time may go (the oldest of them)
            hard = not of_client or len(among) >= limit * BURST_FACTOR
            stalling = self._stalling(among, young_too=hard)
            if stalling is not None:
                self._close_stalling(stalling, key, limit)
            elif hard:
                return key, limit
        self._heading.setdefault(client, {})[writer] = (task, time.monotonic(), reader)
        self._all_heading[writer] = client
        return None

    def _stalling(
        self, among: Iterable[asyncio.StreamWriter], *, young_too: bool
    ) -> asyncio.StreamWriter | None:
        """The oldest of ``among`` (unnamed connections, oldest first) that is stalling:
        its head not whole, and nothing of it sent for ``head_grace_s`` (a head in two
        segments a few ms apart is not stalling); with ``young_too``, else the oldest
        whose head is not whole. None: every one has its head whole (``_await_head``)."""
        young: asyncio.StreamWriter | None = None
        idle_before = time.monotonic() - self.options.head_grace_s
        for writer in among:
            _, since, reader = self._heading[self._all_heading[writer]][writer]
            if head_state(reader, writer) is Head.WHOLE:
                continue
            if idle_since(reader, since) <= idle_before:
                return writer
            young = young or writer
        return young if young_too else None

    def _close_stalling(self, writer: asyncio.StreamWriter, key: str, limit: int) -> None:
        """Close an unnamed connection whose head has not arrived, to make room under
        ``key``'s ``limit`` (a client's, or ``ALL_CLIENTS``)."""
        client = self._all_heading[writer]
        handler = self._heading[client][writer][0]
        self._headed(client, writer)
        writer.transport.abort()
        self._evicted.add(handler)
        handler.cancel()  # reading its head
        if key not in self._turned_away:
            self._turned_away.add(key)
            logger.warning(
                "egress gateway: %s at %d connections not yet named by a request;"
                " the oldest whose head has not arrived closed for each new one",
                key,
                limit,
            )

    def _headed(self, client: str, writer: asyncio.StreamWriter) -> None:
        """A connection of ``client`` is named by its request, or closed
        (``_await_head``)."""
        if self._all_heading.pop(writer, None) is None:
            return
        if not self._all_heading:
            self._turned_away.discard(ALL_CLIENTS)
        waiting = self._heading.get(client)
        if waiting is not None and waiting.pop(writer, None) is not None and not waiting:
            del self._heading[client]
            self._turned_away.discard(client)

    def _enter(self, key: str, limit: int) -> bool:
        """Count one more open connection for ``key`` (a session id, "" for the token
        listener's named ones, ``address …`` for its unnamed ones of one client); False,
        counting nothing, when it has ``limit`` open already."""
        open_now = self._open_by_listener.get(key, 0)
        if open_now >= limit:
            return False
        self._open_by_listener[key] = open_now + 1
        return True

    def _leave(self, key: str) -> None:
        """Count one connection of ``key`` closed (``_enter``)."""
        left = self._open_by_listener[key] - 1
        self._turned_away.discard(key)
        if left:
            self._open_by_listener[key] = left
        else:
            del self._open_by_listener[key]

    async def _too_many(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        caller: Caller,
    ) -> None:
        """Answer 503, audited, a request of a remote sandbox that already has as many
        connections open as one session may (its session known only from the request)."""
        started = time.monotonic()
        busy = Decision(Outcome.BLOCKED, None, "too many connections open from the sandbox")
        line = _line_of(request, caller)
        await self._error_recorded(
            conn, writer, 503, TOO_MANY_CONNECTIONS, caller, line, started, busy
        )

    async def _busy(self, conn: h11.Connection, writer: asyncio.StreamWriter) -> None:
        """Answer 503 a request whose token must be looked up while its client has as many
        look-ups in flight as it may (``tokens.TokensBusy``; no session is known, so
        nothing is audited), and close the connection."""
        body = TOKENS_BUSY.encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", b"1"),
            (b"connection", b"close"),
        ]
        with contextlib.suppress(Exception):
            await self._send_whole(writer, conn, _response(503, headers), body)

    async def _turn_away(self, writer: asyncio.StreamWriter, key: str, limit: int) -> None:
        """Answer a connection past its listener's limit 503 without reading it, and close
        it (no request was read, so there is nothing to audit; a warning is logged, once
        until a connection of that listener closes)."""
        if key not in self._turned_away:
            self._turned_away.add(key)
            where = (
                key
                if key.startswith("address ") or key == ALL_CLIENTS
                else (f"session {key or '(token)'}")
            )
            logger.warning(
                "egress gateway: %s has %d connections open; more turned away", where, limit
            )
        text = TOO_MANY_CONNECTIONS.encode()
        head = (
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: " + str(len(text)).encode() + b"\r\nconnection: close\r\n\r\n"
        )
        with contextlib.suppress(Exception):
            writer.write(head + text)
            await self._drain(writer)
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()

    async def _proved(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        listener: Caller | None,
        resolve: TokenResolver | None,
    ) -> Caller | None:
        """Who sent ``request`` (``_identify``); None when that is not proved, after a 407
        (audited when the session is known, even if the client is gone before the answer)."""
        started = time.monotonic()
        caller, proved = await self._identify(request, listener, resolve)
        if caller is not None and proved:
            return caller
        try:
            await self._unauthenticated(conn, writer)
        finally:  # audited even when the client is gone before the answer
            if caller is not None:  # a session's request, a credential not its call's
                refused = Decision(Outcome.BLOCKED, None, "a per-call credential not valid")
                await self._record(caller, _line_of(request, caller), 407, 0, started, refused)
        return None

    async def _connect(
        self,
        conn: h11.Connection,
        request: h11.Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        caller: Caller,
        recheck: Callable[..., Awaitable[Caller | None]] | None = None,
    ) -> None:
        """Serve a ``CONNECT``: a tunnel rule's bytes pass untouched; otherwise TLS is
        terminated here and each request inside is judged. ``recheck(conn=…)``: proves
        the tunnel's sender again before each request after the first (None: the
        listener's caller sent them all), answering 407 on ``conn`` when it no longer can
        (a remote sandbox's session ended)."""
        target = request.target.decode("latin-1")
        host, port = _authority(target, default_port=443)
        started = time.monotonic()
        if not host or not port:  # audited too: a refused attempt, whatever its form
            text = "The warroom egress gateway: CONNECT needs a target host:port.\n"
            line = RequestLine("CONNECT", host, port, target[:256], caller.channel_id)
            decision = Decision(Outcome.BLOCKED, None, "not host:port")
            await self._error_recorded(conn, writer, 400, text, caller, line, started, decision)
            return
        candidates = self.rules.for_host(host, port)
        if caller.channel_id is not None:
            candidates = tuple(
                r for r in candidates if not r.channels or caller.channel_id in r.channels
            )
        if candidates and all(rule.tunnel for rule in candidates):
            await self._send(writer, conn, _response(200, []))
            await self._tunnel(reader, writer, host, port, caller, started, candidates[0])
            return
        # Everything else is terminated here, blocked hosts too: the 403's text then reaches
        # the program (a refused CONNECT shows only a status line, which tells the model less).
        # The context is made before the 200: the client sends its TLS hello as soon as it
        # reads the 200, and a hello that reached the plain reader before ``start_tls`` would be
        # lost to the TLS layer. Between the 200 and ``start_tls`` nothing yields to the loop.
        context = await asyncio.to_thread(self.authority.server_context, host)
        await self._send(writer, conn, _response(200, []))
        served = False
        try:
            await writer.start_tls(context)
            inner = h11.Connection(h11.SERVER)
            first = await self._next_request(inner, reader)
            if first is not None:
                served = True
                identify = None
                if recheck is not None:

                    async def identify(_request: h11.Request) -> Caller | None:
                        return await recheck(conn=inner)

                await self._serve(
                    inner,
                    first,
                    reader,
                    writer,
                    caller,
                    scheme="https",
                    at=(host, port),
                    identify=identify,
                )
        finally:  # a tunnel that carried no request (a TLS handshake refused or cut short,
            if not served:  # a client gone after the 200) is audited as its CONNECT
                rule = candidates[0] if candidates else None
                outcome = Outcome.ALLOWED if rule is not None else Outcome.BLOCKED
                decision = Decision(outcome, rule, "the tunnel ended before a request")
                line = RequestLine("CONNECT", host, port, "", caller.channel_id)
                await self._record(caller, line, 200, 0, started, decision)

    async def _serve(
        self,
        conn: h11.Connection,
        request: h11.Request | None,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        caller: Caller,
        *,
        scheme: str,
        at: tuple[str, int] | None = None,
        identify: Callable[[h11.Request], Awaitable[Caller | None]] | None = None,
    ) -> None:
        """Answer requests on one connection until either side ends it. ``identify``: who
        sent each request after the first (None: the first one's sender sent them all, as
        inside a tunnel); a request it cannot place ends the connection."""
        while request is not None:
            hold = self.bodies.hold(caller.session_id)  # its body's bytes, until answered
            try:
                await self._one(conn, request, reader, writer, caller, scheme, at, hold)
            finally:
                hold.release()
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
            # the next request's first bytes (what h11 holds already, then reads), for the
            # audit row of a request h11 refuses
            seen = bytearray(conn.trailing_data[0][:READ_CHUNK])
            try:
                request = await self._next_request(conn, reader, seen)
            except h11.RemoteProtocolError as exc:  # after one served: the session's
                await self._malformed_recorded(conn, writer, exc, caller, bytes(seen), at)
                return
            if request is not None and identify is not None:
                placed = await identify(request)
                if placed is None:
                    return
                caller = placed

    async def _one(
        self,
        conn: h11.Connection,
        request: h11.Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        caller: Caller,
        scheme: str,
        at: tuple[str, int] | None,
        hold: BodyHold,
    ) -> None:
        """Read, judge and answer one request, its body's bytes taken in ``hold``."""
        started = time.monotonic()
        method = request.method.decode("ascii", "replace").upper()
        target = request.target.decode("latin-1")
        if at is None:  # plain HTTP: the target is absolute
            parts = _absolute(target)
            if parts is None or parts.scheme != "http" or not parts.hostname:
                text = "The warroom egress gateway is a proxy: a request needs http://host/….\n"
                line = RequestLine(method, "", 0, target.split("?", 1)[0][:256], None)
                decision = Decision(Outcome.BLOCKED, None, "not a proxy request")
                await self._error_recorded(conn, writer, 400, text, caller, line, started, decision)
                return
            host, port = parts.hostname, parts.port
            path_query = after_authority(target, parts.scheme, parts.netloc)
        else:
            host, port = at
            path_query = origin_form(target, scheme, host, port)
        if conn.they_are_waiting_for_100_continue:  # else a client that waits for it
            # sends no body, and the gateway, which decides on the whole request, no answer
            go_on = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
            await self._send(writer, conn, go_on)
        try:
            body = await self._body(conn, reader, hold)
        except (ConnectionError, TimeoutError, h11.ProtocolError):  # a request cut short
            shown = path_query.split("?", 1)[0][:256]  # (its client gone, its body broken)
            line = RequestLine(method, host, port, shown, caller.channel_id, scheme)
            cut = Decision(Outcome.BLOCKED, None, "the request was cut short")
            await self._record(caller, line, 400, 0, started, cut)
            raise
        verb = method
        try:
            path, query = split_target(path_query)
            refuse_path_override(path, request.headers)
            read = body if isinstance(body, bytes) else b""
            effective = effective_method(verb, request.headers, query, read)
        except (AmbiguousPath, AmbiguousMethod) as exc:
            shown = path_query.split("?", 1)[0][:256]
            line = RequestLine(method, host, port, shown, caller.channel_id, scheme)
            refused = Decision(Outcome.BLOCKED, None, str(exc))
            hint = "send it in one plain form"
            await self._refuse(conn, writer, refused, line, caller, started, hint=hint)
            return
        path_query = f"{path}?{query}" if query else path
        method = judged_method(verb, effective)
        line = RequestLine(method, host, port, path, caller.channel_id, scheme)
        if body is _Unread.NO_ROOM:  # many bodies at once: a flood, or a busy moment
            busy = Decision(Outcome.BLOCKED, None, body.value)
            text = "The warroom egress gateway holds too many request bodies; try again.\n"
            query = _query_of(path_query)
            await self._error_recorded(
                conn, writer, 503, text, caller, line, started, busy, query=query
            )
            return
        decision = decide_override(self.rules, line, verb, effective)
        if decision.outcome is Outcome.BLOCKED or not isinstance(body, bytes):
            if not isinstance(body, bytes):
                decision = Decision(Outcome.BLOCKED, None, body.value)
            await self._refuse(conn, writer, decision, line, caller, started, query=path_query)
            return
        assert decision.rule is not None
        if not await self._may_change(method, caller):
            reason = f"{method} through the rule {decision.rule.name} outside an approved call"
            refused = Decision(Outcome.BLOCKED, decision.rule, reason)
            await self._refuse(
                conn, writer, refused, line, caller, started, query=path_query, hint=APPROVAL_HINT
            )
            return
        injected = self._injected.get(decision.rule.name)
        parcel = [body]  # the only reference left: dropped once sent upstream
        del body, read
        await self._forward(
            conn, writer, request, parcel, decision, line, caller, started,
            origin=(scheme, host, port), target=path_query, injected=injected, hold=hold,
        )  # fmt: skip

    async def _forward(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        parcel: list[bytes],
        decision: Decision,
        line: RequestLine,
        caller: Caller,
        started: float,
        *,
        origin: tuple[str, str, int],
        target: str,
        injected: Injected | None,
        hold: BodyHold,
    ) -> None:
        """Send the request upstream with its body (``parcel``'s one item), then give the
        body's bytes back to the budget (``hold``) and drop it: a sandbox that reads its
        answer slowly, or not at all, holds no request body meanwhile. Then stream the
        answer back, scrubbed."""
        headers = [(k, v) for k, v in request.headers if k not in HOP_BY_HOP_BYTES]
        scrubber = Scrubber(injected.scrub if injected is not None else ())
        if injected is not None:  # h11 gives names in lower case
            added = [
                (n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in injected.headers
            ]
            names = {name for name, _ in added}
            headers = [(k, v) for k, v in headers if k not in names] + added
            target = _with_params(target, injected.query)
        headers.append((b"accept-encoding", b"identity"))
        query = _query_of(target)
        try:
            verb = request.method.decode("ascii", "replace").upper()  # an override is kept
            try:
                exchange = await self._upstream.send(origin, verb, target, headers, parcel[0])
            finally:  # sent, or never to be: the body is not needed any more
                parcel.clear()
                hold.release()
        except UpstreamError as exc:
            text = f"The warroom egress gateway could not reach {line.host}:{line.port} ({exc})."
            await self._error_recorded(
                conn, writer, 502, text, caller, line, started, decision, query=query, sent=0
            )
            return
        answer, sent = exchange.answer, 0
        try:
            reply = ReplyBody(answer.headers, scrubber)
        except UnreadableBody as exc:  # a body it cannot read is a body it cannot scrub
            await exchange.aclose()
            text = f"The warroom egress gateway {exc}."
            await self._error_recorded(
                conn, writer, 502, text, caller, line, started, decision, query=query, sent=0
            )
            return
        try:
            out = [  # a header named after a secret is dropped (a name cannot be rewritten)
                (k, scrubber.whole(v))
                for k, v in answer.headers
                if k not in HOP_BY_HOP_BYTES and scrubber.whole(k) == k
            ]
            # One write per upstream read: the head goes with the first bytes, the end of
            # the message with the last (fewer TLS records and system calls per request).
            phrase = scrubber.whole(answer.reason)
            pending = conn.send(_response(answer.status, out, phrase)) or b""
            async for raw, last in exchange.body():
                for data in reply.feed(raw, last):  # bounded pieces: a small gzip read may
                    sent += len(data)  # inflate to megabytes
                    if data:
                        pending += conn.send(h11.Data(data=data)) or b""
                    if pending and (not last or len(pending) >= READ_CHUNK):
                        writer.write(pending)
                        pending = b""
                        await self._drain(writer)
                if last:
                    writer.write(pending + (conn.send(h11.EndOfMessage()) or b""))
                    pending = b""
                    await self._drain(writer)
        except UnreadableBody as exc:  # begun: the reply is cut here, the connection closed
            logger.warning("reply from %s:%s cut off: %s", line.host, line.port, exc)
        finally:
            await exchange.aclose()
            await self._record(caller, line, answer.status, sent, started, decision, query=query)

    async def _tunnel(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        caller: Caller,
        started: float,
        rule: Rule,
    ) -> None:
        line = RequestLine("CONNECT", host, port, "", caller.channel_id)
        decision = Decision(Outcome.ALLOWED, rule, f"rule {rule.name}")  # the channel's rule
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), self.options.upstream_timeout_s
            )
        except (OSError, TimeoutError):
            await self._record(caller, line, 502, 0, started, decision)
            return
        counted = [0]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(READ_CHUNK):
                    if count:
                        counted[0] += len(data)
                    dst.write(data)
                    await self._drain(dst)

        pipes = {
            asyncio.ensure_future(pipe(reader, up_writer, False)),
            asyncio.ensure_future(pipe(up_reader, writer, True)),
        }
        try:  # a tunnel ends when either side ends it: HTTP/1.1 peers may keep theirs open
            _, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        finally:
            up_writer.close()
            await self._record(caller, line, 200, counted[0], started, decision)

    async def _identify(
        self, request: h11.Request, caller: Caller | None, resolve: TokenResolver | None
    ) -> tuple[Caller | None, bool]:
        """Who sent a connection's first request, and whether that is proved (else: 407).

        The session is the listener's, or the one a remote token names; the call is the one
        whose per-call credential the request carries, checked (a request without one is
        the session's, from no call; one with a wrong one is not proved).
        """
        try:
            auth = proxy_authorization(request)
        except BadProxyAuthorization:
            return caller, False
        credential = auth.password if auth is not None else ""
        if caller is None:  # a remote sandbox: the password is ``<token>[.<credential>]``
            if resolve is None or auth is None:
                return None, False
            token, _, credential = auth.password.partition(".")
            caller = await resolve(token) if token else None
            if caller is None:
                return None, False
        if auth is None or not credential:
            return caller, True
        calls = self.options.calls
        if calls is None or not calls.verify(caller.session_id, auth.user, credential):
            return caller, False
        return replace(caller, tool_use_id=auth.user), True

    async def _may_change(self, method: str, caller: Caller) -> bool:
        """Whether this request may go: a read goes; a changing method, through whatever
        rule, only from an approved call in flight (``GatewayOptions``)."""
        check = self.options.approved
        if check is None or method in READ_ONLY_METHODS:
            return True
        if caller.tool_use_id is None:
            return False
        try:
            return await check(caller.session_id, caller.tool_use_id)
        except Exception:  # an answer we cannot get is a no: the request changes things
            logger.exception("approval check for %s failed; refusing", caller.session_id)
            return False

    async def _refuse(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        decision: Decision,
        line: RequestLine,
        caller: Caller,
        started: float,
        *,
        query: str = "",
        hint: str = ADMIN_HINT,
    ) -> None:
        text = f"Blocked by the warroom egress gateway: {decision.reason}; {hint}.\n"
        query = _query_of(query)
        await self._error_recorded(
            conn, writer, 403, text, caller, line, started, decision, query=query
        )

    async def _unauthenticated(self, conn: h11.Connection, writer: asyncio.StreamWriter) -> None:
        body = (
            b"The warroom egress gateway needs this sandbox's proxy credentials; they are "
            b"missing, or the session they belonged to has ended.\n"
        )
        headers = [
            (b"proxy-authenticate", b'Basic realm="warroom egress gateway"'),
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await self._send_whole(writer, conn, _response(407, headers), body)

    async def _malformed(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, exc: h11.RemoteProtocolError
    ) -> None:
        """Answer what is not HTTP/1.1 (a garbage request line, a TLS hello sent to the
        plain port) with h11's status hint (400, or 431 for huge headers) saying what the
        gateway is, when a response can still be sent; then the connection closes."""
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        text = (
            f"Bad request: not an HTTP/1.1 request ({exc}). This is Warroom's egress gateway, "
            "an HTTP proxy: send requests through it with HTTP_PROXY / HTTPS_PROXY.\n"
        )
        with contextlib.suppress(ConnectionError, TimeoutError, h11.ProtocolError):
            await self._plain_error(conn, writer, exc.error_status_hint, text)

    async def _malformed_recorded(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        exc: h11.RemoteProtocolError,
        caller: Caller,
        seen: bytes,
        at: tuple[str, int] | None = None,
    ) -> None:
        """``_malformed``, and its audit row: a request h11 refuses on a connection of a
        known session (a sandbox's own listener, or one that already served one of the
        session's: a smuggling attempt, say) is the session's, from no call (its credential
        was not read), named by its request line (inside a tunnel, ``at``'s host)."""
        started = time.monotonic()
        refused = Decision(Outcome.BLOCKED, None, f"not an HTTP/1.1 request: {exc}")
        method, _, rest = seen.split(b"\r\n", 1)[0].partition(b" ")
        target = rest.rpartition(b" ")[0] if b" " in rest else rest
        anonymous = replace(caller, tool_use_id=None)
        line = _line_of_parts(method, target, anonymous)
        if at is not None:  # origin-form inside a tunnel: the tunnel's host
            line = replace(line, host=at[0], port=at[1], scheme="https")
        try:
            await self._malformed(conn, writer, exc)
        finally:
            await self._record(anonymous, line, exc.error_status_hint, 0, started, refused)

    async def _plain_error(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int, text: str
    ) -> None:
        body = text.encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await self._send_whole(writer, conn, _response(status, headers), body)

    async def _error_recorded(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        status: int,
        text: str,
        caller: Caller,
        line: RequestLine,
        started: float,
        decision: Decision,
        *,
        query: str = "",
        sent: int | None = None,
    ) -> None:
        """Answer ``status`` with ``text`` and audit it, also when the answer cannot be
        written (a client that hung up right after its request is still in the audit: a
        refused attempt must not vanish from it by closing fast). ``sent``: the bytes to
        audit (default: the text's length)."""
        try:
            await self._plain_error(conn, writer, status, text)
        finally:
            size = len(text) if sent is None else sent
            await self._record(caller, line, status, size, started, decision, query=query)

    async def _send_whole(
        self, writer: asyncio.StreamWriter, conn: h11.Connection, head: h11.Response, body: bytes
    ) -> None:
        """A whole response (head, body, end) in one write: a client that closes once it
        has read the head (curl does, on a refused CONNECT) cannot break the answer
        between its parts.

        Raises:
            h11.LocalProtocolError: the body is not allowed (a response to ``HEAD``); the
                head alone is written first.
        """
        data = conn.send(head) or b""
        try:
            data += conn.send(h11.Data(data=body)) or b""
            data += conn.send(h11.EndOfMessage()) or b""
        finally:  # what h11 accepted
            writer.write(data)
        await self._drain(writer)

    async def _body(
        self, conn: h11.Connection, reader: asyncio.StreamReader, hold: BodyHold
    ) -> bytes | _Unread:
        """The request's body, each piece taken in ``hold``, or why it was not read to its
        end (the rest is not read): past ``max_request_bytes``, in pieces too small
        (``BODY_PIECE_MIN_BYTES``), or past the budget of held bodies (``bodies``). The
        pieces are gathered in one buffer, so the memory held is what the budget counts."""
        gathered = bytearray()
        pieces = 0
        while True:
            event = await self._next_event(conn, reader)
            if isinstance(event, h11.EndOfMessage):
                return bytes(gathered)
            if isinstance(event, h11.Data):
                pieces += 1
                if len(gathered) + len(event.data) > self.options.max_request_bytes:
                    return _Unread.TOO_LARGE
                if pieces > BODY_PIECES_FREE + len(gathered) // BODY_PIECE_MIN_BYTES:
                    return _Unread.TOO_MANY_PIECES
                if not hold.take(len(event.data)):
                    return _Unread.NO_ROOM
                gathered += event.data
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the client closed the connection mid-request")

    async def _first_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, seen: bytearray | None = None
    ) -> h11.Request | None:
        """A connection's first request; bytes that cannot start one (``not_http``) are
        refused as soon as they arrive, not after the idle timeout. ``seen`` keeps the
        first ``READ_CHUNK`` bytes read (``_next_event``).

        Raises:
            h11.RemoteProtocolError: not HTTP (status hint 400).
        """
        head: bytes | None = b""
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event if isinstance(event, h11.Request) else None
            data = await asyncio.wait_for(reader.read(READ_CHUNK), self.options.idle_timeout_s)
            if seen is not None and len(seen) < READ_CHUNK:
                seen += data[: READ_CHUNK - len(seen)]
            if head is not None:
                head += data
                if (why := not_http(head)) is not None:
                    raise h11.RemoteProtocolError(why, error_status_hint=400)
                head = None if b"\n" in head else head[:READ_CHUNK]
            conn.receive_data(data)

    async def _next_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, seen: bytearray | None = None
    ) -> h11.Request | None:
        event = await self._next_event(conn, reader, seen)
        return event if isinstance(event, h11.Request) else None

    async def _next_event(
        self, conn: h11.Connection, reader: asyncio.StreamReader, seen: bytearray | None = None
    ) -> object:
        """h11's next event, reading as it needs; ``seen`` keeps the first ``READ_CHUNK``
        bytes read for it (a request h11 refuses is audited by its request line)."""
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await asyncio.wait_for(reader.read(READ_CHUNK), self.options.idle_timeout_s)
            if seen is not None and len(seen) < READ_CHUNK:
                seen += data[: READ_CHUNK - len(seen)]
            conn.receive_data(data)

    async def _send(
        self, writer: asyncio.StreamWriter, conn: h11.Connection, event: h11.Event
    ) -> None:
        data = conn.send(event)
        if data:
            writer.write(data)
            await self._drain(writer)

    async def _drain(self, writer: asyncio.StreamWriter) -> None:
        """Wait until ``writer`` takes what was written, at most ``idle_timeout_s``: a
        sandbox that stops reading its answer does not hold the connection (and what it
        holds upstream) forever. It does not yield to the loop when nothing waits (no task
        of its own, as ``wait_for`` would make): between a CONNECT's 200 and ``start_tls``
        a yield would let the client's TLS hello reach the plain reader and be lost.

        Raises:
            TimeoutError: it took nothing for ``idle_timeout_s``.
        """
        async with asyncio.timeout(self.options.idle_timeout_s):
            await writer.drain()

    async def _record(
        self,
        caller: Caller,
        line: RequestLine,
        status: int,
        sent: int,
        started: float,
        decision: Decision,
        *,
        query: str = "",
    ) -> None:
        names = [k for k, _ in parse_qsl(query, keep_blank_values=True)]
        path = line.path + ("?" + "&".join(names) if names else "")
        record = EgressRecord(
            at=datetime.now(UTC),
            session_id=caller.session_id,
            tool_use_id=caller.tool_use_id,
            method=line.method,
            host=line.host,
            port=line.port,
            path=path,
            status=status,
            bytes=sent,
            duration_ms=(time.monotonic() - started) * 1000,
            rule=decision.rule.name if decision.rule is not None else None,
            outcome=decision.outcome,
        )
        with contextlib.suppress(Exception):  # the audit never breaks a request
            await self._audit(record)


@dataclass
class _Binding:
    """A sandbox socket this process serves, and whose requests arrive on it now."""

    caller: Caller
    server: asyncio.Server = field(init=False)
    inode: int = 0


def _line_of(request: h11.Request, caller: Caller) -> RequestLine:
    """What the audit shows of a request refused before it was read (no query)."""
    return _line_of_parts(request.method, request.target, caller)


def _line_of_parts(raw_method: bytes, raw_target: bytes, caller: Caller) -> RequestLine:
    """``_line_of`` for a request line's two first parts, as sent (a refused request's)."""
    method = raw_method.decode("ascii", "replace").upper()[:16]
    target = raw_target.decode("latin-1")
    if method == "CONNECT":
        host, port = _authority(target, default_port=443)
        return RequestLine(method, host, port, "", caller.channel_id)
    parts = _absolute(target)
    if parts is None:
        return RequestLine(method, "", 0, target.split("?", 1)[0][:256], caller.channel_id)
    path = (parts.path or "/")[:256]
    return RequestLine(method, (parts.hostname or "")[:256], parts.port, path, caller.channel_id)


def _response(
    status: int, headers: Sequence[tuple[bytes, bytes]], reason: bytes = b""
) -> h11.Response:
    """A response head with a reason phrase: ``reason`` (the upstream's), else the standard
    one (RFC 9110 §15; h11 writes none by default, and some clients show only the phrase).

    >>> bytes(_response(407, []).reason)
    b'Proxy Authentication Required'
    """
    if not reason:
        try:
            reason = HTTPStatus(status).phrase.encode("ascii")
        except ValueError:  # a status outside the standard's list keeps an empty phrase
            reason = b""
    return h11.Response(status_code=status, headers=list(headers), reason=reason)


def _remove(path: Path, inode: int) -> None:
    """Remove the socket file at ``path`` (only if it is still ``inode``, unless -1)."""
    with contextlib.suppress(FileNotFoundError):
        if inode == -1 or _inode(path) == inode:
            path.unlink()


def _inode(path: Path) -> int:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return -1


def _authority(target: str, *, default_port: int) -> tuple[str, int]:
    """``host:port`` of a CONNECT target (IPv6 in brackets); port 0 when it is not a
    port, host "" when there is none (``[::1`` has neither).

    >>> _authority("db.internal:443", default_port=443), _authority("h:99999", default_port=443)
    (('db.internal', 443), ('h', 0))
    >>> _authority("[::1", default_port=443), _authority(":443", default_port=443)
    (('', 0), ('', 443))
    """
    try:
        parts = urlsplit(f"//{target}")
        host = (parts.hostname or "").lower()
    except ValueError:  # an unclosed IPv6 bracket
        return "", 0
    try:
        return host, parts.port or default_port
    except ValueError:  # not a number, or out of range
        return host, 0


@dataclass(frozen=True)
class _Absolute:
    scheme: str
    netloc: str
    hostname: str | None
    port: int
    path: str


def _absolute(target: str) -> _Absolute | None:
    """An absolute-form target's parts (port 80 when none is given), None when it has
    no readable authority (an unclosed IPv6 bracket, a port that is not one).

    >>> _absolute("http://h:99999/x") is None, _absolute("http://[::1/x") is None
    (True, True)
    >>> _absolute("http://H:8080/x").port
    8080
    """
    try:
        parts = urlsplit(target)
        return _Absolute(parts.scheme, parts.netloc, parts.hostname, parts.port or 80, parts.path)
    except ValueError:
        return None


def _with_params(target: str, params: Sequence[tuple[str, str]]) -> str:
    """``target`` (path and query) with ``params`` set, replacing any of the same names; the
    rest of the query is kept as the client sent it.

    >>> _with_params("/api/v1/query?query=up&api_key=guessed&x=1", [("api_key", "s3")])
    '/api/v1/query?query=up&x=1&api_key=s3'
    """
    if not params:
        return target
    path, _, query = target.partition("?")
    names = {name for name, _ in params}
    kept = [p for p in query.split("&") if p and unquote_plus(p.split("=", 1)[0]) not in names]
    return f"{path}?{'&'.join([*kept, urlencode(params)])}"


def _peer_host(writer: asyncio.StreamWriter) -> str:
    """The client's address of a TCP connection ("" for a Unix socket's)."""
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


def _client_key(writer: asyncio.StreamWriter) -> str:
    """What the token listener bounds a client by: its address, an IPv6 one by its /64
    (what one host is given, RFC 4291 §2.5.1), an IPv4-mapped one as IPv4.

    >>> class W:
    ...     def __init__(self, host): self.host = host
    ...     def get_extra_info(self, name): return (self.host, 1)
    >>> [_client_key(W(h)) for h in ("10.0.0.7", "::ffff:10.0.0.7", "2001:db8:1:2:a::9")]
    ['address 10.0.0.7', 'address 10.0.0.7', 'address 2001:db8:1:2::/64']
    """
    host = _peer_host(writer)
    try:
        parsed = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return f"address {host}"
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return f"address {parsed.ipv4_mapped}"
        return f"address {ipaddress.IPv6Network((parsed, 64), strict=False)}"
    return f"address {parsed}"


def _query_of(path_query: str) -> str:
    return path_query.split("?", 1)[1] if "?" in path_query else ""
