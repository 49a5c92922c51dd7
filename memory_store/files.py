"""The org file store: /memory, /skills and /incident files with lossless history.

CONTRACT STUB — to be implemented. Signatures and docstrings are the contract the
harness codes against; keep them (add, do not break).
"""

from __future__ import annotations

from collections.abc import Mapping

from .records import (
    Change,
    EditResult,
    Entry,
    FileKey,
    FileVersion,
    GrepMatch,
    IndexEntry,
    Namespace,
    Origin,
    Revision,
    WriteResult,
)


class FileStore:
    """Versioned files in SQL, one short transaction per call, no lock held between calls.

    Every change makes exactly one new version and appends one immutable revision.
    A call whose ``origin.tool_use_id`` already made a revision of that file is a
    no-op returning the first result (retried tool calls).
    Paths are normalised (NFC, ``//`` collapsed, ``.``/``..`` resolved); see ``normalise_path``.
    """

    async def read(self, ns: Namespace, path: str) -> FileVersion:
        """Current content. Raises FileNotFound, InvalidPath."""
        raise NotImplementedError

    async def write(
        self,
        ns: Namespace,
        path: str,
        content: str,
        origin: Origin,
        *,
        expected_version: int | None,
    ) -> WriteResult:
        """Create or replace a file.

        ``expected_version``: None = unconditional; 0 = only if it does not exist
        (or is deleted); n = only if it is still at version n.
        Raises StaleVersion, InvalidPath, CaseConflict, FileTooLarge, QuotaExceeded,
        InvalidSkill.
        """
        raise NotImplementedError

    async def edit(
        self,
        ns: Namespace,
        path: str,
        old_string: str,
        new_string: str,
        origin: Origin,
        *,
        replace_all: bool = False,
        seen_version: int | None = None,
    ) -> EditResult:
        """Replace ``old_string`` in the *current* content in one short transaction.

        Raises NoChange, FileNotFound, StringNotFound, AmbiguousMatch, FileTooLarge,
        InvalidSkill, InvalidPath.
        """
        raise NotImplementedError

    async def delete(
        self, ns: Namespace, path: str, origin: Origin, *, expected_version: int | None = None
    ) -> int:
        """Delete (a tombstone revision); returns the tombstone's version.

        Raises FileNotFound, StaleVersion.
        """
        raise NotImplementedError

    async def listdir(self, ns: Namespace, prefix: str = "/") -> list[Entry]:
        """One directory level under ``prefix``, directories first then files, by name."""
        raise NotImplementedError

    async def glob(self, ns: Namespace, pattern: str, prefix: str = "/") -> list[Entry]:
        """Files matching a glob (``*``, ``**``, ``?``, ``[…]``, ``{a,b}``) relative to
        ``prefix`` (or absolute within the scope), most recently modified first."""
        raise NotImplementedError

    async def grep(
        self,
        ns: Namespace,
        pattern: str,
        *,
        prefix: str = "/",
        glob: str | None = None,
        ignore_case: bool = False,
        before: int = 0,
        after: int = 0,
        multiline: bool = False,
    ) -> list[GrepMatch]:
        """Lines matching a Python ``re`` pattern, with context lines, in path order.

        Raises InvalidPath, and ValueError for a bad regex.
        """
        raise NotImplementedError

    async def index(self, ns: Namespace) -> list[IndexEntry]:
        """Every live file with its summary line, by path (for the prompt's indexes)."""
        raise NotImplementedError

    async def history(self, ns: Namespace, path: str) -> list[Revision]:
        """All revisions of a path, oldest first (deletes included). Raises FileNotFound."""
        raise NotImplementedError

    async def restore(self, ns: Namespace, path: str, version: int, origin: Origin) -> WriteResult:
        """Make the content of ``version`` current again (a new version). Raises FileNotFound."""
        raise NotImplementedError

    async def changed_since(self, seen: Mapping[FileKey, int]) -> list[Change]:
        """Which of the given files are no longer at the given version (one query)."""
        raise NotImplementedError
