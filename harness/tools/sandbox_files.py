"""Read, Write and Edit on sandbox paths, through the ``Workspace``.

Same output and error wording as on the virtual mounts. Only ``/workspace`` is
served (``roots``); other absolute paths are a tool error pointing to Bash. As in
Claude Code 2.1.336, an existing file must be read before it is written or edited;
the read-state keeps a fingerprint of the content seen (``ReadRecord.version``) and
of the content a change notice showed (``notified_version``, ``sandbox_changes``).
A file changed since the model read it (by a Bash command, say) is still edited,
with Claude Code's note that it holds changes not in the model's context; Write
replaces it only when the model has seen its current content (read, or shown in a
notice). Files are UTF-8; undecodable bytes are shown as U+FFFD.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass

from harness.errors import WorkspaceRefused
from harness.loop.checkpoint import ReadRecord
from harness.sandbox.workspace import WorkspaceFileNotFound, WorkspaceIsADirectory
from harness.tools import bounds, wording
from harness.tools.contract import ToolContext, ToolOutcome, tool_error
from harness.tools.listing import page
from harness.tools.roots import in_workspace, outside_roots

_BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class ReadWindow:
    """Which part of a file Read shows: ``offset`` (1-based) and ``limit`` lines (None:
    from the top / to the end); ``allow_large`` lifts the 256 KB whole-file cap."""

    offset: int | None = None
    limit: int | None = None
    allow_large: bool = False


def fingerprint(data: bytes) -> int:
    """A version number for sandbox content: 48 bits of its BLAKE2b digest (never 0,
    which means "did not exist")."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=6).digest(), "big") or 1


async def read(path: str, window: ReadWindow, ctx: ToolContext) -> ToolOutcome:
    """Numbered lines of a sandbox file; whole-file reads over 256 KB are refused unless
    ``allow_large``."""
    if not in_workspace(path):
        return tool_error(outside_roots(path, "Read"))
    try:
        data = await ctx.workspace.read_file(path)
    except WorkspaceFileNotFound:
        return ToolOutcome(wording.file_missing(ctx.cwd), is_error=True)
    except WorkspaceIsADirectory:
        return ToolOutcome(is_directory(path), is_error=True)
    except WorkspaceRefused as exc:
        return tool_error(_refused(path, exc))
    if b"\0" in data[:_BINARY_SNIFF_BYTES]:
        return tool_error(binary_file(path))
    whole = window.offset is None and window.limit is None
    if whole and len(data) > bounds.MAX_READ_BYTES and not window.allow_large:
        return ToolOutcome(bounds.file_too_large(len(data)), is_error=True)
    shown = page(data.decode("utf-8", errors="replace"), window.offset, window.limit)
    text = shown.text
    tokens = bounds.estimated_tokens(text)
    if window.allow_large:
        text = bounds.fit_large(text)
    elif tokens > bounds.MAX_READ_TOKENS:
        return tool_error(bounds.too_many_tokens(tokens))
    record = _seen(ctx.read_state.get(path), fingerprint(data))
    return ToolOutcome(text, read_updates={path: record})


async def write(path: str, content: str, ctx: ToolContext) -> ToolOutcome:
    """Create or replace a sandbox file; an existing one only over content the model
    has seen."""
    if not in_workspace(path):
        return tool_error(outside_roots(path, "Write"))
    try:
        before: bytes | None = await ctx.workspace.read_file(path)
    except WorkspaceFileNotFound:
        before = None
    except WorkspaceIsADirectory:
        return ToolOutcome(is_directory(path), is_error=True)
    except WorkspaceRefused as exc:
        return tool_error(_refused(path, exc))
    data = content.encode()
    if before is not None and before != data:
        refusal = _unseen(ctx.read_state.get(path), before)
        if refusal is not None:
            return refusal
        await ctx.workspace.write_file(path, data)
    elif before is None:
        await ctx.workspace.write_file(path, data)
    text = wording.created(path) if before is None else wording.updated(path)
    return ToolOutcome(text, read_updates={path: _written(data)})


async def edit(
    path: str, old_string: str, new_string: str, replace_all: bool, ctx: ToolContext
) -> ToolOutcome:
    """Replace ``old_string`` in a sandbox file read earlier (read, replace, write back)."""
    if not in_workspace(path):
        return tool_error(outside_roots(path, "Edit"))
    try:
        data = await ctx.workspace.read_file(path)
    except WorkspaceFileNotFound:
        if old_string == "":
            data = new_string.encode()
            await ctx.workspace.write_file(path, data)
            return ToolOutcome(wording.updated(path), read_updates={path: _written(data)})
        return tool_error(wording.file_missing(ctx.cwd))
    except WorkspaceIsADirectory:
        return ToolOutcome(is_directory(path), is_error=True)
    except WorkspaceRefused as exc:
        return tool_error(_refused(path, exc))
    content = data.decode("utf-8", errors="replace")
    if old_string == "" and content != "":
        return tool_error(wording.ALREADY_EXISTS)
    record = ctx.read_state.get(path)
    if record is None or record.version == 0:
        return tool_error(wording.NOT_READ)
    count = content.count(old_string) if old_string else 1
    if count == 0:
        return tool_error(wording.string_not_found(old_string))
    if count > 1 and not replace_all:
        return tool_error(wording.ambiguous(count, old_string))
    if old_string == "":
        updated = new_string
    else:
        updated = content.replace(old_string, new_string, -1 if replace_all else 1)
    await ctx.workspace.write_file(path, updated.encode())
    current = record.version == fingerprint(data)
    return ToolOutcome(
        wording.edited(path, replace_all, current=current),
        read_updates={path: _written(updated.encode())},
    )


def _unseen(record: ReadRecord | None, current: bytes) -> ToolOutcome | None:
    """Write's refusal to replace ``current`` when the model has not seen it, or None."""
    if record is None or record.version == 0:
        return tool_error(wording.NOT_READ)
    if fingerprint(current) not in (record.version, record.notified_version):
        return tool_error(
            f"{wording.MODIFIED_SINCE_READ} It was changed in the sandbox after you read it "
            "(by a command, for instance)."
        )
    if not record.full:
        return tool_error(wording.PARTIALLY_READ)
    return None


def _seen(previous: ReadRecord | None, version: int) -> ReadRecord:
    """Any read counts as seeing the file (Claude Code 2.1.336: a later Write is not
    refused after a partial read)."""
    del previous
    return ReadRecord(version=version, full=True, notified_version=version)


def _written(data: bytes) -> ReadRecord:
    version = fingerprint(data)
    return ReadRecord(version=version, full=True, notified_version=version)


def _refused(path: str, exc: WorkspaceRefused) -> str:
    return (
        f"The sandbox refused {path}: {exc.reason}. For a very large file, look at parts of "
        f"it with Bash (`head`, `tail`, `sed -n '100,200p' {path}`) or search it with Grep."
    )


def is_directory(path: str) -> str:
    """Read's error for a directory (Claude Code 2.1.336 passes the system's on, unwrapped)."""
    return f"EISDIR: illegal operation on a directory, read '{path}'"


def binary_file(path: str) -> str:
    """Read's refusal of a binary file (Claude Code 2.1.336).

    >>> binary_file("/workspace/x.dat")[:63]
    'This tool cannot read binary files. The file appears to be a bi'
    """
    ext = posixpath.splitext(path)[1]
    kind = f"a binary {ext} file" if ext else "a binary file"
    return (
        f"This tool cannot read binary files. The file appears to be {kind}. Use a skill for "
        "this file type if one is available, or a shell command or script that can read the "
        "format."
    )
