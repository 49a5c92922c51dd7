"""Read, Write and Edit on sandbox paths, through the ``Workspace``.

Same output and error wording as on the virtual mounts. There is no read-before-write
check here: the sandbox belongs to this session alone, so no other writer can be
overwritten. Files are UTF-8; undecodable bytes are shown as U+FFFD.
"""

from __future__ import annotations

from harness.sandbox.workspace import Workspace, WorkspaceFileNotFound, WorkspaceIsADirectory
from harness.tools import wording
from harness.tools.contract import ToolOutcome, tool_error
from harness.tools.listing import page

_BINARY_SNIFF_BYTES = 8192


async def read(path: str, offset: int | None, limit: int | None, ws: Workspace) -> ToolOutcome:
    """Numbered lines of a sandbox file."""
    try:
        data = await ws.read_file(path)
    except WorkspaceFileNotFound:
        return tool_error(wording.FILE_MISSING)
    except WorkspaceIsADirectory:
        return tool_error(_is_directory(path))
    if b"\0" in data[:_BINARY_SNIFF_BYTES]:
        return tool_error(
            f"This tool cannot read binary files: {path} looks binary. Inspect it with Bash "
            "(for example `file`, `head -c`, `xxd`)."
        )
    return ToolOutcome(page(data.decode("utf-8", errors="replace"), offset, limit).text)


async def write(path: str, content: str, ws: Workspace) -> ToolOutcome:
    """Create or replace a sandbox file."""
    try:
        before: bytes | None = await ws.read_file(path)
    except WorkspaceFileNotFound:
        before = None
    except WorkspaceIsADirectory:
        return tool_error(_is_directory(path))
    data = content.encode()
    if before == data:
        return ToolOutcome(wording.unchanged(path))
    await ws.write_file(path, data)
    if before is None:
        return ToolOutcome(wording.created(path))
    return ToolOutcome(wording.updated(path))


async def edit(
    path: str, old_string: str, new_string: str, replace_all: bool, ws: Workspace
) -> ToolOutcome:
    """Replace ``old_string`` in a sandbox file (read, replace in memory, write back)."""
    try:
        content = (await ws.read_file(path)).decode("utf-8", errors="replace")
    except WorkspaceFileNotFound:
        if old_string == "":
            await ws.write_file(path, new_string.encode())
            return ToolOutcome(wording.created(path))
        return tool_error(wording.FILE_MISSING)
    except WorkspaceIsADirectory:
        return tool_error(_is_directory(path))
    if old_string == "" and content != "":
        return tool_error(wording.ALREADY_EXISTS)
    count = content.count(old_string) if old_string else 1
    if count == 0:
        return tool_error(wording.string_not_found(old_string))
    if count > 1 and not replace_all:
        return tool_error(wording.ambiguous(count, old_string))
    if old_string == "":
        updated = new_string
    else:
        updated = content.replace(old_string, new_string, -1 if replace_all else 1)
    await ws.write_file(path, updated.encode())
    return ToolOutcome(wording.edited(path, old_string, new_string, replace_all, updated))


def _is_directory(path: str) -> str:
    return (
        f"{path} is a directory, not a file. List it with Bash (`ls {path}`) or find files in "
        "it with Glob."
    )
