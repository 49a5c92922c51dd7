"""The model adapter: one streamed Messages API call, retried, laid out for the prompt cache.

``AnthropicModel`` drives ``anthropic.AsyncAnthropic`` with the SDK's own retries
turned off (``max_retries=0``) and owns the retry loop, because the SDK's loop
covers only the opening of a request: a stream that breaks or stalls after its
headers arrived is not retried, its ``retry-after`` is obeyed uncapped, and its
sleep cannot be injected into tests.

The request body is serialised here, not by the SDK (it is sent with the SDK's
generic ``post``), so its bytes are canonical and ordered the way the cache reads
a prompt: model settings, then tools, system and messages, messages last. Request
*n+1* of a session therefore repeats the bytes of request *n* up to request *n*'s
rolling breakpoint (docs/architecture.md §4).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal, Protocol

import anthropic
import httpx2
from anthropic.lib.streaming import AsyncMessageStream, TextEvent
from anthropic.types import Message as ApiMessage
from anthropic.types import RawMessageStreamEvent

from harness.errors import ModelContextOverflow, ModelRejected, ModelStalled, ModelUnavailable
from harness.model.catalog import DEFAULT_MAX_TOKENS, Effort
from harness.model.messages import (
    AssistantBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from harness.model.request import ToolSpec as ToolSpec  # re-exported: tools import it here
from harness.model.request import build_request, thinking_options
from harness.model.spliced import MessagesMemo

DEFAULT_BASE_URL = "https://api.anthropic.com"
_CONNECT_TIMEOUT_S = 5.0  # the anthropic SDK's own default (DEFAULT_TIMEOUT.connect)
# Anthropic API reference, "Errors": a 400 whose message says the prompt does not fit the
# context window, and 413 request_too_large (the body is over the size limit).
_OVERFLOW_MARKERS = ("prompt is too long", "exceed context limit", "context window")
# Anthropic API reference, "Errors": error.type of the retryable failures, by status.
_RETRYABLE_ERROR_TYPES = {"rate_limit_error": 429, "api_error": 500, "overloaded_error": 529}

TextCallback = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class RefusalDetails:
    """SDK ``RefusalStopDetails``: the policy ``category`` (None when unnamed) and a
    human-readable ``explanation`` (None when the API has none)."""

    category: str | None
    explanation: str | None


@dataclass(frozen=True)
class ModelReply:
    """The assistant's answer to one ``complete`` call.

    Attributes:
        content: thinking, text and tool calls in the order the model wrote them.
        stop_reason: the API's ``stop_reason`` (``end_turn``, ``tool_use``, ``max_tokens``,
            ``refusal``, ``pause_turn``, ``model_context_window_exceeded``, …).
        usage: tokens of the attempt that produced this reply.
        model: the model name the API reported.
        request_id: the API's ``request-id`` header, for support tickets.
        attempts: requests sent to get it (1 = no retry).
        refusal: the API's ``stop_details`` of a ``refusal`` (category, explanation).
    """

    content: tuple[AssistantBlock, ...]
    stop_reason: str
    usage: Usage
    model: str
    request_id: str | None
    attempts: int
    refusal: RefusalDetails | None = None

    def to_message(self) -> Message:
        """The reply as the assistant message to append to the transcript."""
        return Message("assistant", self.content)


class Model(Protocol):
    """A language model that continues a transcript.

    Contract: ``messages`` alternate roles and start with a user message (they end with
    an assistant message only to continue a turn that stopped with ``pause_turn``);
    thinking blocks are sent back exactly as they came; tool calls in
    the reply name tools from ``tools``. A call is not idempotent (each attempt is a new
    generation, billed), and implementations retry transient failures themselves.
    Cancelling the awaiting task aborts the request. ``on_text``, if given, is awaited
    inline with the text of the current attempt so far (not a delta): a retried attempt
    starts again from its first chunk, so a consumer showing the latest value never
    shows text twice.

    Raises:
        ModelRejected: the request is invalid or not allowed (never retried).
        ModelUnavailable: retryable failures outlasted every attempt.
        ModelStalled: the last attempt's stream went silent.
    """

    async def complete(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        messages: Sequence[Message],
        max_tokens: int | None = None,
        on_text: TextCallback | None = None,
    ) -> ModelReply: ...


@dataclass(frozen=True)
class _Failure:
    """One retryable failed attempt."""

    kind: Literal["status", "connection", "stall"]
    status: int | None = None
    retry_after_s: float | None = None
    request_id: str | None = None


class _StreamCutShort(Exception):
    """The stream ended cleanly but before ``message_stop``."""


_FOREIGN_ERRORS = (anthropic.APIError, httpx2.TransportError, _StreamCutShort)


class AnthropicModel:
    """``Model`` over Anthropic's Messages API (``anthropic.AsyncAnthropic``, streamed).

    Args:
        api_key: the API key (``x-api-key``).
        model: model id, e.g. ``claude-sonnet-5-5`` (``catalog.DEFAULT_MODEL``).
        base_url: API root; None means ``DEFAULT_BASE_URL`` (the environment is not read).
        max_tokens: the default output cap per call (thinking included).
        effort: ``output_config.effort``, or None for the model's default.
        max_attempts: requests per call, first included.
        stall_timeout_s: silence on the socket (pings count as data) that ends an attempt.
            Why 60 s: a stream is silent while the API reads an uncached prompt before its
            first event, and while the model thinks between summarized-thinking deltas; the
            API sends ``ping`` events but documents no interval for them (docs.anthropic.com,
            "Streaming Messages": "any number of ping events"), so a shorter read timeout
            would cut long thinking with nothing to go by. A stalled attempt is retried at
            once, without backoff: the silence was its wait, and the server asked for none.
        backoff_base_s, backoff_max_s: exponential backoff, halved by random jitter;
            a ``retry-after`` from the API replaces it, capped at ``backoff_max_s``.
        http_timeout_s: timeout of writing the request and of waiting for a pooled connection.
        sleep: awaited between attempts with the delay in seconds (tests record it).

    Raises:
        ValueError: ``max_attempts`` below 1, or an ``effort`` the model does not accept.
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        effort: Effort | None = None,
        max_attempts: int = 6,
        stall_timeout_s: float = 60.0,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        http_timeout_s: float = 600.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        thinking_options(model, max_tokens, effort)  # an effort the model refuses fails here
        self._model = model
        self._max_tokens = max_tokens
        self._effort = effort
        self._memo = MessagesMemo()  # sessions' joined histories, between their calls
        self._max_attempts = max_attempts
        self._stall_timeout_s = stall_timeout_s
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._sleep = sleep
        timeout = anthropic.Timeout(
            http_timeout_s, connect=min(_CONNECT_TIMEOUT_S, http_timeout_s), read=stall_timeout_s
        )
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url or DEFAULT_BASE_URL, max_retries=0, timeout=timeout
        )

    async def aclose(self) -> None:
        """Close the HTTP connections. The instance is unusable afterwards."""
        await self._client.close()

    async def complete(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        messages: Sequence[Message],
        max_tokens: int | None = None,
        on_text: TextCallback | None = None,
    ) -> ModelReply:
        """Ask the model for the next assistant message; see ``Model`` for the contract."""
        body = build_request(
            model=self._model,
            max_tokens=max_tokens or self._max_tokens,
            system=system,
            tools=tools,
            messages=messages,
            effort=self._effort,
            memo=self._memo,
        )
        failure: _Failure | None = None
        for attempt in range(1, self._max_attempts + 1):
            if failure is not None:
                await self._sleep(self._delay_s(attempt - 1, failure))
            try:
                return await self._attempt(body, on_text, attempt)
            except _FOREIGN_ERRORS as exc:
                failure = _classify(exc)
                if attempt == self._max_attempts:
                    raise self._exhausted(failure) from exc
        raise AssertionError("unreachable: the loop returns or raises")

    async def _attempt(self, body: bytes, on_text: TextCallback | None, attempt: int) -> ModelReply:
        raw = await self._client.post(
            "/v1/messages",
            cast_to=ApiMessage,
            content=body,
            stream=True,
            stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
        )
        async with AsyncMessageStream(raw, output_format=anthropic.NOT_GIVEN) as stream:
            text, finished = "", False
            async for event in stream:
                if isinstance(event, TextEvent) and on_text is not None:
                    text += event.text
                    await on_text(text)
                finished = finished or event.type == "message_stop"
            if not finished:
                raise _StreamCutShort
            return _reply(stream.current_message_snapshot, stream.request_id, attempt)

    def _delay_s(self, retry: int, failure: _Failure) -> float:
        """Seconds to wait before retry number ``retry`` (1-based); none after a stall."""
        if failure.kind == "stall":
            return 0.0
        if failure.retry_after_s is not None:
            return min(max(failure.retry_after_s, 0.0), self._backoff_max_s)
        ceiling = min(self._backoff_max_s, self._backoff_base_s * 2.0 ** (retry - 1))
        return random.uniform(ceiling / 2, ceiling)

    def _exhausted(self, failure: _Failure) -> ModelUnavailable | ModelStalled:
        if failure.kind == "stall":
            return ModelStalled(attempts=self._max_attempts, stall_timeout_s=self._stall_timeout_s)
        return ModelUnavailable(
            status=failure.status, attempts=self._max_attempts, request_id=failure.request_id
        )


def _classify(exc: Exception) -> _Failure:
    """Map a failed attempt's exception to a retryable ``_Failure``.

    Retryable: 408, 409, 429, 5xx (529 included; the SDK's own policy), an ``error``
    event of type ``rate_limit_error``/``api_error``/``overloaded_error`` inside a
    stream, connection errors, and stalls.

    Raises:
        ModelContextOverflow: 413, or a 400 saying the prompt does not fit, from ``exc``.
        ModelRejected: any other API status (400, 401, 403, 404, …), from ``exc``.
    """
    if isinstance(exc, anthropic.APIStatusError):
        status = _status_of(exc)
        if status in (408, 409, 429) or status >= 500:
            headers = exc.response.headers
            return _Failure("status", status, _retry_after_s(headers), exc.request_id)
        message = exc.api_message or exc.message
        overflow = status == 413 or any(m in message.lower() for m in _OVERFLOW_MARKERS)
        rejected = ModelContextOverflow if overflow and status in (400, 413) else ModelRejected
        raise rejected(
            status=status, message=message, error_type=exc.type, request_id=exc.request_id
        ) from exc
    if isinstance(exc, httpx2.ReadTimeout) or isinstance(exc.__cause__, httpx2.ReadTimeout):
        return _Failure("stall")
    return _Failure("connection")


def _status_of(exc: anthropic.APIStatusError) -> int:
    """The HTTP status, or for an ``error`` event inside a 200 stream the one its type means."""
    if exc.status_code >= 400:
        return exc.status_code
    return _RETRYABLE_ERROR_TYPES.get(str(exc.type), 400)


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait the API asked for: ``retry-after-ms``, else ``retry-after`` (seconds or date)."""
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


def _reply(message: ApiMessage, request_id: str | None, attempts: int) -> ModelReply:
    """Our ``ModelReply`` from the SDK's accumulated message (server-tool blocks dropped)."""
    content: list[AssistantBlock] = []
    for block in message.content:
        if block.type == "text":
            content.append(TextBlock(block.text))
        elif block.type == "tool_use":
            content.append(ToolUseBlock(block.id, block.name, dict(block.input)))
        elif block.type == "thinking":
            content.append(ThinkingBlock(block.thinking, block.signature))
        elif block.type == "redacted_thinking":
            content.append(RedactedThinkingBlock(block.data))
    usage = message.usage
    details = message.stop_details
    refusal = RefusalDetails(details.category, details.explanation) if details else None
    return ModelReply(
        content=tuple(content),
        stop_reason=message.stop_reason or "",
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens or 0,
            cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
        ),
        model=message.model,
        request_id=request_id,
        attempts=attempts,
        refusal=refusal,
    )
