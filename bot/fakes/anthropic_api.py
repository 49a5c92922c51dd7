"""A local fake of Anthropic's Messages API: a real HTTP server on 127.0.0.1.

Tests use it, and so do people: ``warroom fake-anthropic`` serves it with a JSON
script so that ``warroom chat`` (or the drill) runs without a real key.

It speaks the wire format the real ``anthropic`` client parses (Anthropic API
reference: "Messages", "Streaming Messages", "Errors", "Prompt caching"):
``POST /v1/messages`` with JSON, answered as one JSON message or, with
``"stream": true``, as server-sent events (``message_start``,
``content_block_start``, ``ping``, ``content_block_delta`` with ``text_delta`` or
``input_json_delta`` split into partial chunks, ``content_block_stop``,
``message_delta``, ``message_stop``). Each response has a ``request-id`` header;
errors use ``{"type": "error", "error": {"type": …, "message": …}}``.

``GET /v1/models`` answers a one-page model list (Anthropic API reference, "List
Models": ``{"data": [{"type": "model", "id", "display_name", "created_at"}],
"has_more", "first_id", "last_id"}``). With ``api_key`` set, any other key is
refused with 401 ``authentication_error`` ("invalid x-api-key"), as the real API does.

A test scripts the replies, either as a queue (``script=[Reply.text("hi"),
Fault.status(529)]``) or as a callable that sees each request
(``script=lambda request: …``), and asserts on ``fake.requests``.

Token counts are estimates (4 bytes a token). Prompt caching is modelled roughly:
the prompt is a list of segments (each tool, system block and message content
block); a segment carrying ``cache_control`` is a breakpoint; a request reads from
the cache the longest prefix an earlier request wrote (up to its last breakpoint),
and writes the rest up to its own last breakpoint.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

__all__ = [
    "DEFAULT_MODELS",
    "MAX_BREAKPOINTS",
    "CacheUsage",
    "FakeAnthropicAPI",
    "Fault",
    "FaultKind",
    "RecordedRequest",
    "Reply",
    "Script",
    "ToolCall",
]

DEFAULT_MODELS = ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")
MAX_BREAKPOINTS = 4  # Anthropic prompt-caching docs: at most 4 cache_control blocks
_BYTES_PER_TOKEN = 4
_EXHAUSTED = "fake Anthropic API: the test's script has no reply left"
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class ToolCall:
    """A ``tool_use`` block the fake model emits; ``id`` is generated when None."""

    name: str
    input: Mapping[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful reply: text pieces and tool calls in order.

    ``stop_reason`` defaults to ``tool_use`` when a tool is called, else ``end_turn``.
    """

    content: tuple[str | ToolCall, ...]
    stop_reason: str | None = None

    @classmethod
    def text(cls, text: str) -> Reply:
        """A reply of one text block."""
        return cls((text,))

    @classmethod
    def tool(cls, name: str, tool_input: Mapping[str, Any], *, text: str = "") -> Reply:
        """A reply calling one tool, optionally after some text."""
        call = ToolCall(name, tool_input)
        return cls((text, call) if text else (call,))

    def resolved_stop_reason(self) -> str:
        """The stop reason the fake reports."""
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(c, ToolCall) for c in self.content) else "end_turn"


FaultKind = Literal["status", "stall", "disconnect", "stream_error"]


@dataclass(frozen=True)
class Fault:
    """A failure the fake serves instead of a reply; build one with the class methods."""

    kind: FaultKind
    http_status: int = 200
    retry_after_s: float | None = None
    after_events: int = 0
    error_type: str = ""
    message: str = "scripted fault"

    @classmethod
    def status(cls, http_status: int, *, retry_after_s: float | None = None) -> Fault:
        """An error response with an Anthropic error body (and ``retry-after`` if given)."""
        return cls("status", http_status, retry_after_s, error_type=_error_type(http_status))

    @classmethod
    def stall(cls, *, after_events: int) -> Fault:
        """A 200 stream that sends ``after_events`` events, then nothing until disconnected."""
        return cls("stall", after_events=after_events)

    @classmethod
    def disconnect(cls, *, after_events: int = 0) -> Fault:
        """Drop the connection after ``after_events`` events (0: before any response)."""
        return cls("disconnect", after_events=after_events)

    @classmethod
    def stream_error(cls, error_type: str = "overloaded_error", *, after_events: int) -> Fault:
        """A 200 stream that sends ``after_events`` events, then an ``error`` event."""
        return cls("stream_error", after_events=after_events, error_type=error_type)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received: raw body bytes, parsed JSON and headers."""

    raw: bytes
    body: Mapping[str, Any]
    headers: Mapping[str, str]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's ``messages`` array."""
        return list(self.body.get("messages", []))


@dataclass(frozen=True)
class CacheUsage:
    """Prompt tokens split the way the API reports them."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int


Script = Sequence[Reply | Fault] | Callable[[RecordedRequest], Reply | Fault]


@dataclass
class _PromptCache:
    """Prefix digests written at breakpoints by earlier requests."""

    written: set[bytes] = field(default_factory=set)

    def account(self, body: Mapping[str, Any]) -> CacheUsage:
        """Split this prompt's tokens into uncached, read and written; remember its prefixes."""
        digests, totals, breakpoints = _prefixes(body)
        if not breakpoints:
            return CacheUsage(totals[-1] if totals else 0, 0, 0)
        last = breakpoints[-1]
        hits = [i for i in range(last + 1) if digests[i] in self.written]
        read = totals[hits[-1]] if hits else 0
        self.written.update(digests[i] for i in breakpoints)
        return CacheUsage(totals[-1] - totals[last], read, totals[last] - read)


class FakeAnthropicAPI:
    """The fake server. Use as ``async with FakeAnthropicAPI(script) as fake:``.

    Args:
        script: the replies (see the module docstring).
        text_chunk_chars: text is streamed in deltas of this many characters.
        api_key: when set, the only key accepted; None accepts any key.
        models: the model ids ``GET /v1/models`` lists.
        host: the address to listen on.
        port: the port to listen on (0: any free port).

    Attributes:
        base_url: ``http://127.0.0.1:<port>`` once entered (pass it as ``base_url``).
        requests: every ``POST /v1/messages`` received, in order (faulted ones too).
    """

    def __init__(
        self,
        script: Script = (),
        *,
        text_chunk_chars: int = 16,
        api_key: str | None = None,
        models: Sequence[str] = DEFAULT_MODELS,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._script: deque[Reply | Fault] | Callable[[RecordedRequest], Reply | Fault]
        self._script = script if callable(script) else deque(script)
        self._text_chunk_chars = text_chunk_chars
        self._api_key = api_key
        self._models = tuple(models)
        self._address = (host, port)
        self._cache = _PromptCache()
        self._ids = itertools.count(1)
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.requests: list[RecordedRequest] = []
        self.base_url = ""

    def push(self, *items: Reply | Fault) -> None:
        """Append replies or faults to a queue script."""
        if callable(self._script):
            raise TypeError("push() needs a queue script, not a callable one")
        self._script.extend(items)

    async def __aenter__(self) -> FakeAnthropicAPI:
        app = web.Application()
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_get("/v1/models", self._list_models)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, *self._address).start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(400, "invalid_request_error", "body is not JSON")
        recorded = RecordedRequest(raw, body, dict(request.headers))
        self.requests.append(recorded)
        if problem := self._refused(request) or _invalid(body):
            return self._error(*problem)
        planned = self._next(recorded)
        if isinstance(planned, Fault) and planned.kind == "status":
            return self._error(planned.http_status, planned.error_type, planned.message, planned)
        if isinstance(planned, Fault) and planned.kind == "disconnect" and not planned.after_events:
            _drop(request)
            return web.Response()
        reply = planned if isinstance(planned, Reply) else Reply.text("This reply is cut short.")
        fault = planned if isinstance(planned, Fault) else None
        message = self._message(reply, body)
        if body.get("stream"):
            return await self._stream(request, message, reply, fault)
        return web.json_response(message, headers={"request-id": self._id("req")})

    async def _list_models(self, request: web.Request) -> web.Response:
        if problem := self._refused(request):
            return self._error(*problem)
        data = [
            {
                "type": "model",
                "id": model,
                "display_name": model,
                "created_at": "2025-01-01T00:00:00Z",
            }
            for model in self._models
        ]
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        page = {"data": data, "has_more": False, "first_id": first, "last_id": last}
        return web.json_response(page, headers={"request-id": self._id("req")})

    def _refused(self, request: web.Request) -> tuple[int, str, str] | None:
        """401 when the request carries no key, or not the configured one."""
        key = request.headers.get("x-api-key") or _bearer_token(request)
        if not key:
            return (
                401,
                "authentication_error",
                "an x-api-key or Authorization: Bearer header is required",
            )
        if self._api_key is not None and key != self._api_key:
            return 401, "authentication_error", "invalid x-api-key"
        return None

    def _next(self, recorded: RecordedRequest) -> Reply | Fault:
        if callable(self._script):
            return self._script(recorded)
        if not self._script:
            return Fault("status", 400, error_type="invalid_request_error", message=_EXHAUSTED)
        return self._script.popleft()

    def _message(self, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
        """The complete API message for ``reply`` (usage included)."""
        blocks = [self._block(item) for item in reply.content]
        usage = self._cache.account(body)
        output_tokens = _tokens(json.dumps(blocks).encode())
        return {
            "id": self._id("msg"),
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model", "")),
            "content": blocks,
            "stop_reason": reply.resolved_stop_reason(),
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.input_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                "cache_read_input_tokens": usage.cache_read_input_tokens,
                "output_tokens": output_tokens,
            },
        }

    def _block(self, item: str | ToolCall) -> dict[str, Any]:
        if isinstance(item, str):
            return {"type": "text", "text": item}
        tool_id = item.id or self._id("toolu")
        return {"type": "tool_use", "id": tool_id, "name": item.name, "input": dict(item.input)}

    async def _stream(
        self, request: web.Request, message: dict[str, Any], reply: Reply, fault: Fault | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "content-type": "text/event-stream",
                "cache-control": "no-cache",
                "request-id": self._id("req"),
            }
        )
        await response.prepare(request)
        limit = fault.after_events if fault is not None else None
        for sent, (name, data) in enumerate(self._events(message)):
            if sent == limit:
                break
            await response.write(_sse(name, data))
        if fault is not None and fault.kind == "stall":
            await self._closing.wait()  # the handler is cancelled when the client leaves
        elif fault is not None and fault.kind == "disconnect":
            _drop(request)
            return response
        elif fault is not None:
            error = {"type": "error", "error": {"type": fault.error_type, "message": fault.message}}
            await response.write(_sse("error", error))
        await response.write_eof()
        return response

    def _events(self, message: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """The SSE events of ``message``, in the API's order."""
        usage = dict(message["usage"])
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        yield "message_start", {"type": "message_start", "message": start}
        for index, block in enumerate(message["content"]):
            yield from self._block_events(index, block)
            if index == 0:
                yield "ping", {"type": "ping"}
        delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        yield "message_stop", {"type": "message_stop"}

    def _block_events(
        self, index: int, block: Mapping[str, Any]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in self._chunks(block["text"])]
        else:
            start = {**block, "input": {}}
            pieces = ["", *_thirds(json.dumps(block["input"]))]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": start,
            },
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}

    def _chunks(self, text: str) -> list[str]:
        size = self._text_chunk_chars
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]

    def _error(
        self, status: int, error_type: str, message: str, fault: Fault | None = None
    ) -> web.Response:
        headers = {"request-id": self._id("req")}
        if fault is not None and fault.retry_after_s is not None:
            headers["retry-after"] = f"{fault.retry_after_s:g}"
        body = {"type": "error", "error": {"type": error_type, "message": message}}
        return web.json_response(body, status=status, headers=headers)

    def _id(self, prefix: str) -> str:
        return f"{prefix}_fake{next(self._ids):06d}"


def _error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def _bearer_token(request: web.Request) -> str:
    header = request.headers.get("authorization", "")
    return header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""


def _invalid(body: object) -> tuple[int, str, str] | None:
    """Why the real API would refuse this request's body, or None."""
    if not isinstance(body, dict) or not {"model", "max_tokens", "messages"} <= body.keys():
        return 400, "invalid_request_error", "model, max_tokens and messages are required"
    found = json.dumps(body).count('"cache_control"')
    if found > MAX_BREAKPOINTS:
        limit = f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided."
        return 400, "invalid_request_error", f"{limit} Found {found}."
    return None


def _segments(body: Mapping[str, Any]) -> Iterator[tuple[bytes, bool]]:
    """The prompt in cache order: (segment bytes without cache_control, is a breakpoint)."""
    system = body.get("system", [])
    system_blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
    for part in [*body.get("tools", []), *system_blocks]:
        yield _segment("", part)
    for message in body.get("messages", []):
        content = message.get("content", [])
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            yield _segment(str(message.get("role")), block)


def _segment(role: str, part: Mapping[str, Any]) -> tuple[bytes, bool]:
    bare = {k: v for k, v in part.items() if k != "cache_control"}
    return (role + json.dumps(bare, sort_keys=True)).encode(), "cache_control" in part


def _prefixes(body: Mapping[str, Any]) -> tuple[list[bytes], list[int], list[int]]:
    """Per segment: the digest of the prompt up to it and its cumulative tokens; breakpoints."""
    running = hashlib.sha256()
    digests: list[bytes] = []
    totals: list[int] = []
    breakpoints: list[int] = []
    for index, (segment, is_breakpoint) in enumerate(_segments(body)):
        running.update(hashlib.sha256(segment).digest())
        digests.append(running.copy().digest())
        totals.append((totals[-1] if totals else 0) + _tokens(segment))
        if is_breakpoint:
            breakpoints.append(index)
    return digests, totals, breakpoints


def _tokens(data: bytes) -> int:
    return max(1, len(data) // _BYTES_PER_TOKEN)


def _thirds(text: str) -> list[str]:
    step = max(1, -(-len(text) // 3))
    return [text[i : i + step] for i in range(0, len(text), step)]


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _drop(request: web.Request) -> None:
    """Cut the TCP connection without finishing the response."""
    if request.transport is not None:
        request.transport.abort()
