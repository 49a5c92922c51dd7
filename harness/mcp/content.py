"""What the ``mcp`` SDK hands back, read for the harness: a tool result as text, and whether an
exception means the connection (not the tool) failed."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from mcp_types.jsonrpc import CONNECTION_CLOSED, INVALID_REQUEST

MAX_RESULT_CHARS = 16_000_000  # a hard cap in memory; the tool runner keeps big results in a file
# Transport failures the SDK and its HTTP client raise when the other end is gone.
_LOST = {
    "ClosedResourceError",
    "BrokenResourceError",
    "EndOfStream",
    "ConnectionError",
    "BrokenPipeError",
    "ConnectError",
    "ReadError",
    "RemoteProtocolError",
}


def result_text(content: Sequence[Any], structured: Any) -> str:
    """A tool result's content blocks as text: text as is, images and audio described,
    resources by their text or URI; the structured content as JSON when there is no block."""
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS]


def connection_lost(exc: BaseException) -> bool:
    """Whether the connection (not the tool) failed: the SDK's ``CONNECTION_CLOSED`` error,
    a transport error anywhere in the chain, or an HTTP server that no longer knows the
    session (the SDK's "Session terminated" for a 404 on a request carrying one)."""
    for e in chain(exc):
        error = getattr(e, "error", None)
        code, message = getattr(error, "code", None), str(getattr(error, "message", ""))
        # The SDK's own errors (a server may send -32000 for its own reasons too): the
        # connection closed, or an HTTP server answered 404 to our session id.
        if code == CONNECTION_CLOSED and "closed" in message.lower():
            return True
        if code == INVALID_REQUEST and message == "Session terminated":
            return True
    return bool({type(e).__name__ for e in chain(exc)} & _LOST)


def chain(exc: BaseException) -> list[BaseException]:
    """``exc``, the members of exception groups and the causes, depth first."""
    seen = [exc]
    with contextlib.suppress(Exception):
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                seen.extend(chain(inner))
        if exc.__cause__ is not None:
            seen.extend(chain(exc.__cause__))
    return seen


def reason(exc: BaseException) -> str:
    """A one-line reason from the innermost exception of ``exc``, at most 300 characters."""
    leaves = [e for e in chain(exc) if not isinstance(e, BaseExceptionGroup)]
    leaf = leaves[-1] if leaves else exc
    return f"{type(leaf).__name__}: {leaf}"[:300]
