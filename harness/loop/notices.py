"""Per-step change notices: files this session read that someone else changed since.

Before each model call the harness asks the store, in one ``changed_since`` call,
which of the session's read virtual files moved on, and tells the model about each
change once, with a numbered diff, inside ``<system-reminder>`` (docs/architecture.md §6.5,
docs/tools.md "Errors and notices"), in Claude Code 2.1.336's sentence and with its
numbering (the new lines around each change, as Read numbers them). As in Claude Code,
a notice counts as seeing the change: Write may then replace the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from harness.loop.checkpoint import Checkpoint, ReadRecord
from harness.loop.prompt import reminder
from harness.tools.contract import namespace_for
from harness.tools.diff import changed_lines
from harness.tools.wording import CHANGE_NOTICE_TAIL, RELEVANT_CHANGES, author
from harness.vfs import PathError, resolve
from memory_store import Change, FileKey, FileStore, InvalidPath, Namespace


async def change_notices(
    store: FileStore, checkpoint: Checkpoint
) -> tuple[list[str], dict[str, ReadRecord]]:
    """Notices for changes not told yet, and the read-state updates that mark them told.

    Returns:
        (texts, updates): one ``<system-reminder>`` text per changed file, in
        read-state order; ``updates`` maps the virtual path (``/memory/x.md``) to its
        new ``ReadRecord`` (``notified_version`` raised; a deleted file's ``version``
        becomes 0 so a later Write may create it again).

    Raises:
        memory_store.DatabaseUnavailable: the store could not be read.
    """
    keys = _keys(checkpoint)
    if not keys:
        return [], {}
    seen = {key: checkpoint.read_state[shown].version for shown, key in keys.items()}
    changes = await store.changed_since(seen)
    shown_of = {key: shown for shown, key in keys.items()}
    texts: list[str] = []
    updates: dict[str, ReadRecord] = {}
    for change in changes:
        shown = shown_of[change.key]
        record = checkpoint.read_state[shown]
        if change.version <= record.notified_version:
            continue
        texts.append(reminder(await _describe(store, change, shown, record, checkpoint)))
        updates[shown] = _told(record, change)
    return texts, updates


async def contents_at(
    store: FileStore, ns: Namespace, path: str, versions: tuple[int, int]
) -> tuple[str | None, str | None]:
    """The content of two versions of a file, read by version (not the whole history).

    Version 0 (did not exist) reads as ""; an unknown version or a deletion as None.
    """
    try:
        found = await store.contents_at(ns, path, [v for v in versions if v > 0])
    except InvalidPath:
        found = {}
    found[0] = ""
    return found.get(versions[0]), found.get(versions[1])


def _keys(checkpoint: Checkpoint) -> Mapping[str, FileKey]:
    """Read-state path → store key, for the virtual paths only."""
    keys: dict[str, FileKey] = {}
    for shown in checkpoint.read_state:
        try:
            where = resolve(shown)
        except PathError:
            continue
        if where.is_virtual and where.path != "/":
            ns = namespace_for(where.mount, checkpoint.org_id, checkpoint.channel_id)
            keys[shown] = FileKey(ns, where.path)
    return keys


def _told(record: ReadRecord, change: Change) -> ReadRecord:
    if change.deleted:
        return ReadRecord(version=0, full=True, notified_version=change.version)
    return replace(record, notified_version=change.version)


async def _describe(
    store: FileStore, change: Change, shown: str, record: ReadRecord, checkpoint: Checkpoint
) -> str:
    who = author(change.actor, change.session_id, checkpoint.session_id)
    if change.deleted:
        return (
            f"Note: {shown} was deleted by {who} after you read it. This was intentional; do "
            "not recreate it unless the user asks you to."
        )
    base = max(record.version, record.notified_version)
    key = change.key
    before, after = await contents_at(store, key.ns, key.path, (base, change.version))
    head = (
        f"Note: {shown} was changed by {who} since you last read it (version {base} → "
        f"{change.version}). {CHANGE_NOTICE_TAIL}"
    )
    shown_lines = changed_lines(before, after) if before is not None and after is not None else ""
    if not shown_lines:
        return head + " Read the file to see the current content."
    return f"{head} {RELEVANT_CHANGES}\n{shown_lines}"
