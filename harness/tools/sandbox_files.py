"""Read, Write and Edit on sandbox paths, through the ``Workspace``.

Same output and error wording as on the virtual mounts. Only ``/workspace`` is
served (``roots``); other absolute paths are a tool error pointing to Bash. As in
Claude Code, an existing file must be read before it is written or edited, and a
file changed since (by a Bash command, say) must be read again: the read-state
keeps a fingerprint of the content seen (``ReadRecord.version``). Files are UTF-8;
undecodable bytes are shown as U+FFFD.
"""

from __future__ import annotations

import hashlib

from harness.errors import WorkspaceRefused
from harness.loop.checkpoint import ReadRecord
from harness.sandbox.workspace import WorkspaceFileNotFound, WorkspaceIsADirectory
from harness.tools import bounds, wording
from harness.tools.contract import ToolContext, ToolOutcome, tool_error
from harness.tools.listing import page
from harness.tools.roots import in_workspace, outside_roots

_BINARY_SNIFF_BYTES = 8192


def fingerprint(data: bytes) -> int:
    """A version number for sandbox content: 48 bits of its BLAKE2b digest (never 0,
    which means "did not exist")."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=6).digest(), "big") or 1


async def read(path: str, offset: int | None, limit: int | None, ctx: ToolContext) -> ToolOutcome:
    """Numbered lines of a sandbox file; whole-file reads over 256 KB are refused."""
    if not in_workspace(path):
        return tool_error(outside_roots(path, "Read"))
    try:
        data = await ctx.workspace.read_file(path)
    except WorkspaceFileNotFound:
        return tool_error(wording.FILE_MISSING)
    except WorkspaceIsADirectory:
        return tool_error(_is_directory(path))
    except WorkspaceRefused as exc:
        return tool_error(_refused(path, exc))
    if b"\0" in data[:_BINARY_SNIFF_BYTES]:
        return tool_error(
            f"This tool cannot read binary files: {path} looks binary. Inspect it with Bash "
            "(for example `file`, `head -c`, `xxd`)."
        )
    if offset is None and limit is None and len(data) > bounds.MAX_READ_BYTES:
        return tool_error(bounds.file_too_large(len(data)))
    window = page(data.decode("utf-8", errors="replace"), offset, limit)
    tokens = bounds.estimated_tokens(window.text)
    if tokens > bounds.MAX_READ_TOKENS:
        return tool_error(bounds.too_many_tokens(tokens))
    record = _seen(ctx.read_state.get(path), fingerprint(data), window.full)
    return ToolOutcome(window.text, read_updates={path: record})


async def write(path: str, content: str, ctx: ToolContext) -> ToolOutcome:
    """Create or replace a sandbox file; an existing one only after a full Read of it."""
    if not in_workspace(path):
        return tool_error(outside_roots(path, "Write"))
    try:
        before: bytes | None = await ctx.workspace.read_file(path)
    except WorkspaceFileNotFound:
        before = None
    except WorkspaceIsADirectory:
        return tool_error(_is_directory(path))
    except WorkspaceRefused as exc:
        return tool_error(_refused(path, exc))
    data = content.encode()
    if before == data:
        return ToolOutcome(wording.unchanged(path), read_updates={path: _written(data)})
    if before is not None:
        refusal = _stale(ctx.read_state.get(path), before, whole=True)
        if refusal is not None:
            return refusal
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
            return ToolOutcome(wording.created(path), read_updates={path: _written(data)})
        return tool_error(wording.FILE_MISSING)
    except WorkspaceIsADirectory:
        return tool_error(_is_directory(path))
    except WorkspaceRefused as exc:
        return tool_error(_refused(path, exc))
    content = data.decode("utf-8", errors="replace")
    if old_string == "" and content != "":
        return tool_error(wording.ALREADY_EXISTS)
    refusal = _stale(ctx.read_state.get(path), data, whole=False)
    if refusal is not None:
        return refusal
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
    return ToolOutcome(
        wording.edited(path, replace_all), read_updates={path: _written(updated.encode())}
    )


def _stale(record: ReadRecord | None, current: bytes, *, whole: bool) -> ToolOutcome | None:
    """The refusal for writing over ``current`` with what this session has seen, or None."""
    if record is None or record.version == 0:
        return tool_error(wording.NOT_READ)
    if record.version != fingerprint(current):
        return tool_error(
            f"{wording.MODIFIED_SINCE_READ} It was changed in the sandbox after you read it "
            "(by a command, for instance)."
        )
    if whole and not record.full:
        return tool_error(wording.PARTIALLY_READ)
    return None


def _seen(previous: ReadRecord | None, version: int, full: bool) -> ReadRecord:
    if previous is not None and previous.version == version and previous.full:
        full = True
    return ReadRecord(version=version, full=full, notified_version=version)


def _written(data: bytes) -> ReadRecord:
    version = fingerprint(data)
    return ReadRecord(version=version, full=True, notified_version=version)


def _refused(path: str, exc: WorkspaceRefused) -> str:
    return (
        f"The sandbox refused {path}: {exc.reason}. For a very large file, look at parts of "
        f"it with Bash (`head`, `tail`, `sed -n '100,200p' {path}`) or search it with Grep."
    )


def _is_directory(path: str) -> str:
    return (
        f"{path} is a directory, not a file. List it with Bash (`ls {path}`) or find files in "
        "it with Glob."
    )
