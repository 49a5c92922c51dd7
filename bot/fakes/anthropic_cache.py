"""The fake Messages API's model of prompt caching, with the real API's limits.

Anthropic's "Prompt caching" page: the prompt is read in the order tools, system,
messages; a block carrying ``cache_control`` is a breakpoint; a request reads the
longest prefix an earlier request wrote, where the API checks for a hit at the
breakpoint and at most about 20 blocks before it (the look-back); a prefix shorter
than the model's minimum cacheable length is neither written nor read; entries are
per model. Tokens are estimated at 4 bytes of canonical JSON a token.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

LOOKBACK_BLOCKS = 20  # prompt-caching docs: hits are checked ~20 blocks before a breakpoint
BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class CacheUsage:
    """Prompt tokens split the way the API reports them."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int

    def total(self) -> int:
        """Every prompt token, cached or not."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens


@dataclass
class PromptCache:
    """Prefix digests written at breakpoints by earlier requests."""

    written: set[bytes] = field(default_factory=set)

    def account(self, body: Mapping[str, Any], min_tokens: int) -> CacheUsage:
        """Split this prompt's tokens into uncached, read and written; remember its prefixes."""
        digests, totals, breakpoints = prefixes(body)
        total = totals[-1] if totals else 0
        read_at = -1
        for bp in breakpoints:
            for i in range(bp, max(-1, bp - LOOKBACK_BLOCKS - 1), -1):
                if digests[i] in self.written and i > read_at:
                    read_at = i
                    break
        read = totals[read_at] if read_at >= 0 else 0
        writes = [bp for bp in breakpoints if totals[bp] >= min_tokens and bp > read_at]
        self.written.update(digests[bp] for bp in breakpoints if totals[bp] >= min_tokens)
        created = totals[writes[-1]] - read if writes else 0
        return CacheUsage(total - read - created, read, created)


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """The estimated prompt size of ``body``, in tokens."""
    return sum(tokens(segment) for segment, _ in _segments(body))


def prefixes(body: Mapping[str, Any]) -> tuple[list[bytes], list[int], list[int]]:
    """Per segment: the digest of the prompt up to it and its cumulative tokens; breakpoints."""
    running = hashlib.sha256(str(body.get("model", "")).encode())
    digests: list[bytes] = []
    totals: list[int] = []
    breakpoints: list[int] = []
    for index, (segment, is_breakpoint) in enumerate(_segments(body)):
        running.update(hashlib.sha256(segment).digest())
        digests.append(running.copy().digest())
        totals.append((totals[-1] if totals else 0) + tokens(segment))
        if is_breakpoint:
            breakpoints.append(index)
    return digests, totals, breakpoints


def tokens(data: bytes) -> int:
    """Estimated tokens of ``data`` (at least 1)."""
    return max(1, len(data) // BYTES_PER_TOKEN)


def _segments(body: Mapping[str, Any]) -> Iterator[tuple[bytes, bool]]:
    """The prompt in cache order: (segment bytes without cache_control, is a breakpoint).

    A tool with ``defer_loading`` is not in the prompt; a ``tool_reference`` in a tool
    result puts its definition there, at that point of the conversation (tool search docs).
    """
    system = body.get("system", [])
    system_blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    deferred = {str(t.get("name")): t for t in tools if t.get("defer_loading") is True}
    for part in [*(t for t in tools if t.get("name") not in deferred), *(system_blocks or [])]:
        yield _segment("", part)
    for message in body.get("messages", []):
        content = message.get("content", [])
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            yield _segment(str(message.get("role")), _expanded(block, deferred))


def _expanded(block: Mapping[str, Any], deferred: Mapping[str, Any]) -> Mapping[str, Any]:
    content = block.get("content") if block.get("type") == "tool_result" else None
    if not isinstance(content, list):
        return block
    loaded = [
        deferred.get(str(c.get("tool_name")), c) if c.get("type") == "tool_reference" else c
        for c in content
        if isinstance(c, dict)
    ]
    return {**block, "content": loaded}


def _segment(role: str, part: Mapping[str, Any]) -> tuple[bytes, bool]:
    bare = {k: v for k, v in part.items() if k != "cache_control"}
    return (role + json.dumps(bare, sort_keys=True)).encode(), "cache_control" in part
