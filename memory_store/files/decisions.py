"""What each change decides against the file's current row (pure; no I/O).

A decider gets the row as it is inside the change's transaction (None: the path was
never used) and returns a ``Plan`` (new content, or None to delete), an ``Outcome``
that is already true (unchanged), or raises the store error that explains the refusal.
"""

from __future__ import annotations

from memory_store.errors import (
    AmbiguousMatch,
    FileExists,
    FileNotFound,
    FileTooLarge,
    InvalidContent,
    StaleVersion,
    StringNotFound,
)
from memory_store.files.commit import Decide, Outcome, Plan
from memory_store.files.rows import FileRow
from memory_store.files.skills import validate_skill
from memory_store.records import Limits, Namespace, Scope


def check_content(limits: Limits, ns: Namespace, path: str, content: str) -> None:
    """Refuse content the store will not keep.

    Raises:
        InvalidContent: NUL characters or unpaired surrogates (not storable text).
        FileTooLarge: over ``limits.max_file_bytes`` bytes of UTF-8.
        InvalidSkill: a bad ``/<name>/SKILL.md`` in the skills scope.
    """
    try:
        size = len(content.encode())
    except UnicodeEncodeError as exc:
        raise InvalidContent(path, "it is not valid Unicode text (unpaired surrogate)") from exc
    if "\x00" in content:
        raise InvalidContent(path, "it contains NUL characters; store text only")
    if size > limits.max_file_bytes:
        raise FileTooLarge(path, size_bytes=size, limit_bytes=limits.max_file_bytes)
    if ns.scope is Scope.SKILLS:
        validate_skill(path, content)


def to_write(path: str, content: str, expected_version: int | None) -> Decide:
    """``write``: unchanged if equal, else stale-checked create or replace."""

    def decide(row: FileRow | None) -> Plan | Outcome:
        if row is not None and row.content == content:
            return unchanged(row)
        check_expected(path, row, expected_version)
        live = row is not None and not row.deleted
        return Plan("write" if live else "create", content)

    return decide


def to_edit(
    limits: Limits, ns: Namespace, path: str, old: str, new: str, *, replace_all: bool
) -> Decide:
    """``edit``: replace ``old`` by ``new`` in the current content (empty ``old`` creates)."""

    def decide(row: FileRow | None) -> Plan:
        if row is None or row.content is None:
            if old:
                raise FileNotFound(path)
            check_content(limits, ns, path, new)
            return Plan("create", new, replacements=1)
        count = count_matches(path, row, old, replace_all=replace_all)
        content = row.content.replace(old, new, -1 if replace_all else 1)
        check_content(limits, ns, path, content)
        return Plan("edit", content, replacements=count)

    return decide


def to_delete(path: str, expected_version: int | None) -> Decide:
    """``delete``: a tombstone for a live file at the expected version."""

    def decide(row: FileRow | None) -> Plan:
        if row is None or row.deleted:
            raise FileNotFound(path)
        check_expected(path, row, expected_version)
        return Plan("delete", None)

    return decide


def to_restore(content: str) -> Decide:
    """``restore``: make ``content`` current again, unless it already is."""

    def decide(row: FileRow | None) -> Plan | Outcome:
        if row is not None and row.content == content:
            return unchanged(row)
        return Plan("restore", content)

    return decide


def check_expected(path: str, row: FileRow | None, expected_version: int | None) -> None:
    """Raise StaleVersion unless the file is at ``expected_version`` (None: anything goes)."""
    if expected_version is None:
        return
    current = 0 if row is None or row.deleted else row.version
    if current != expected_version:
        raise StaleVersion(
            path,
            expected_version=expected_version,
            current_version=current,
            changed_by_session=None if row is None else row.session_id,
            changed_by_actor=None if row is None else row.actor,
        )


def count_matches(path: str, row: FileRow, old: str, *, replace_all: bool) -> int:
    """How many times ``old`` occurs in the live ``row``; raise when the edit cannot apply."""
    content = row.content or ""
    if not old:
        if content:
            raise FileExists(path, current_version=row.version)
        return 1
    count = content.count(old)
    if count == 0:
        raise StringNotFound(path, current_version=row.version)
    if count > 1 and not replace_all:
        raise AmbiguousMatch(path, count=count, current_version=row.version)
    return count


def unchanged(row: FileRow) -> Outcome:
    """The outcome of a change that found its content already current."""
    return Outcome(
        path=row.path,
        version=row.version,
        base_version=row.version,
        operation="write",
        content=row.content,
        replacements=None,
        created=False,
        unchanged=True,
    )
