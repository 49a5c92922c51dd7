"""The transcript's values: messages, their content blocks, token usage, and their JSON.

A message serialises to the Messages API wire shape (``{"role", "content": [...]}``),
which is also the durable shape the store keeps. Serialisation is canonical: our
keys come in a fixed order and a tool call's ``input`` has its keys sorted at every
depth, so equal messages give equal bytes even after a round trip through a store
that reorders keys (Postgres ``jsonb`` does). That is what keeps the prompt cache
warm: request *n+1* repeats the bytes of request *n*.

>>> m = Message("user", (TextBlock("hi"),))
>>> m.to_json()
'{"role":"user","content":[{"type":"text","text":"hi"}]}'
>>> Message.from_json(m.to_json()) == m
True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from harness.errors import InvalidMessage

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class TextBlock:
    """Plain text, from the user or the model."""

    text: str


@dataclass(frozen=True)
class ToolUseBlock:
    """A tool call the model asked for.

    Attributes:
        id: the API's ``tool_use`` id (``toolu_…``); also the idempotency key of the call.
        name: the tool's name, as in ``ToolSpec.name``.
        input: the JSON object the model wrote (parsed; never mutate it).
    """

    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class ToolResultBlock:
    """The result of one tool call, sent back in a user message.

    ``content`` is the text the model reads; ``is_error`` marks a failed call;
    ``tool_references`` name deferred tools whose definitions the result loads (ToolSearch):
    on the wire they come first, as ``tool_reference`` blocks the API expands into the
    definitions, then the text when there is any (SDK ``ToolResultBlockParam``).
    """

    tool_use_id: str
    content: str
    is_error: bool = False
    tool_references: tuple[str, ...] = ()


@dataclass(frozen=True)
class ThinkingBlock:
    """The model's thinking (a summary of it, or empty when ``display`` is ``omitted``).

    ``signature`` is opaque: the API verifies it when the block is sent back, which
    must happen unmodified and in order (SDK ``ThinkingBlockParam``: "a modified
    block results in a 400 ``invalid_request_error``").
    """

    thinking: str
    signature: str


@dataclass(frozen=True)
class RedactedThinkingBlock:
    """Thinking the API encrypted (``data`` is opaque); sent back unchanged."""

    data: str


ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock
AssistantBlock = TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock


@dataclass(frozen=True)
class Message:
    """One turn of the transcript: a role and its content blocks, in order."""

    role: Role
    content: tuple[ContentBlock, ...]

    def to_dict(self) -> dict[str, Any]:
        """The wire/durable shape: ``{"role": …, "content": [block, …]}`` (fresh dicts)."""
        return {"role": self.role, "content": [block_to_dict(b) for b in self.content]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Inverse of ``to_dict``; a string ``content`` becomes one text block.

        Raises:
            InvalidMessage: unknown role or block type, or a field of the wrong type.
        """
        role = data.get("role")
        if role not in ("user", "assistant"):
            raise InvalidMessage(f"role must be 'user' or 'assistant', got {role!r}")
        content = data.get("content")
        if isinstance(content, str):
            return cls(role, (TextBlock(content),))
        if not isinstance(content, list):
            raise InvalidMessage("content must be a string or a list of blocks")
        return cls(role, tuple(block_from_dict(b) for b in content))

    def to_json(self) -> str:
        """Canonical compact JSON (see the module docstring); computed once per message
        (messages are immutable), so a request or a store write reuses the bytes."""
        return self._json

    @cached_property
    def _json(self) -> str:
        return dumps(self.to_dict())

    @cached_property
    def json_bytes(self) -> bytes:
        """``to_json`` as UTF-8, encoded once per message (a request splices these)."""
        return self._json.encode()

    @cached_property
    def referenced_tools(self) -> frozenset[str]:
        """Names of the tools its tool results reference (``tool_reference`` blocks)."""
        return frozenset(
            name
            for block in self.content
            if isinstance(block, ToolResultBlock)
            for name in block.tool_references
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Message:
        """Inverse of ``to_json``. Raises InvalidMessage on malformed input."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidMessage(f"not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise InvalidMessage("a message must be a JSON object")
        return cls.from_dict(data)

    @classmethod
    def from_stored(cls, text: str) -> Message:
        """A message from the JSON ``to_json`` wrote, decoded only as far as it is used.

        Its ``to_json``/``json_bytes`` are ``text`` itself and its ``content`` is decoded
        on first read (then kept), so a step that sends a long history without reading
        it (``request.build_request`` splices the middle messages' bytes) decodes none
        of it. The role is read from ``text``'s canonical opening; a text not in that
        shape (not written by ``to_json``) is decoded at once, as ``from_json`` does.

        Raises:
            InvalidMessage: malformed ``text``: at once when its opening is not
                canonical, else when ``content`` is first read.
        """
        role: Role
        if text.startswith(_ASSISTANT_OPENING):
            role = "assistant"
        elif text.startswith(_USER_OPENING):
            role = "user"
        else:
            return cls.from_json(text)
        message = object.__new__(cls)
        fields = message.__dict__
        fields["role"] = role
        fields["_json"] = text
        fields["json_bytes"] = text.encode()
        if _REFERENCE_KEY not in text:
            fields["referenced_tools"] = frozenset()
        return message


class _StoredContent:
    """``Message.content`` of a message made by ``Message.from_stored``: decoded from its
    JSON on first read. An ordinary message holds ``content`` in its ``__dict__``, which
    wins over this non-data descriptor, so only a stored message ever reaches it; the
    decoded blocks are then put there too."""

    def __get__(self, message: Message | None, owner: type[Message]) -> Any:
        if message is None:
            return self
        content = Message.from_json(message.__dict__["_json"]).content
        message.__dict__["content"] = content
        return content


# Installed after the dataclass was made: in the class body it would read as the field's
# default value.
setattr(Message, "content", _StoredContent())  # noqa: B010
_USER_OPENING = '{"role":"user","content":['
_ASSISTANT_OPENING = '{"role":"assistant","content":['
_REFERENCE_KEY = '"tool_reference"'


@dataclass(frozen=True)
class Usage:
    """Tokens one model call (or a sum of calls) consumed, as the API reports them.

    ``input_tokens`` excludes cached tokens: the prompt's total is
    ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``
    (Anthropic API reference, ``usage``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
        )

    def prompt_tokens(self) -> int:
        """Tokens of the prompt, cached or not: the context the call used."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def total(self) -> int:
        """Prompt plus output tokens."""
        return self.prompt_tokens() + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        """The four counters under their API names, in a fixed order."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Inverse of ``to_dict``; a missing or null counter reads as 0."""
        return cls(**{name: _count(data, name) for name in cls().to_dict()})


def to_wire(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The ``messages`` array of a Messages API request (canonical, fresh dicts)."""
    return [m.to_dict() for m in messages]


def from_wire(data: Sequence[Mapping[str, Any]]) -> tuple[Message, ...]:
    """Inverse of ``to_wire``. Raises InvalidMessage on a malformed element."""
    return tuple(Message.from_dict(item) for item in data)


def is_thinking(block: ContentBlock) -> bool:
    """Whether ``block`` is a ``thinking`` or ``redacted_thinking`` block."""
    return isinstance(block, ThinkingBlock | RedactedThinkingBlock)


def block_to_dict(block: ContentBlock) -> dict[str, Any]:
    """One content block in its wire shape, keys in a fixed order."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": canonical(block.input),
        }
    content: str | list[dict[str, str]] = block.content
    if block.tool_references:
        content = [{"type": "tool_reference", "tool_name": n} for n in block.tool_references]
        content += [{"type": "text", "text": block.content}] if block.content else []
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": content,
        "is_error": block.is_error,
    }


def block_from_dict(data: object) -> ContentBlock:
    """Parse one wire content block (text, tool_use, tool_result, thinking, redacted_thinking).

    Raises:
        InvalidMessage: not an object, an unknown ``type``, or a field of the wrong type.
    """
    if not isinstance(data, Mapping):
        raise InvalidMessage("a content block must be a JSON object")
    kind = data.get("type")
    if kind == "text":
        return TextBlock(_str(data, "text"))
    if kind == "tool_use":
        tool_input = data.get("input")
        if not isinstance(tool_input, Mapping):
            raise InvalidMessage("tool_use input must be a JSON object")
        return ToolUseBlock(_str(data, "id"), _str(data, "name"), dict(tool_input))
    if kind == "tool_result":
        content = data.get("content")
        return ToolResultBlock(
            _str(data, "tool_use_id"),
            _result_text(content),
            data.get("is_error") is True,
            _references(content),
        )
    if kind == "thinking":
        return ThinkingBlock(_str(data, "thinking"), _str(data, "signature"))
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(_str(data, "data"))
    raise InvalidMessage(f"unsupported content block type {kind!r}")


def canonical(value: Any) -> Any:
    """A copy of a JSON value with every object's keys sorted (lists keep their order)."""
    if isinstance(value, Mapping):
        return {str(k): canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 left as is, keys in the order given (no sorting)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise InvalidMessage(f"{key} must be a string, got {type(value).__name__}")
    return value


def _result_text(content: object) -> str:
    """A tool_result's ``content``: a string, or its list's text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        blocks = [b for b in content if isinstance(b, Mapping)]
        return "".join(_str(b, "text") for b in blocks if b.get("type") != "tool_reference")
    if content is None:
        return ""
    raise InvalidMessage("tool_result content must be a string or a list of text blocks")


def _references(content: object) -> tuple[str, ...]:
    """The tool names of a tool_result's ``tool_reference`` blocks, in order."""
    if not isinstance(content, list):
        return ()
    blocks = [b for b in content if isinstance(b, Mapping)]
    return tuple(_str(b, "tool_name") for b in blocks if b.get("type") == "tool_reference")


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidMessage(f"usage {key} must be an integer")
    return value
