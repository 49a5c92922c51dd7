"""A reply script for the fake Messages API, read from JSON (``warroom fake-anthropic --script``).

The file holds a JSON array; each item is one reply, served in order:

- ``{"text": "…"}``: one text block, ``end_turn``;
- ``{"tool": "TodoWrite", "input": {…}, "text": "…"}``: a tool call, optionally after
  some text, ``tool_use``;
- ``{"content": ["text", {"thinking": "…"}, {"tool": "Read", "input": {…}}, …],
  "stop_reason": "…"}``: several blocks in order (``stop_reason`` optional: any of the
  API's, e.g. ``max_tokens`` to cut the last tool call, ``pause_turn``);
- ``{"refusal": {"category": "cyber", "explanation": "…"}, "text": "…"}``: a refusal with
  its ``stop_details``, after optional partial text;
- ``{"status": 529, "retry_after_s": 1}``: an API error with that HTTP status.

Without a script, ``echo_reply`` answers every request by quoting the last user text.

>>> [type(r).__name__ for r in script_from_json('[{"text": "hi"}, {"status": 529}]')]
['Reply', 'Fault']
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from bot.fakes.anthropic_api import (
    Fault,
    Item,
    RecordedRequest,
    Reply,
    Thinking,
    ToolCall,
    exhausted,
)

__all__ = [
    "COMPACTION_MARK",
    "ScriptError",
    "ScriptPlayer",
    "echo_reply",
    "is_compaction",
    "script_from_json",
]


class ScriptError(ValueError):
    """The script is not valid JSON of the shape above; ``index`` is the bad item (or None)."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        where = f"item {index}: " if index is not None else ""
        super().__init__(f"{where}{message}")
        self.index = index


def script_from_json(text: str) -> list[Reply | Fault]:
    """The replies and faults a JSON script describes, in order.

    Raises:
        ScriptError: not JSON, not an array, or an item of an unknown shape.
    """
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise ScriptError(f"not JSON: {exc}") from exc
    if not isinstance(items, list):
        raise ScriptError("the script must be a JSON array of replies")
    return [_item(index, item) for index, item in enumerate(items)]


def _item(index: int, item: Any) -> Reply | Fault:
    if not isinstance(item, Mapping):
        raise ScriptError("each reply must be a JSON object", index=index)
    if "status" in item:
        retry = item.get("retry_after_s")
        return Fault.status(int(item["status"]), retry_after_s=_number(retry, index))
    if "refusal" in item:
        details = item["refusal"] if isinstance(item["refusal"], Mapping) else {}
        return Reply.refused(
            str(item.get("text", "")),
            category=details.get("category"),
            explanation=details.get("explanation"),
        )
    if "content" in item:
        content = item["content"]
        if not isinstance(content, list):
            raise ScriptError("'content' must be an array", index=index)
        blocks = tuple(_block(index, block) for block in content)
        stop = item.get("stop_reason")
        return Reply(blocks, str(stop) if stop is not None else None)
    if "tool" in item:
        return Reply.tool(str(item["tool"]), _input(index, item), text=str(item.get("text", "")))
    if "text" in item:
        return Reply.text(str(item["text"]))
    raise ScriptError(
        "expected one of 'text', 'tool', 'content', 'refusal' or 'status'", index=index
    )


def _block(index: int, block: Any) -> Item:
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and "thinking" in block:
        return Thinking(str(block["thinking"]))
    if isinstance(block, Mapping) and "tool" in block:
        return ToolCall(str(block["tool"]), _input(index, block))
    raise ScriptError(
        "a content block is a string, {'thinking': …} or {'tool': …, 'input': {…}}", index=index
    )


def _input(index: int, item: Mapping[str, Any]) -> Mapping[str, Any]:
    tool_input = item.get("input", {})
    if not isinstance(tool_input, Mapping):
        raise ScriptError("'input' must be a JSON object", index=index)
    return dict(tool_input)


def _number(value: Any, index: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScriptError("'retry_after_s' must be a number", index=index)
    return float(value)


def echo_reply(request: RecordedRequest) -> Reply:
    """A reply quoting the request's last user text (a script for ``warroom chat`` demos).

    >>> body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    >>> echo_reply(RecordedRequest(b"", body, {})).content
    ('(fake model) You said: hi',)
    """
    said = ""
    for message in reversed(request.messages):
        if message.get("role") == "user":
            said = _last_text(message.get("content"))
            if said:
                break
    return Reply.text(f"(fake model) You said: {said.strip() or '(nothing)'}")


def _last_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = [b.get("text", "") for b in content or () if isinstance(b, Mapping)]
    return str(texts[-1]) if texts else ""


COMPACTION_MARK = "will be compacted"
"""Words of the harness's summary request (``harness/loop/turn.py``, ``SUMMARY_REQUEST``): a
request whose last user text holds them asks for a compaction summary."""


class ScriptPlayer:
    """A script served in order, saying what each request took (``warroom fake-anthropic``).

    Every request takes the next reply, a compaction's summary request too (the harness asks
    for one when the transcript outgrows the context window): ``say`` prints a line for each,
    naming a compaction, so a script's replies are seen to be spent. Once the script ran out
    every request gets ``exhausted``: a permanent 400 saying so, printed once.
    """

    def __init__(self, replies: list[Reply | Fault], say: Callable[[str], None]) -> None:
        self._replies = list(replies)
        self._say = say
        self._served = 0
        self._told = False

    def __call__(self, request: RecordedRequest) -> Reply | Fault:
        """The next reply for ``request``, or the script-ran-out error."""
        total = len(self._replies)
        if self._served >= total:
            if not self._told:
                self._told = True
                self._say(f"the script ran out ({total} replies): answering 400 from now on")
            return exhausted(self._served)
        reply = self._replies[self._served]
        self._served += 1
        what = " (a compaction: the harness asks for a summary)" if is_compaction(request) else ""
        self._say(f"request{what}: reply {self._served} of {total}")
        return reply


def is_compaction(request: RecordedRequest) -> bool:
    """Whether ``request`` is the harness asking for a compaction summary."""
    for message in reversed(request.messages):
        if message.get("role") == "user":
            return COMPACTION_MARK in _last_text(message.get("content"))
    return False
