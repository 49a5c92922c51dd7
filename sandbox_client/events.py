"""The NDJSON events of a streamed ``exec`` reply, read with a bounded line length.

Shape (Blaxel's ``handleExecuteCommandStream``): one JSON object per line,
``{"type": "stdout"|"stderr"|"keepalive"|"error"|"result", "data": …}``; ``data`` is
absent for keepalives, and for ``result`` it is the process record as a JSON string.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class StreamEvent:
    """One event; ``type`` is ``"oversized"`` for a line dropped for its length."""

    type: str
    data: str = ""


def parse_event(line: bytes) -> StreamEvent | None:
    """The event on ``line``; None for a blank or unreadable line."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return None
    data = raw.get("data")
    return StreamEvent(raw["type"], data if isinstance(data, str) else "")


async def read_events(
    chunks: AsyncIterator[bytes], max_line_bytes: int
) -> AsyncIterator[StreamEvent]:
    """Split ``chunks`` into events; a line over ``max_line_bytes`` is dropped, not held.

    Memory stays under about ``max_line_bytes`` plus one chunk whatever the sender does.
    """
    buffer = bytearray()
    dropping = False
    async for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if dropping:
                dropping = False
                yield StreamEvent("oversized")
            else:
                buffer += chunk[start:end]
                event = parse_event(bytes(buffer))
                if event is not None:
                    yield event
            buffer.clear()
            start = end + 1
        if not dropping:
            buffer += chunk[start:]
            if len(buffer) > max_line_bytes:
                buffer.clear()
                dropping = True
    if buffer and not dropping and (event := parse_event(bytes(buffer))) is not None:
        yield event
