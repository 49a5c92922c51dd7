"""SBX/1 wire shapes → typed records (pure functions, no I/O).

The shapes are Blaxel's sandbox API (``blaxel-ai/sandbox``, ``sandbox-api/src/handler``):
a process record has ``pid`` as a string, times as RFC 1123 (``Mon, 02 Jan 2006
15:04:05 GMT``), ``completedAt`` empty or null while running, and ``exitCode`` 0 while
running. A directory listing is ``{"path", "files": [...], "subdirectories": [...]}``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from sandbox_client.records import DirEntry, ProcessRecord, ProcessStatus


class ShapeError(ValueError):
    """A reply that does not have the SBX/1 shape; the message says which part."""


def parse_time(value: object) -> datetime | None:
    """An aware UTC datetime from RFC 1123 or ISO 8601 text; None when empty or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


MARKER_SLACK_CHARS = 64
"""Room for the server's own ``[... N bytes omitted ...]`` line: a server that kept its
``max_output_bytes`` of head and tail sends that much text plus its marker, which the
client must pass on, not cut again (cutting it lost how much the command printed)."""


def cap_text(text: str, max_chars: int) -> str:
    r"""``text`` cut to about ``max_chars`` (plus ``MARKER_SLACK_CHARS``): head and tail kept,
    a marker line between.

    >>> cap_text("a" * 10 + "\n[... 99 bytes omitted ...]\n" + "b" * 10, 20)[10:]
    '\n[... 99 bytes omitted ...]\nbbbbbbbbbb'
    >>> cap_text("a" * 100 + "b" * 100, 20)
    'aaaaaaaaaa\n[... 180 characters omitted ...]\nbbbbbbbbbb'
    """
    if len(text) <= max_chars + MARKER_SLACK_CHARS:
        return text
    half = max_chars // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[... {omitted} characters omitted ...]\n{text[len(text) - half :]}"


def parse_process(data: Any, *, max_chars: int) -> ProcessRecord:
    """A ``ProcessRecord`` from a process record object.

    Raises:
        ShapeError: not an object, or no ``name``/``status`` a client can use.
    """
    if not isinstance(data, dict):
        raise ShapeError("a process record must be a JSON object")
    try:
        status = ProcessStatus(str(data.get("status", "")).lower())
    except ValueError as exc:
        raise ShapeError(f"unknown process status {data.get('status')!r}") from exc
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ShapeError("a process record needs a name")
    return ProcessRecord(
        name=name,
        command=str(data.get("command") or ""),
        status=status,
        exit_code=_exit_code(data.get("exitCode"), status),
        stdout=cap_text(str(data.get("stdout") or ""), max_chars),
        stderr=cap_text(str(data.get("stderr") or ""), max_chars),
        logs=cap_text(str(data.get("logs") or ""), max_chars),
        pid=_int_or_none(data.get("pid")),
        working_dir=str(data.get("workingDir") or ""),
        started_at=parse_time(data.get("startedAt")),
        completed_at=parse_time(data.get("completedAt")),
    )


def _exit_code(value: object, status: ProcessStatus) -> int | None:
    if status is ProcessStatus.RUNNING:
        return None
    return _int_or_none(value)


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def is_listing(data: Any) -> bool:
    """True when ``data`` is a directory listing rather than a file object."""
    return isinstance(data, dict) and ("subdirectories" in data or "files" in data)


def parse_listing(data: Any) -> tuple[DirEntry, ...]:
    """The entries of a directory listing: subdirectories first, then files.

    Raises:
        ShapeError: not a listing.
    """
    if not is_listing(data):
        raise ShapeError("a directory listing needs 'files' or 'subdirectories'")
    entries = [_entry(item, is_dir=True) for item in data.get("subdirectories") or []]
    entries += [_entry(item, is_dir=False) for item in data.get("files") or []]
    return tuple(entries)


def _entry(item: Any, *, is_dir: bool) -> DirEntry:
    if not isinstance(item, dict) or not isinstance(item.get("path"), str):
        raise ShapeError("a listing entry needs a string 'path'")
    path: str = item["path"]
    name = item.get("name") or path.rstrip("/").rsplit("/", 1)[-1]
    size = None if is_dir else _int_or_none(item.get("size"))
    return DirEntry(path=path, name=str(name), is_dir=is_dir, size_bytes=size)


def error_message(body: bytes) -> str:
    """The ``error`` text of an SBX/1 error body, or the body itself (cut to 500 chars)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:500].decode("utf-8", "replace")
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])
    return body[:500].decode("utf-8", "replace")
