"""The Messages API request body: tools, thinking, effort and cache breakpoints, as canonical bytes.

The body is serialised here, not by the SDK, so its bytes are canonical and ordered
the way the cache reads a prompt: model settings, then tools, system and messages,
messages last. Request *n+1* of a session therefore repeats the bytes of request *n*
up to request *n*'s rolling breakpoint (ARCHITECTURE.md §4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.model.catalog import MODELS, Effort
from harness.model.messages import Message, dumps, to_wire
from harness.model.spliced import MessagesMemo
from harness.model.transcript import stored_json

_EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
_MIN_BUDGET_TOKENS = 1024  # SDK ThinkingConfigEnabledParam: budget_tokens >= 1024, < max_tokens
# Block types the API refuses a cache_control on (prompt-caching docs: thinking blocks
# are cached with the turn, not marked themselves).
_UNMARKABLE = {"thinking", "redacted_thinking"}


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, and a JSON Schema of its input.

    ``defer_loading``: the definition stays out of the model's context until a
    ``tool_reference`` in a tool result loads it (SDK ``ToolParam.defer_loading``).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    defer_loading: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The API's tool definition (``name``, ``description``, ``input_schema``, then
        ``defer_loading`` when set), in order."""
        definition = {
            "name": self.name,
            "description": self.description,
            "input_schema": _plain(self.input_schema),
        }
        if self.defer_loading:
            definition["defer_loading"] = True
        return definition


def thinking_options(model: str, max_tokens: int, effort: Effort | None) -> dict[str, Any]:
    """The ``thinking`` and ``output_config`` fields ``model`` accepts.

    Adaptive thinking with ``display: summarized`` where the model has it (so the
    text between tool calls comes back readable: "What's new in Claude Sonnet 5.5");
    manual thinking with a budget of half of ``max_tokens`` on models that only
    have that; nothing for an id the catalogue does not know (the API's default).
    ``effort`` goes into ``output_config`` when given.

    Raises:
        ValueError: ``effort`` is not a level ``model`` accepts.
    """
    spec = MODELS.get(model)
    options: dict[str, Any] = {}
    if spec is None:
        return {"output_config": {"effort": effort}} if effort else {}
    if spec.adaptive():
        options["thinking"] = {"type": "adaptive", "display": "summarized"}
    elif "enabled" in spec.thinking_types and max_tokens > 2 * _MIN_BUDGET_TOKENS:
        budget = max(_MIN_BUDGET_TOKENS, max_tokens // 2)
        options["thinking"] = {"type": "enabled", "budget_tokens": budget, "display": "summarized"}
    if effort is not None:
        if effort not in spec.efforts:
            raise ValueError(f"{model} does not accept effort {effort!r} (it takes {spec.efforts})")
        options["output_config"] = {"effort": effort}
    return options


def build_request(
    *,
    model: str,
    max_tokens: int,
    system: str,
    tools: Sequence[ToolSpec],
    messages: Sequence[Message],
    effort: Effort | None = None,
    memo: MessagesMemo | None = None,
) -> bytes:
    """The streaming Messages API request body, as canonical UTF-8 JSON bytes.

    Cache breakpoints (``cache_control: {"type": "ephemeral"}``, at most 4 per request
    per the API's prompt-caching docs) go on: the system block (or the last tool that is
    not deferred when there is no system prompt) — the static prefix; the last block of
    the first message — the session's frozen context; the last block of the last
    message — the rolling breakpoint (its last block that is not thinking). A
    ``tool_reference`` to a tool this request does not defer becomes a text block. Equal
    arguments give equal bytes, with or without ``memo`` (the session's earlier requests'
    joined history, reused: ``harness.model.spliced``).

    Raises:
        ValueError: ``effort`` is not a level ``model`` accepts.
    """
    tool_defs = [tool.to_dict() for tool in tools]
    system_blocks: list[dict[str, Any]] = [{"type": "text", "text": system}] if system else []
    static = system_blocks or [d for d in tool_defs if not d.get("defer_loading")]
    if static:
        static[-1]["cache_control"] = dict(_EPHEMERAL)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    body |= thinking_options(model, max_tokens, effort)
    body["stream"] = True
    if tool_defs:
        body["tools"] = tool_defs
    if system_blocks:
        body["system"] = system_blocks
    head = dumps(body).encode()  # ``{…}``: the messages go in last, as ``dumps`` would
    pieces = [head[:-1], b',"messages":[']
    for n, part in enumerate(_messages_json(messages, tools, memo)):
        pieces += (b",", part) if n else (part,)
    pieces.append(b"]}")
    return b"".join(pieces)  # the history is copied once, here


def _messages_json(
    messages: Sequence[Message], tools: Sequence[ToolSpec], memo: MessagesMemo | None
) -> list[bytes]:
    """The elements of the ``messages`` array, in runs to be joined with commas, as UTF-8
    (``harness.model.spliced``); none empty.

    A message between the first and the last, with no ``tool_reference`` to rewrite, is
    sent as it is stored (``Message.json_bytes``): those a ``Transcript`` read from the
    store holds are joined from their stored texts without being decoded
    (``transcript.stored_json``); with ``memo``, the middle messages after them that an
    earlier request of the session joined are not joined again. The first and last carry
    the cache breakpoints; they and a message with a reference to rewrite are built anew
    (``_resolvable``).
    """
    deferred = frozenset(t.name for t in tools if t.defer_loading)
    sent_whole = frozenset(t.name for t in tools if not t.defer_loading)

    def render(message: Message, *, marked: bool = False) -> bytes:
        if not marked and message.referenced_tools <= deferred:
            return message.json_bytes
        (wire,) = _resolvable(to_wire((message,)), tools)
        if marked:
            markable = [b for b in wire["content"] if b.get("type") not in _UNMARKABLE]
            if markable:
                markable[-1]["cache_control"] = dict(_EPHEMERAL)
        return dumps(wire).encode()

    if not messages:
        return []
    if len(messages) == 1:
        return [render(messages[0], marked=True)]
    last = len(messages) - 1
    stored, after = stored_json(
        messages, 1, last, may_splice=lambda m: m.referenced_tools <= deferred, render=render
    )
    middle = messages[after:last]
    joined = (
        memo.join(middle, (deferred, sent_whole), render)
        if memo is not None
        else b",".join(render(m) for m in middle)
    )
    parts = (render(messages[0], marked=True), stored, joined, render(messages[-1], marked=True))
    return [p for p in parts if p]


def _resolvable(wire: list[dict[str, Any]], tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """``wire`` with each ``tool_reference`` to a tool this request does not defer turned
    into a text block saying why: the tool is sent whole now, or its server went away (the
    API refuses a reference with no definition: tool search docs). That change of tools
    already changed the cached prefix, so rewriting the history costs no cache."""
    deferred = {t.name for t in tools if t.defer_loading}
    whole = {t.name for t in tools if not t.defer_loading}
    for message in wire:
        for block in message["content"]:
            content = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(content, list):
                block["content"] = [_resolved(item, deferred, whole) for item in content]
    return wire


def _resolved(item: dict[str, Any], deferred: set[str], whole: set[str]) -> dict[str, Any]:
    name = item.get("tool_name")
    if item.get("type") != "tool_reference" or name in deferred:
        return item
    why = "is in the tool list now" if name in whole else "is no longer available"
    return {"type": "text", "text": f"(The tool {name} {why}.)"}


def _plain(value: Any) -> Any:
    """A JSON value with mappings as dicts and tuples as lists, order kept."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
