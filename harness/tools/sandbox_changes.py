"""Change notices for sandbox files: files the model read that a command changed since.

Claude Code 2.1.336 tells the model, in a ``<system-reminder>`` after the result of the
call that changed them, which files it had read changed on disk, with their new lines
numbered as Read shows them; the model may then Write over them without reading them
again. Warroom does the same after each Bash call: the read sandbox files (at most
``MAX_CHECKED_FILES``, the latest read) are fingerprinted in the sandbox by one ``b2sum``
(the same BLAKE2b-48 as ``sandbox_files.fingerprint``; each file read instead where
``b2sum`` is missing) and compared with what the model saw; only changed files are
read. A change shown in full marks the file as seen (``ReadRecord.notified_version``);
one too long to show makes the model read it again (``version`` 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from shlex import quote

from harness.errors import WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused
from harness.loop.checkpoint import ReadRecord
from harness.loop.prompt import reminder
from harness.sandbox.workspace import Workspace
from harness.tools.listing import page
from harness.tools.roots import in_workspace
from harness.tools.sandbox_files import fingerprint
from harness.tools.wording import CHANGE_NOTICE_TAIL, RELEVANT_CHANGES

MAX_CHECKED_FILES = 20
FINGERPRINT_TIMEOUT_S = 30.0
MAX_SHOWN_LINES = 200
MAX_SHOWN_CHARS = 20_000


async def sandbox_changes(
    workspace: Workspace, read_state: Mapping[str, ReadRecord], name: str
) -> tuple[str, dict[str, ReadRecord]]:
    """The notices (one ``<system-reminder>`` each, joined; "" when nothing changed) and
    the read-state updates that mark them told. ``name``: the sandbox process name of the
    fingerprinting command (idempotent, like every ``exec``).

    Raises:
        WorkspaceUnavailable: the sandbox could not be reached (the step is retried).
    """
    paths = [p for p, r in read_state.items() if in_workspace(p) and r.version != 0]
    paths = paths[-MAX_CHECKED_FILES:]
    if not paths:
        return "", {}
    current = await _fingerprints(workspace, paths, name)
    texts: list[str] = []
    updates: dict[str, ReadRecord] = {}
    for path in paths:
        record, version = read_state[path], current.get(path)
        if version is None or version in (record.version, record.notified_version):
            continue  # unchanged, or deleted (not announced; Write may create it again)
        data = await _read(workspace, path)
        if data is None:
            continue
        text, shown = notice(path, data.decode("utf-8", errors="replace"))
        texts.append(reminder(text))
        version = fingerprint(data)
        if shown:
            updates[path] = ReadRecord(record.version, record.full, notified_version=version)
        else:
            updates[path] = ReadRecord(0, False, notified_version=version)
    return "\n\n".join(texts), updates


async def _fingerprints(workspace: Workspace, paths: list[str], name: str) -> dict[str, int]:
    """Path → ``fingerprint`` of each file that exists, from one ``b2sum -z`` in the
    sandbox (NUL-terminated records, so any file name parses), else by reading each."""
    command = "b2sum -l 48 -z -- " + " ".join(quote(p) for p in paths) + " 2>/dev/null"
    result = await workspace.exec(name, command, timeout_s=FINGERPRINT_TIMEOUT_S)
    if result.exit_code in (0, 1):
        found = {}
        for record in result.stdout.split("\0"):
            digest, sep, path = record.partition("  ")
            if sep:
                found[path] = int(digest, 16) or 1
        return found
    found = {}
    for path in paths:  # no b2sum in this sandbox's image
        data = await _read(workspace, path)
        if data is not None:
            found[path] = fingerprint(data)
    return found


async def _read(workspace: Workspace, path: str) -> bytes | None:
    try:
        return await workspace.read_file(path)
    except (WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused):
        return None


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
