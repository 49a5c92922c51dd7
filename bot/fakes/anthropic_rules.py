"""What the fake Messages API refuses, with the real API's status, error type and message.

Each check mirrors a refusal of the real API (wording from recorded error bodies in
Anthropic's docs and public bug reports: "Errors", "Troubleshooting thinking", the
model migration guides); the per-model rules come from ``harness.model.catalog``.
``check`` returns the first problem as an ``ApiError`` or None.

Thinking blocks are signed by the fake (``sign``) with the model that wrote them, so a
block edited, moved to another model or invented by the client fails verification
like the real API's (SDK ``ThinkingBlockParam``: "a modified block results in a 400").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness import MODELS, ModelSpec

# The SDK's MessageCreateParams fields (anthropic 2.14.0), plus the sampling parameters
# the API still names in its refusals.
KNOWN_FIELDS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "stream",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "metadata",
        "stop_sequences",
        "cache_control",
        "container",
        "diagnostics",
        "inference_geo",
        "service_tier",
        "speed",
        "user_profile_id",
        "workspace_id",
        "temperature",
        "top_p",
        "top_k",
    }
)
COUNT_FIELDS = KNOWN_FIELDS - {"max_tokens", "stream", "stop_sequences", "metadata"}
MAX_BREAKPOINTS = 4  # Anthropic prompt-caching docs: at most 4 cache_control blocks
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")  # API reference: tools[].name
_SIGNING_KEY = b"warroom-fake-anthropic"  # the fake's "account": one key for all servers
_THINKING = ("thinking", "redacted_thinking")


@dataclass(frozen=True)
class ApiError:
    """An error response: HTTP ``status``, ``error.type`` and ``error.message``;
    ``error_code`` is ``error.details.error_code`` where the API names the cause (the
    SDK's ``_error_classes`` maps ``(status, error_code)`` to a typed error)."""

    status: int
    type: str
    message: str
    error_code: str | None = None


def invalid(message: str) -> ApiError:
    """A 400 ``invalid_request_error``."""
    return ApiError(400, "invalid_request_error", message)


def sign(model: str, text: str) -> str:
    """The signature of thinking ``text`` written by ``model`` (opaque base64)."""
    mac = hmac.new(_SIGNING_KEY, f"{model}\0{text}".encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def redacted_data(model: str, secret: str) -> str:
    """The opaque ``data`` of a redacted thinking block: payload and its MAC."""
    payload = base64.b64encode(secret.encode()).decode()
    return f"{payload}.{sign(model, payload)}"


def _verified(model: str, block: Mapping[str, Any]) -> bool:
    if block.get("type") == "thinking":
        signature = block.get("signature")
        return isinstance(signature, str) and hmac.compare_digest(
            signature, sign(model, str(block.get("thinking", "")))
        )
    payload, _, mac = str(block.get("data", "")).partition(".")
    return bool(payload) and hmac.compare_digest(mac, sign(model, payload))


@dataclass
class Memory:
    """What the server remembers of its own responses, to check them when sent back.

    ``thinking_of``: tool_use id → the thinking blocks (canonical JSON) of the response
    that called it; ``paused``: canonical JSON of paused assistant turns (``pause_turn``)
    a request may end with.
    """

    thinking_of: dict[str, list[str]]
    paused: set[str]


Check = Callable[[Mapping[str, Any], ModelSpec, Memory], ApiError | None]


def check(body: object, memory: Memory, *, count_only: bool = False) -> ApiError | None:
    """The first reason the real API would refuse ``body``, or None.

    ``count_only`` checks a ``POST /v1/messages/count_tokens`` body (no ``max_tokens``).
    """
    if not isinstance(body, dict):
        return invalid("The request body is not a JSON object.")
    problem = _top_level(body, count_only)
    if problem is not None:
        return problem
    spec = MODELS.get(str(body["model"]))
    if spec is None or spec.lifecycle == "retired":
        return ApiError(404, "not_found_error", f"model: {body['model']}")
    checks: Sequence[Check] = (
        _sampling,
        _thinking,
        _tools,
        _tool_references,
        _breakpoints,
        _messages,
        _pairs,
        _signatures,
        _latest_thinking,
        _prefill,
    )
    if not count_only:
        checks = (_max_tokens, *checks)
    for each in checks:
        if (problem := each(body, spec, memory)) is not None:
            return problem
    return None


def _top_level(body: Mapping[str, Any], count_only: bool) -> ApiError | None:
    required = ("model", "messages") if count_only else ("model", "max_tokens", "messages")
    for name in required:
        if name not in body:
            return invalid(f"{name}: Field required")
    allowed = COUNT_FIELDS if count_only else KNOWN_FIELDS
    for name in body:
        if name not in allowed:
            return invalid(f"{name}: Extra inputs are not permitted")
    if not isinstance(body["messages"], list) or not body["messages"]:
        return invalid("messages: at least one message is required")
    return None


def _max_tokens(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    value = body["max_tokens"]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return invalid("max_tokens: Input should be a valid integer greater than or equal to 0")
    if value > spec.max_output_tokens:
        return invalid(
            f"max_tokens: {value} > {spec.max_output_tokens}, which is the maximum allowed "
            f"number of output tokens for {spec.id}"
        )
    return None


def _sampling(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    for name in ("temperature", "top_p", "top_k"):
        if name in body and not spec.sampling:
            return invalid(f"`{name}` is deprecated for this model.")
    return None


def _thinking(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    thinking, effort = body.get("thinking"), (body.get("output_config") or {}).get("effort")
    if effort is not None and effort not in spec.efforts:
        return invalid(f"output_config.effort: {effort!r} is not supported for this model.")
    if thinking is None:
        return None
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in spec.thinking_types:
        hint = (
            '"thinking.type.between_tools"'
            if "between_tools" in spec.thinking_types
            else ('"thinking.type.adaptive" and "output_config.effort"')
        )
        return invalid(
            f'"thinking.type.{kind}" is not supported for this model. Use {hint} to control '
            "thinking behavior."
        )
    extra = set(thinking) - {"type", "display", "budget_tokens"}
    if extra or ("budget_tokens" in thinking and kind != "enabled"):
        name = sorted(extra)[0] if extra else "budget_tokens"
        return invalid(f"thinking.{kind}.{name}: Extra inputs are not permitted")
    if thinking.get("display") not in (None, "summarized", "omitted"):
        return invalid("thinking.display: Input should be 'summarized' or 'omitted'")
    if kind == "between_tools" and effort in ("xhigh", "max"):
        return invalid(f'"thinking.type.between_tools" is not supported at effort {effort}.')
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return invalid(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )
        if "max_tokens" in body and budget >= body["max_tokens"]:
            return invalid("`max_tokens` must be greater than `thinking.budget_tokens`.")
    return None


def _tools(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    names: set[str] = set()
    tools = body.get("tools") or []
    for index, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            return invalid(
                f"tools.{index}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            )
        if "input_schema" not in tool:
            return invalid(f"tools.{index}.custom.input_schema: Field required")
        if not isinstance(tool.get("defer_loading", False), bool):
            return invalid(f"tools.{index}.custom.defer_loading: Input should be a valid boolean")
        if name in names:
            return invalid("tools: Tool names must be unique.")
        names.add(name)
    if tools and all(t.get("defer_loading") is True for t in tools):
        return invalid("All tools have defer_loading set. At least one tool must be non-deferred.")
    return None


def _tool_references(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    """``tool_reference`` blocks live in ``tool_result`` content only (SDK
    ``ToolResultBlockParam``) and name a tool the request defines (tool search docs)."""
    defined = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    for where, block in _blocks(body["messages"]):
        if block.get("type") == "tool_reference":
            return invalid(
                f"{where}: Input tag 'tool_reference' found using 'type' does not match any "
                "of the expected tags"
            )
        content = block.get("content") if block.get("type") == "tool_result" else None
        for inner in content if isinstance(content, list) else []:
            if isinstance(inner, dict) and inner.get("type") == "tool_reference":
                name = inner.get("tool_name")
                if name not in defined:  # the SDK's ToolReferenceUnresolvedError
                    return ApiError(
                        400,
                        "invalid_request_error",
                        f"Tool reference '{name}' has no corresponding tool definition",
                        error_code="tool_reference_unresolved",
                    )
    return None


def _breakpoints(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    found = json.dumps(body).count('"cache_control"')
    if found > MAX_BREAKPOINTS:
        limit = f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided."
        return invalid(f"{limit} Found {found}.")
    for where, block in _blocks(body["messages"]):
        if block.get("type") in _THINKING and "cache_control" in block:
            return invalid(f"{where}.cache_control: Thinking blocks cannot be cached directly.")
    return None


def _messages(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    messages = body["messages"]
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return invalid(f"messages.{index}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        final_assistant = index == len(messages) - 1 and message["role"] == "assistant"
        if content in ([], "") and not final_assistant:
            return invalid(
                f"messages.{index}: all messages must have non-empty content except for "
                "the optional final assistant message"
            )
    for _where, block in _blocks(messages):
        if block.get("type") == "text":
            text = block.get("text")
            if not isinstance(text, str) or not text:
                return invalid("messages: text content blocks must be non-empty")
            if not text.strip():
                return invalid("messages: text content blocks must contain non-whitespace text")
    return None


def _pairs(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    messages = body["messages"]
    for index, message in enumerate(messages):
        content = _content(message)
        calls = [b.get("id") for b in content if b.get("type") == "tool_use"]
        following = _content(messages[index + 1]) if index + 1 < len(messages) else []
        if message["role"] == "assistant" and calls and index + 1 < len(messages):
            answered = {b.get("tool_use_id") for b in following if b.get("type") == "tool_result"}
            missing = [c for c in calls if c not in answered]
            if missing:
                return invalid(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(map(str, missing))}. Each `tool_use` block "
                    "must have a corresponding `tool_result` block in the next message."
                )
            leading = 0
            while leading < len(following) and following[leading].get("type") == "tool_result":
                leading += 1
            if leading < len(calls):
                return invalid(
                    f"messages.{index + 1}: Did not find {len(calls)} `tool_result` block(s) at "
                    "the beginning of this message. Messages following `tool_use` blocks must "
                    "begin with a matching number of `tool_result` blocks."
                )
        if message["role"] == "user":
            previous = _content(messages[index - 1]) if index else []
            known = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            for position, block in enumerate(content):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in known:
                    return invalid(
                        f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous message."
                    )
    return None


def _signatures(body: Mapping[str, Any], spec: ModelSpec, _: Memory) -> ApiError | None:
    for where, block in _blocks(body["messages"]):
        if block.get("type") in _THINKING and not _verified(spec.id, block):
            field = "signature" if block.get("type") == "thinking" else "data"
            return invalid(f"{where}: Invalid `{field}` in `{block.get('type')}` block")
    return None


def _latest_thinking(body: Mapping[str, Any], spec: ModelSpec, memory: Memory) -> ApiError | None:
    """In a tool-use loop the latest assistant turn's thinking must come back unmodified."""
    messages = body["messages"]
    last = len(messages) - 1
    index = last - 1 if messages[last]["role"] == "user" else last
    if index < 0 or messages[index]["role"] != "assistant":
        return None
    content = _content(messages[index])
    calls = [b.get("id") for b in content if b.get("type") == "tool_use"]
    expected = next((memory.thinking_of[c] for c in calls if c in memory.thinking_of), None)
    if expected is None:
        return None
    sent = [_canonical(b) for b in content if b.get("type") in _THINKING]
    if sent != expected:
        return invalid(
            f"messages.{index}.content.0: `thinking` or `redacted_thinking` blocks in the latest "
            "assistant message cannot be modified. These blocks must remain as they were in the "
            "original response."
        )
    return None


def _prefill(body: Mapping[str, Any], spec: ModelSpec, memory: Memory) -> ApiError | None:
    last = body["messages"][-1]
    if last["role"] != "assistant" or spec.prefill:
        return None
    if canonical_content(_content(last)) in memory.paused:
        return None  # a paused turn sent back as is (stop_reason pause_turn)
    return invalid("Prefilling assistant messages is not supported for this model.")


def canonical_content(blocks: Sequence[Mapping[str, Any]]) -> str:
    """Blocks as canonical JSON without ``cache_control`` (to compare what came back)."""
    return json.dumps([_bare(b) for b in blocks], sort_keys=True)


def _canonical(block: Mapping[str, Any]) -> str:
    return json.dumps(_bare(block), sort_keys=True)


def canonical_block(block: Mapping[str, Any]) -> str:
    """One block as canonical JSON without ``cache_control``."""
    return _canonical(block)


def _bare(block: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _content(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _blocks(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        for position, block in enumerate(_content(message)):
            yield f"messages.{index}.content.{position}", block
