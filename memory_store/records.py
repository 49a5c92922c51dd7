"""Typed values that cross the ``memory_store`` door.

All are frozen dataclasses (``GrepMatch``: a named tuple). Times are aware UTC
``datetime``s. Paths inside a namespace are absolute *within the scope root*: the virtual file
``/memory/teams/payments.md`` is ``Namespace(org, Scope.MEMORY)`` + ``/teams/payments.md``.
Versions count from 1; version 0 means "does not exist".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple


class Scope(StrEnum):
    """Which shared tree a file lives in (docs/architecture.md §6)."""

    MEMORY = "memory"  # org-wide durable lessons
    SKILLS = "skills"  # org-wide playbooks: /<name>/SKILL.md + extra files
    INCIDENT = "incident"  # one incident's notes; an incident is (org, Slack channel)


READ_ONLY_TREES = ("incidents",)
"""Virtual trees that are no scope of their own: ``/incidents`` shows the org's past
incidents (``Scope.INCIDENT`` namespaces of other channels, ``RecallStore``), read-only.
With the scopes, the first path components that live in the database."""


@dataclass(frozen=True)
class Namespace:
    """A tenant-isolated tree of files.

    ``channel_id`` is the Slack channel id for ``Scope.INCIDENT`` and must be
    empty for the org-wide scopes.

    Raises:
        ValueError: empty ``org_id``, or ``channel_id`` given/missing for the wrong scope.
    """

    org_id: str
    scope: Scope
    channel_id: str = ""

    def __post_init__(self) -> None:
        if not self.org_id:
            raise ValueError("org_id must not be empty")
        if (self.scope is Scope.INCIDENT) != bool(self.channel_id):
            raise ValueError("channel_id is required for, and only for, Scope.INCIDENT")


@dataclass(frozen=True)
class FileKey:
    """One file: its namespace and its normalised path within the scope root."""

    ns: Namespace
    path: str


@dataclass(frozen=True)
class Origin:
    """Who makes a change: recorded on every revision.

    ``actor`` is a Slack user id, ``"agent"`` or ``"cli"``; ``tool_use_id`` makes a
    repeated tool call idempotent (same id → the first result, no new revision).
    """

    actor: str
    session_id: str | None = None
    tool_use_id: str | None = None


@dataclass(frozen=True)
class FileVersion:
    """A file's current content and version."""

    path: str
    version: int
    content: str
    updated_at: datetime
    actor: str
    session_id: str | None


@dataclass(frozen=True)
class WriteResult:
    """Outcome of ``write``/``restore``: ``base_version`` is 0 when the file was created.

    ``unchanged`` is true when the stored content already equalled the new content
    (no new version was made).
    """

    path: str
    version: int
    base_version: int
    created: bool
    unchanged: bool = False


@dataclass(frozen=True)
class EditResult:
    """Outcome of ``edit``.

    ``concurrent_change`` is true when the caller's ``seen_version`` was older than
    the version the edit applied to (someone else changed other lines meanwhile).
    ``content`` is the new full content.
    """

    path: str
    version: int
    base_version: int
    replacements: int
    content: str
    concurrent_change: bool


@dataclass(frozen=True)
class Entry:
    """A directory listing entry. Directories are implied by file paths."""

    path: str
    is_dir: bool
    version: int | None = None
    size_bytes: int | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class IndexEntry:
    """One line of the harness's memory/skill/incident index.

    ``summary`` is the frontmatter ``description`` when present, otherwise the first
    non-empty line (cut to 200 chars); a skill's also holds its ``when_to_use`` (see
    ``memory_store.files.summary``). ``listed`` is False for a skill the model must not
    be offered (``disable-model-invocation: true``). ``mode``: POSIX permission bits.
    """

    path: str
    summary: str
    version: int
    updated_at: datetime
    listed: bool = True
    mode: int = 0o644
    size_bytes: int = 0


class GrepMatch(NamedTuple):
    """One output line of ``grep``: a match, or a context line when ``is_context``.

    A named tuple, not a dataclass like the others: a search makes one per output line
    (40,000 for ``bench/tools.py``'s Grep of every line), and a tuple is made in half
    the time, with one object for the collector to track instead of two. Immutable,
    hashable and compared by value as the others are.
    """

    path: str
    line_number: int
    line: str
    is_context: bool = False


class FileMatches(NamedTuple):
    """What ``grep`` found in one file: its matching lines and their context lines, in
    line order (``-o`` may repeat a line number, one entry per part of the line).

    One object per file, not per line: a Grep of 40,000 lines makes 200 of these and
    lists of strings and numbers, which the collector does not walk (``bench/tools.py``:
    per-line tuples spent most of such a search in collections). ``matches`` gives the
    per-line form.

    Fields:
        path: the file's path, as the store names it.
        line_numbers: 1-based, one per shown line.
        lines: each shown line's text, without its newline.
        context: the line numbers among them that are context lines (empty without
            ``before``/``after``).
    """

    path: str
    line_numbers: list[int]
    lines: list[str]
    context: frozenset[int] = frozenset()

    def matches(self) -> list[GrepMatch]:
        """One ``GrepMatch`` per shown line.

        >>> FileMatches("/a", [1, 2], ["x", "y"], frozenset({1})).matches()[0]
        GrepMatch(path='/a', line_number=1, line='x', is_context=True)
        """
        context = self.context
        return [
            GrepMatch(self.path, n, line, n in context)
            for n, line in zip(self.line_numbers, self.lines, strict=True)
        ]

    @property
    def hit_count(self) -> int:
        """How many shown lines match (are not context lines)."""
        return len(self.line_numbers) - len(self.context)


def grep_lines(files: Iterable[FileMatches]) -> list[GrepMatch]:
    """Every shown line of ``files`` as a ``GrepMatch``, in order.

    >>> grep_lines([FileMatches("/a", [3], ["x"]), FileMatches("/b", [1], ["y"])])[1].path
    '/b'
    """
    return [m for f in files for m in f.matches()]


@dataclass(frozen=True)
class Revision:
    """One immutable row of a file's history.

    ``operation`` is one of ``create``, ``write``, ``edit``, ``delete``, ``restore``;
    ``content`` is None for a delete (tombstone). ``replacements`` is the number of
    replacements an ``edit`` made (None for other operations).
    """

    path: str
    version: int
    base_version: int
    operation: str
    content: str | None
    actor: str
    session_id: str | None
    tool_use_id: str | None
    created_at: datetime
    replacements: int | None = None


@dataclass(frozen=True)
class Change:
    """A file the caller has seen that changed since: for per-step change notices.

    ``version`` is the current version (the tombstone's when ``deleted``).
    """

    key: FileKey
    seen_version: int
    version: int
    deleted: bool
    actor: str
    session_id: str | None


@dataclass(frozen=True)
class Limits:
    """Store limits. Defaults from docs/architecture.md §6.

    The org's files and bytes are one pool, but ``/memory`` and ``/skills`` may fill it
    only up to ``incident_reserve_share`` (a fraction, rounded down) below each maximum:
    that room is kept for ``/incident`` notes, so a full memory never blocks notes
    mid-incident.

    History is bounded too: each file keeps its newest ``keep_revisions`` revisions (a
    deleted file only its deletion and the content before it), and the bytes of every
    kept revision count against ``max_stored_bytes_per_org``.
    """

    max_file_bytes: int = 100 * 1024
    max_files_per_org: int = 10_000
    max_bytes_per_org: int = 200 * 1024 * 1024
    max_stored_bytes_per_org: int = 400 * 1024 * 1024
    keep_revisions: int = 20
    lock_timeout_ms: int = 2_000
    statement_timeout_ms: int = 10_000
    incident_reserve_share: float = 0.05

    def max_files(self, scope: Scope) -> int:
        """The org's live file count a change in ``scope`` may reach."""
        return self._below(self.max_files_per_org, scope)

    def max_bytes(self, scope: Scope) -> int:
        """The org's live byte total a change in ``scope`` may reach."""
        return self._below(self.max_bytes_per_org, scope)

    def max_stored_bytes(self, scope: Scope) -> int:
        """The org's stored bytes (every kept revision's content) a change in ``scope``
        may reach."""
        return self._below(self.max_stored_bytes_per_org, scope)

    def _below(self, maximum: int, scope: Scope) -> int:
        if scope is Scope.INCIDENT:
            return maximum
        return maximum - int(maximum * self.incident_reserve_share)


DEFAULT_LIMITS = Limits()
