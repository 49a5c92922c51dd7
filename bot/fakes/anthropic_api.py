"""A local fake of Anthropic's Messages API, as strict as the real one: a real HTTP server on
127.0.0.1.

Tests use it, and so do people: ``warroom fake-anthropic`` serves it with a JSON
script so that ``warroom chat`` (or the drill) runs without a real key.

Requests are checked as the real API checks them (``anthropic_rules``: unknown or
retired models answer 404 ``not_found_error``; unpaired ``tool_use``/``tool_result``,
text before tool results, empty text, thinking settings, sampling parameters and
prefill a model refuses, unknown fields, ``max_tokens`` over the model's limit, bad
tool names, every tool deferred, a ``tool_reference`` outside a tool result or to a tool
the request does not define, edited thinking blocks answer 400), with the real error body
``{"type": "error", "error": {"type", "message"}, "request_id"}``.

Replies speak the wire format the ``anthropic`` client parses (API reference:
"Messages", "Streaming Messages"): ``message_start``, ``content_block_start``,
``ping``, ``content_block_delta`` (``text_delta``, ``input_json_delta``,
``thinking_delta``, then ``signature_delta``), ``content_block_stop``, ``message_delta``
(stop reason, ``stop_details`` of a refusal, full cumulative usage), ``message_stop``;
a ``request-id`` header on every response. Current models think by default: unless
the request turns thinking off, every reply starts with a signed ``thinking`` block
(its text empty unless ``display: summarized``), and on the 5.5 models the text a
reply writes before a tool call comes back as thinking ("What's new in Claude Sonnet
5.5"). A reply cut by ``max_tokens`` in a tool call carries the call's partial input.

``POST /v1/messages/count_tokens``, ``GET /v1/models`` and ``GET /v1/models/{id}``
answer like the API's (SDK ``MessageTokensCount``, ``ModelInfo``). Prompt caching is
modelled by ``anthropic_cache`` (20-block look-back, per-model minimum length). A tool with
``defer_loading`` is outside the prompt until a ``tool_reference`` loads it
(``RecordedRequest.visible_tools``: what a scripted model may call).

A test scripts the replies, either as a queue (``script=[Reply.text("hi"),
Fault.status(529)]``) or as a callable that sees each request (``script=lambda
request: …``), and asserts on ``fake.requests``. A script that ran out answers 400
``invalid_request_error`` saying so: a permanent error, which the harness never retries
and tells the thread once (a 500 was retried, then shown as "model unavailable").
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from bot.fakes.anthropic_cache import CacheUsage, PromptCache, prompt_tokens, tokens
from bot.fakes.anthropic_rules import (
    MAX_BREAKPOINTS,
    ApiError,
    Memory,
    canonical_block,
    canonical_content,
    check,
    invalid,
    redacted_data,
    sign,
)
from harness import MODELS, ModelSpec

__all__ = [
    "DEFAULT_MODELS",
    "MAX_BREAKPOINTS",
    "CacheUsage",
    "FakeAnthropicAPI",
    "Fault",
    "FaultKind",
    "Item",
    "RecordedRequest",
    "Redacted",
    "Reply",
    "Script",
    "Thinking",
    "ToolCall",
]

DEFAULT_MODELS = tuple(MODELS)
_EXHAUSTED = (
    "fake Anthropic API: the script ran out: its {served} replies were all served, so this "
    "request has none (add replies to the script)"
)
_MAX_REQUEST_BYTES = 32 * 1024 * 1024  # API reference, "Errors": 413 over 32 MB
_THINKS_IN_PLACE_OF_TEXT = frozenset({"claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5"})
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
class Thinking:
    """A ``thinking`` block: ``text`` is its summary (sent only with ``display: summarized``)."""

    text: str


@dataclass(frozen=True)
class Redacted:
    """A ``redacted_thinking`` block (its ``data`` is generated and signed)."""

    secret: str = "redacted"


Item = str | ToolCall | Thinking | Redacted


@dataclass(frozen=True)
class Reply:
    """A successful reply: text, thinking and tool calls in order.

    ``stop_reason`` defaults to ``tool_use`` when a tool is called, else ``end_turn``.
    With ``max_tokens`` and a tool call last, that call is cut: its input is partial.
    ``refusal`` is ``(category, explanation)`` for ``stop_reason="refusal"``.
    """

    content: tuple[Item, ...]
    stop_reason: str | None = None
    refusal: tuple[str | None, str | None] | None = None

    @classmethod
    def text(cls, text: str) -> Reply:
        """A reply of one text block."""
        return cls((text,))

    @classmethod
    def tool(cls, name: str, tool_input: Mapping[str, Any], *, text: str = "") -> Reply:
        """A reply calling one tool, optionally after some text."""
        call = ToolCall(name, tool_input)
        return cls((text, call) if text else (call,))

    @classmethod
    def refused(
        cls, text: str = "", *, category: str | None = "cyber", explanation: str | None = None
    ) -> Reply:
        """A ``refusal``: optional partial text, then ``stop_details``."""
        return cls((text,) if text else (), "refusal", (category, explanation))

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
    def status(
        cls, http_status: int, *, retry_after_s: float | None = None, message: str = ""
    ) -> Fault:
        """An error response with an Anthropic error body (and ``retry-after`` if given)."""
        return cls(
            "status",
            http_status,
            retry_after_s,
            error_type=_error_type(http_status),
            message=message or "scripted fault",
        )

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
    """One request the fake received: raw body bytes, parsed JSON and headers; ``at_s``
    when it arrived (``time.monotonic``, the fake Slack's clock too: their order)."""

    raw: bytes
    body: Mapping[str, Any]
    headers: Mapping[str, str]
    at_s: float = 0.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's ``messages`` array."""
        return list(self.body.get("messages", []))

    @property
    def visible_tools(self) -> list[str]:
        """The tools whose definitions the model sees: those without ``defer_loading``,
        then the deferred ones a ``tool_reference`` in a tool result loaded, in order."""
        tools = [t for t in self.body.get("tools") or [] if isinstance(t, dict)]
        names = [str(t.get("name")) for t in tools if t.get("defer_loading") is not True]
        for message in self.messages:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                inner = block.get("content") if isinstance(block, dict) else None
                for ref in inner if isinstance(inner, list) else []:
                    if isinstance(ref, dict) and ref.get("type") == "tool_reference":
                        name = str(ref.get("tool_name"))
                        names += [] if name in names else [name]
        return names


Script = Sequence[Reply | Fault] | Callable[[RecordedRequest], Reply | Fault]


class FakeAnthropicAPI:
    """The fake server. Use as ``async with FakeAnthropicAPI(script) as fake:``.

    Args:
        script: the replies (see the module docstring).
        text_chunk_chars: text is streamed in deltas of this many characters.
        api_key: when set, the only key accepted; None accepts any key.
        models: the model ids served (default: every id the catalogue names).
        think: the model thinks: a thinking block starts every reply where the request lets
            the model think, and on the 5.5 models text before a tool call comes as thinking.
        context_tokens: a context window to use instead of each model's (tests of overflow).
        host: the address to listen on.
        port: the port to listen on (0: any free port).
        latency_s: how long every reply waits before its first byte (a real model takes
            seconds; benches of load and deploys need sessions that last).

    Attributes:
        base_url: ``http://127.0.0.1:<port>`` once entered (pass it as ``base_url``).
        requests: every ``POST /v1/messages`` received, in order (refused ones too).
        refusals: the ``ApiError`` of every request the rules refused, in order.
        answered: every complete message sent (usage included), in order: the calls a
            real API would bill (a faulted or refused attempt is not in it).
    """

    def __init__(
        self,
        script: Script = (),
        *,
        text_chunk_chars: int = 16,
        api_key: str | None = None,
        models: Sequence[str] = DEFAULT_MODELS,
        think: bool = True,
        context_tokens: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_s: float = 0.0,
    ) -> None:
        self._script: deque[Reply | Fault] | Callable[[RecordedRequest], Reply | Fault]
        self._script = script if callable(script) else deque(script)
        self._served = 0
        self._text_chunk_chars = text_chunk_chars
        self._api_key = api_key
        self._models = tuple(models)
        self._think = think
        self._context_tokens = context_tokens
        self._address = (host, port)
        self._latency_s = latency_s
        self._cache = PromptCache()
        self._memory = Memory(thinking_of={}, paused=set())
        self._ids = itertools.count(1)
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.requests: list[RecordedRequest] = []
        self.refusals: list[ApiError] = []
        self.answered: list[dict[str, Any]] = []
        self.base_url = ""

    def push(self, *items: Reply | Fault) -> None:
        """Append replies or faults to a queue script."""
        if callable(self._script):
            raise TypeError("push() needs a queue script, not a callable one")
        self._script.extend(items)

    async def __aenter__(self) -> FakeAnthropicAPI:
        app = web.Application(client_max_size=_MAX_REQUEST_BYTES + 1024)
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_get("/v1/models", self._list_models)
        app.router.add_get("/v1/models/{model_id}", self._get_model)
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
        if len(raw) > _MAX_REQUEST_BYTES:
            return self._error(
                ApiError(413, "request_too_large", "Request exceeds the maximum size")
            )
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(invalid("The request body is not valid JSON."))
        recorded = RecordedRequest(
            raw, body if isinstance(body, dict) else {}, dict(request.headers), time.monotonic()
        )
        self.requests.append(recorded)
        problem = self._refused(request) or self._check(body)
        if problem is not None:
            self.refusals.append(problem)
            return self._error(problem)
        planned = self._next(recorded)
        if self._latency_s > 0:
            await asyncio.sleep(self._latency_s)
        if isinstance(planned, Fault) and planned.kind == "status":
            problem = ApiError(planned.http_status, planned.error_type, planned.message)
            return self._error(problem, planned)
        if isinstance(planned, Fault) and planned.kind == "disconnect" and not planned.after_events:
            _drop(request)
            return web.Response()
        reply = planned if isinstance(planned, Reply) else Reply.text("This reply is cut short.")
        fault = planned if isinstance(planned, Fault) else None
        message = self._message(reply, body)
        if fault is None:
            self.answered.append(message)
        if body.get("stream"):
            return await self._stream(request, message, fault)
        return web.json_response(message, headers={"request-id": self._id("req")})

    def _check(self, body: object) -> ApiError | None:
        problem = check(body, self._memory)
        if problem is None and isinstance(body, dict) and body["model"] not in self._models:
            problem = ApiError(404, "not_found_error", f"model: {body['model']}")
        if problem is None and isinstance(body, dict):
            window = self._window(MODELS[body["model"]])
            if (size := prompt_tokens(body)) > window:
                problem = invalid(f"prompt is too long: {size} tokens > {window} maximum")
        return problem

    async def _count_tokens(self, request: web.Request) -> web.Response:
        if problem := self._refused(request):
            return self._error(problem)
        try:
            body = json.loads(await request.read())
        except ValueError:
            return self._error(invalid("The request body is not valid JSON."))
        if problem := check(body, self._memory, count_only=True):
            return self._error(problem)
        return web.json_response(
            {"input_tokens": prompt_tokens(body)}, headers={"request-id": self._id("req")}
        )

    async def _list_models(self, request: web.Request) -> web.Response:
        if problem := self._refused(request):
            return self._error(problem)
        data = [_model_info(m) for m in self._models]
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        page = {"data": data, "has_more": False, "first_id": first, "last_id": last}
        return web.json_response(page, headers={"request-id": self._id("req")})

    async def _get_model(self, request: web.Request) -> web.Response:
        if problem := self._refused(request):
            return self._error(problem)
        model = request.match_info["model_id"]
        if model not in self._models:
            return self._error(ApiError(404, "not_found_error", f"model: {model}"))
        return web.json_response(_model_info(model), headers={"request-id": self._id("req")})

    def _refused(self, request: web.Request) -> ApiError | None:
        """401 when the request carries no key, or not the configured one."""
        key = request.headers.get("x-api-key") or _bearer_token(request)
        if not key:
            return ApiError(
                401,
                "authentication_error",
                "an x-api-key or Authorization: Bearer header is required",
            )
        if self._api_key is not None and key != self._api_key:
            return ApiError(401, "authentication_error", "invalid x-api-key")
        return None

    def _next(self, recorded: RecordedRequest) -> Reply | Fault:
        if callable(self._script):
            return self._script(recorded)
        if not self._script:  # nothing to serve: permanent, so it is not retried
            return exhausted(self._served)
        self._served += 1
        return self._script.popleft()

    def _window(self, spec: ModelSpec) -> int:
        return self._context_tokens or spec.context_tokens

    def _message(self, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
        """The complete API message for ``reply`` (usage included), remembered for checks."""
        spec = MODELS[str(body["model"])]
        stop_reason = reply.resolved_stop_reason()
        blocks = [self._block(item, spec.id, body) for item in self._items(reply, spec, body)]
        if stop_reason == "max_tokens" and blocks and blocks[-1]["type"] == "tool_use":
            blocks[-1]["input"] = _cut(blocks[-1]["input"])
        usage = self._cache.account(body, spec.min_cache_tokens)
        output_tokens = tokens(json.dumps(blocks).encode())
        if stop_reason == "end_turn" and usage.total() + output_tokens > self._window(spec):
            stop_reason = "model_context_window_exceeded"
        self._remember(body, blocks, stop_reason)
        thinking_tokens = sum(tokens(json.dumps(b).encode()) for b in blocks if "signature" in b)
        details = None
        if stop_reason == "refusal" and reply.refusal is not None:
            category, explanation = reply.refusal
            details = {"type": "refusal", "category": category, "explanation": explanation}
        return {
            "id": self._id("msg"),
            "type": "message",
            "role": "assistant",
            "model": spec.id,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "stop_details": details,
            "usage": {
                "input_tokens": usage.input_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                "cache_read_input_tokens": usage.cache_read_input_tokens,
                "output_tokens": output_tokens,
                "output_tokens_details": {"thinking_tokens": thinking_tokens},
            },
        }

    def _items(self, reply: Reply, spec: ModelSpec, body: Mapping[str, Any]) -> list[Item]:
        """The reply's blocks as this request's thinking settings shape them."""
        kind = _thinking_type(spec, body)
        calls = any(isinstance(i, ToolCall) for i in reply.content)
        items = [i for i in reply.content if i != ""]
        if kind in ("disabled", None) or (kind == "between_tools" and not calls):
            return [i for i in items if not isinstance(i, Thinking | Redacted)]
        if self._think and spec.id in _THINKS_IN_PLACE_OF_TEXT and calls:
            last_call = max(n for n, i in enumerate(items) if isinstance(i, ToolCall))
            items = [
                Thinking(i) if isinstance(i, str) and n < last_call else i
                for n, i in enumerate(items)
            ]
        if self._think and not any(isinstance(i, Thinking | Redacted) for i in items):
            items.insert(0, Thinking(_auto_summary(items)))
        return items

    def _block(self, item: Item, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(item, str):
            return {"type": "text", "text": item}
        if isinstance(item, Thinking):
            text = item.text if _display(MODELS[model], body) == "summarized" else ""
            return {"type": "thinking", "thinking": text, "signature": sign(model, text)}
        if isinstance(item, Redacted):
            return {"type": "redacted_thinking", "data": redacted_data(model, item.secret)}
        tool_id = item.id or self._id("toolu")
        return {"type": "tool_use", "id": tool_id, "name": item.name, "input": dict(item.input)}

    def _remember(self, body: Mapping[str, Any], blocks: list[dict[str, Any]], stop: str) -> None:
        last = body["messages"][-1]
        prior = list(last.get("content") or []) if last.get("role") == "assistant" else []
        whole = [*prior, *blocks]
        thinking = [
            canonical_block(b) for b in whole if b.get("type") in ("thinking", "redacted_thinking")
        ]
        for block in blocks:
            if block["type"] == "tool_use":
                self._memory.thinking_of[block["id"]] = thinking
        if stop == "pause_turn":
            self._memory.paused.add(canonical_content(whole))

    async def _stream(
        self, request: web.Request, message: dict[str, Any], fault: Fault | None
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
            "stop_details": None,
            "usage": {**usage, "output_tokens": 1},
        }
        yield "message_start", {"type": "message_start", "message": start}
        for index, block in enumerate(message["content"]):
            yield from self._block_events(index, block, message["stop_reason"])
            if index == 0:
                yield "ping", {"type": "ping"}
        delta = {
            "stop_reason": message["stop_reason"],
            "stop_sequence": None,
            "stop_details": message["stop_details"],
        }
        yield "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}
        yield "message_stop", {"type": "message_stop"}

    def _block_events(
        self, index: int, block: Mapping[str, Any], stop_reason: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        start: dict[str, Any] = dict(block)
        if kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in self._chunks(block["text"])]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": t} for t in self._chunks(block["thinking"])
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {**block, "input": {}}
            text = json.dumps(block["input"])
            if stop_reason == "max_tokens" and text.endswith("}"):
                text = text[:-1]  # the call was cut before its input was complete
            pieces = ["", *_thirds(text)]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
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

    def _error(self, problem: ApiError, fault: Fault | None = None) -> web.Response:
        request_id = self._id("req")
        headers = {"request-id": request_id}
        if fault is not None and fault.retry_after_s is not None:
            headers["retry-after"] = f"{fault.retry_after_s:g}"
        error: dict[str, Any] = {"type": problem.type, "message": problem.message}
        if problem.error_code is not None:
            error["details"] = {"error_code": problem.error_code}
        body = {"type": "error", "error": error, "request_id": request_id}
        return web.json_response(body, status=problem.status, headers=headers)

    def _id(self, prefix: str) -> str:
        return f"{prefix}_fake{next(self._ids):06d}"


def _thinking_type(spec: ModelSpec, body: Mapping[str, Any]) -> str | None:
    """The request's ``thinking.type``, or the model's default when it sent none."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict):
        return str(thinking.get("type"))
    return "adaptive" if spec.adaptive() else None


def _display(spec: ModelSpec, body: Mapping[str, Any]) -> str:
    """``thinking.display``; by default ``omitted`` on models without manual thinking."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("display"):
        return str(thinking["display"])
    return "summarized" if "enabled" in spec.thinking_types else "omitted"


def _auto_summary(items: Sequence[Item]) -> str:
    calls = [i.name for i in items if isinstance(i, ToolCall)]
    return f"Deciding to call {', '.join(calls)}." if calls else "Working out the answer."


def _cut(tool_input: Mapping[str, Any]) -> dict[str, Any]:
    """The input a call cut by ``max_tokens`` arrives with: its first field only."""
    first = next(iter(tool_input.items()), None)
    return {first[0]: first[1]} if first else {}


def _model_info(model: str) -> dict[str, Any]:
    """SDK ``ModelInfo`` of ``model`` (catalogue facts; a bare entry for other ids)."""
    spec = MODELS.get(model)
    info: dict[str, Any] = {
        "type": "model",
        "id": model,
        "display_name": model,
        "created_at": "2026-01-01T00:00:00Z",
        "lifecycle": spec.lifecycle if spec else "active",
        "deprecated_at": None,
        "retires_at": None,
    }
    if spec is not None:
        info["max_input_tokens"] = spec.context_tokens
        info["max_tokens"] = spec.max_output_tokens
        if spec.lifecycle != "active":
            info["deprecated_at"] = "2026-06-01T00:00:00Z"
            info["retires_at"] = f"{spec.retires}T00:00:00Z" if spec.retires else None
    return info


def exhausted(served: int) -> Fault:
    """What the fake answers once its script ran out after ``served`` replies: a 400
    ``invalid_request_error`` saying so (permanent: the harness does not retry it)."""
    return Fault.status(400, message=_EXHAUSTED.format(served=served))


def _error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def _bearer_token(request: web.Request) -> str:
    header = request.headers.get("authorization", "")
    return header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""


def _thirds(text: str) -> list[str]:
    step = max(1, -(-len(text) // 3))
    return [text[i : i + step] for i in range(0, len(text), step)]


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _drop(request: web.Request) -> None:
    """Cut the TCP connection without finishing the response."""
    if request.transport is not None:
        request.transport.abort()
