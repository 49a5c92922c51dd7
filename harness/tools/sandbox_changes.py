"""Change notices for sandbox files: files the model read that a command changed since.

Claude Code 2.1.336 tells the model, in a ``<system-reminder>`` after the result of the
call that changed them, which files it had read changed on disk, with their new lines
numbered as Read shows them; the model may then Write over them without reading them
again. Warroom does the same after each Bash call: the read sandbox files (at most
``MAX_CHECKED_FILES``, the latest read) are fetched and compared with the fingerprint
of what the model saw. A change shown in full marks the file as seen
(``ReadRecord.notified_version``); one too long to show makes the model read it again
(``version`` 0).
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.errors import WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused
from harness.loop.checkpoint import ReadRecord
from harness.loop.prompt import reminder
from harness.sandbox.workspace import Workspace
from harness.tools.listing import page
from harness.tools.roots import in_workspace
from harness.tools.sandbox_files import fingerprint
from harness.tools.wording import CHANGE_NOTICE_TAIL, RELEVANT_CHANGES

MAX_CHECKED_FILES = 20
MAX_SHOWN_LINES = 200
MAX_SHOWN_CHARS = 20_000


async def sandbox_changes(
    workspace: Workspace, read_state: Mapping[str, ReadRecord]
) -> tuple[str, dict[str, ReadRecord]]:
    """The notices (one ``<system-reminder>`` each, joined; "" when nothing changed) and
    the read-state updates that mark them told.

    Raises:
        WorkspaceUnavailable: the sandbox could not be reached (the step is retried).
    """
    paths = [p for p, r in read_state.items() if in_workspace(p) and r.version != 0]
    texts: list[str] = []
    updates: dict[str, ReadRecord] = {}
    for path in paths[-MAX_CHECKED_FILES:]:
        record = read_state[path]
        try:
            data = await workspace.read_file(path)
        except (WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused):
            continue  # a deleted file is not announced; Write may create it again
        version = fingerprint(data)
        if version in (record.version, record.notified_version):
            continue
        text, shown = notice(path, data.decode("utf-8", errors="replace"))
        texts.append(reminder(text))
        if shown:
            updates[path] = ReadRecord(record.version, record.full, notified_version=version)
        else:
            updates[path] = ReadRecord(0, False, notified_version=version)
    return "\n\n".join(texts), updates


def notice(path: str, content: str) -> tuple[str, bool]:
    """The notice for ``path`` now holding ``content`` (Claude Code 2.1.336's sentence),
    and whether the content is shown in full.

    >>> notice("/workspace/a", "one\\ntwo")[0].endswith("numbers):\\n1\\tone\\n2\\ttwo")
    True
    """
    head = f"Note: {path} changed on disk since you last read it. {CHANGE_NOTICE_TAIL}"
    lines = content.removesuffix("\n")
    if lines.count("\n") >= MAX_SHOWN_LINES or len(lines) > MAX_SHOWN_CHARS:
        return f"{head} It is too long to show here: Read it before changing it.", False
    shown = page(lines, None, None).text if lines else "(the file is now empty)"
    return f"{head} {RELEVANT_CHANGES}\n{shown}", True
