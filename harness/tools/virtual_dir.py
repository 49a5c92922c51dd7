"""Read on a virtual directory: its entries, one level, directories first.

Claude Code's Read refuses directories and points to ``ls``; on the virtual mounts
``ls`` is unavailable (Bash cannot see them), so listing is the useful answer
(docs/tools.md, Read).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from harness.tools import wording
from harness.tools.contract import ToolOutcome
from harness.vfs import Resolved
from memory_store import Entry, FileStore, Namespace


async def list_directory(
    store: FileStore,
    ns: Namespace,
    where: Resolved,
    generated: Sequence[str] = (),
    *,
    missing: str = wording.FILE_MISSING,
    shown: str | None = None,
) -> ToolOutcome:
    """The entries under ``where``; ``missing`` (an error, unwrapped as Claude Code gives
    Read's) when it holds nothing.

    A mount root always exists, so an empty root is reported as empty. ``generated``:
    names of files made on each read (``timeline.md``), listed after the stored ones.
    ``shown``: the directory as the model named it, when not ``where.display()`` (a past
    incident's notes under ``/incidents``).
    """
    entries = await store.listdir(ns, where.path)
    shown = shown or where.display()
    count = len(entries) + len(generated)
    if not count:
        if where.path != "/":
            return ToolOutcome(missing, is_error=True)
        return ToolOutcome(f"{shown}/ is an empty directory.")
    noun = "entry" if count == 1 else "entries"
    lines = [f"{shown.rstrip('/')}/ is a directory with {count} {noun}:"]
    lines += [_line(e) for e in entries]
    lines += [
        f"- {name} (generated from the event log on each read; read-only)" for name in generated
    ]
    return ToolOutcome("\n".join(lines))


def _line(entry: Entry) -> str:
    name = posixpath.basename(entry.path)
    if entry.is_dir:
        return f"- {name}/"
    details = [f"{entry.size_bytes} bytes"] if entry.size_bytes is not None else []
    if entry.updated_at is not None:
        details.append(f"updated {entry.updated_at:%Y-%m-%d %H:%M} UTC")
    return f"- {name}" + (f" ({', '.join(details)})" if details else "")
