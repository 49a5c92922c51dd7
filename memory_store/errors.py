"""Errors raised by ``memory_store``.

Every error carries fields, not prose to parse; the harness maps them to the
model-facing wording of Claude Code's tools. The tree::

    StoreError
    ├── FileNotFound            path does not exist (or is deleted)
    │   └── VersionNotFound     restore named a version that has no content
    ├── StaleVersion            conditional write/delete lost the race (carries current version)
    ├── InvalidPath             not absolute, control characters, escapes the scope root, …
    │   └── CaseConflict        differs from an existing path only by letter case
    ├── FileTooLarge            content over the per-file cap
    ├── QuotaExceeded           the org is over its file-count or byte quota
    ├── SearchTimeout           a grep ran past its time budget
    ├── InvalidSkill            a SKILL.md with bad frontmatter (carries the problems)
    ├── InvalidContent          content that is not storable text (NUL, lone surrogates)
    ├── EditFailed              an edit that cannot apply to the current content
    │   ├── NoChange            old_string == new_string
    │   ├── StringNotFound      old_string does not occur in the current content
    │   ├── AmbiguousMatch      old_string occurs ``count`` times and replace_all is false
    │   └── FileExists          empty old_string ("create") on a non-empty file
    ├── SessionNotFound         no session with that id
    ├── Fenced                  a claim's epoch is no longer current (another worker, stop, sweeper)
    ├── PostNotFound            no Slack post intent with that key
    └── DatabaseUnavailable     the database could not be reached or timed out (retryable)
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error ``memory_store`` raises on purpose."""


class FileNotFound(StoreError):
    """The file does not exist in its namespace (never created, or deleted)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"file not found: {path}")
        self.path = path


class StaleVersion(StoreError):
    """A conditional change named a version that is no longer current.

    Attributes:
        expected_version: the version the caller said it had (0 = "must not exist").
        current_version: the version now stored (0 when the file does not exist).
        changed_by_session: the session id that made the current version, if any.
        changed_by_actor: who made the current version (Slack user id, ``agent``, …).
    """

    def __init__(
        self,
        path: str,
        *,
        expected_version: int,
        current_version: int,
        changed_by_session: str | None,
        changed_by_actor: str | None,
    ) -> None:
        super().__init__(
            f"stale version for {path}: expected {expected_version}, current {current_version}"
        )
        self.path = path
        self.expected_version = expected_version
        self.current_version = current_version
        self.changed_by_session = changed_by_session
        self.changed_by_actor = changed_by_actor


class InvalidPath(StoreError):
    """The path is not acceptable; ``reason`` says why, in words a model can act on."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid path {path!r}: {reason}")
        self.path = path
        self.reason = reason


class CaseConflict(InvalidPath):
    """The path differs from an existing one only by letter case."""

    def __init__(self, path: str, existing_path: str) -> None:
        super().__init__(path, f"differs only by case from existing {existing_path}")
        self.existing_path = existing_path


class FileTooLarge(StoreError):
    """Content over the per-file size cap (bytes of UTF-8)."""

    def __init__(self, path: str, *, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"{path} is {size_bytes} bytes; the limit is {limit_bytes} bytes")
        self.path = path
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class QuotaExceeded(StoreError):
    """The org would exceed its quota (``what`` is ``"files"``, ``"bytes"`` or ``"stored
    bytes"``); ``note`` says how to make room."""

    def __init__(self, org_id: str, *, what: str, used: int, limit: int, note: str = "") -> None:
        super().__init__(f"org {org_id} is over its {what} quota: {used} of {limit}{note}")
        self.org_id = org_id
        self.what = what
        self.used = used
        self.limit = limit
        self.note = note


class SearchTimeout(StoreError):
    """A search ran past its time budget; ``path`` is the file it had reached."""

    def __init__(self, path: str) -> None:
        super().__init__(
            "the search timed out; search a narrower path or use a more specific pattern"
        )
        self.path = path


class InvalidSkill(StoreError):
    """A ``SKILL.md`` whose frontmatter is wrong; ``problems`` lists what to fix."""

    def __init__(self, path: str, problems: list[str]) -> None:
        super().__init__(f"invalid skill {path}: " + "; ".join(problems))
        self.path = path
        self.problems = problems


class EditFailed(StoreError):
    """An edit that cannot apply to the file's current content."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


class NoChange(EditFailed):
    """``old_string`` and ``new_string`` are the same."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "old_string and new_string are exactly the same")


class StringNotFound(EditFailed):
    """``old_string`` does not occur in the current content.

    ``current_version`` lets the caller tell a concurrent change from a typo.
    """

    def __init__(self, path: str, *, current_version: int) -> None:
        super().__init__(path, "string to replace not found in file")
        self.current_version = current_version


class AmbiguousMatch(EditFailed):
    """``old_string`` occurs ``count`` (> 1) times and ``replace_all`` is false."""

    def __init__(self, path: str, *, count: int, current_version: int) -> None:
        super().__init__(path, f"found {count} matches of the string to replace")
        self.count = count
        self.current_version = current_version


class DatabaseUnavailable(StoreError):
    """The database could not be reached, or a statement hit its lock/statement timeout."""


class VersionNotFound(FileNotFound):
    """The file exists but has no such version with content (unknown, or a deletion)."""

    def __init__(self, path: str, version: int) -> None:
        super().__init__(path)
        self.args = (f"version {version} of {path} not found (or it is a deletion)",)
        self.version = version


class FileExists(EditFailed):
    """An edit with an empty ``old_string`` (meaning "create") on a non-empty file."""

    def __init__(self, path: str, *, current_version: int) -> None:
        super().__init__(path, "cannot create new file - file already exists")
        self.current_version = current_version


class InvalidContent(StoreError):
    """Content the store cannot keep as text (NUL characters, unpaired surrogates)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot store {path}: {reason}")
        self.path = path
        self.reason = reason


class SessionNotFound(StoreError):
    """No session has this id."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session not found: {session_id}")
        self.session_id = session_id


class Fenced(StoreError):
    """A write with a claim whose epoch is no longer current, or whose step already
    committed: another worker claimed the session, ``stop`` cancelled it, or the
    sweeper failed it. Nothing was written; the caller drops the step.

    Attributes:
        session_id: the session.
        epoch: the claim's (stale) epoch.
    """

    def __init__(self, session_id: str, epoch: int) -> None:
        super().__init__(f"session {session_id}: claim epoch {epoch} is fenced off")
        self.session_id = session_id
        self.epoch = epoch


class PostNotFound(StoreError):
    """No Slack post intent has this key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"post intent not found: {key}")
        self.key = key
