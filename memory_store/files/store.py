"""The org file store: /memory, /skills and /incident files with lossless history."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping, Sequence
from contextlib import suppress

from memory_store.db import Database, WriteConflict
from memory_store.errors import FileNotFound, InvalidPath, NoChange, VersionNotFound
from memory_store.files import allowance, decisions, lean, listing, revisions, rows
from memory_store.files.commit import Decide, Outcome, Target, commit_change
from memory_store.files.conditional import conditional_write
from memory_store.files.globs import translate
from memory_store.files.grep import compile_pattern, search
from memory_store.files.paths import normalise_file_path, normalise_path
from memory_store.files.prefilter import required_literal
from memory_store.records import (
    DEFAULT_LIMITS,
    Change,
    EditResult,
    Entry,
    FileKey,
    FileMatches,
    FileVersion,
    IndexEntry,
    Limits,
    Namespace,
    Origin,
    Revision,
    WriteResult,
)

CHANGED_SINCE_BATCH = 200
SEARCH_TIMEOUT_S = 20.0


class FileStore:
    """Versioned files in SQL, one short transaction per call, no lock held between calls.

    Every change makes exactly one new version and appends one immutable revision.
    A call whose ``origin.tool_use_id`` already made a revision of that file is a
    no-op returning the first result (retried tool calls).
    Paths are normalised (NFC, ``//`` collapsed, ``.``/``..`` resolved); see ``normalise_path``.
    Every method may raise ``DatabaseUnavailable``.
    """

    def __init__(self, db: Database, limits: Limits = DEFAULT_LIMITS) -> None:
        """A store over ``db`` (already migrated) enforcing ``limits`` (sizes, quotas)."""
        self._db = db
        self._limits = limits

    async def read(self, ns: Namespace, path: str) -> FileVersion:
        """Current content. Raises FileNotFound, InvalidPath."""
        path = normalise_file_path(path)
        if self._db.is_postgres:  # the hot read: one precompiled statement on the driver
            current = await rows.read_current_on_driver(self._db, ns, path)
            if current is None:
                raise FileNotFound(path)
            return current
        async with self._db.read() as conn:
            row = await rows.fetch_file(conn, ns, path)
        if row is None or row.content is None:
            raise FileNotFound(path)
        return FileVersion(
            path=path,
            version=row.version,
            content=row.content,
            updated_at=row.updated_at,
            actor=row.actor,
            session_id=row.session_id,
        )

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
        (or is deleted); n = only if it is still at version n. When the stored
        content already equals ``content`` the result is ``unchanged`` (no new
        version), whatever ``expected_version`` says.
        Raises StaleVersion, InvalidPath, CaseConflict, FileTooLarge, QuotaExceeded,
        InvalidSkill, InvalidContent.
        """
        path = normalise_file_path(path)
        decisions.check_content(self._limits, ns, path, content)
        if expected_version:  # PostgreSQL: one statement, when the file is as expected
            with suppress(WriteConflict):  # a retried tool call: the general path answers
                version = await conditional_write(
                    self._db, self._limits, ns, path, content, origin, expected_version
                )
                if version is not None:
                    return WriteResult(path, version, expected_version, created=False)
        decide = decisions.to_write(path, content, expected_version)
        # a conditional write here found its file's allowance short (or a retry, or SQLite):
        # top the allowance up, so that its next writes take the one statement
        topping_up = bool(expected_version) and self._db.is_postgres
        return _write_result(await self._commit(ns, path, origin, decide, top_up=topping_up))

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

        An empty ``old_string`` creates a missing file (or fills an empty one) with
        ``new_string``, as Claude Code's Edit does.
        Raises NoChange, FileNotFound, StringNotFound, AmbiguousMatch, FileExists,
        FileTooLarge, InvalidSkill, InvalidPath, InvalidContent.
        """
        path = normalise_file_path(path)
        if old_string == new_string:
            raise NoChange(path)

        decide = decisions.to_edit(
            self._limits, ns, path, old_string, new_string, replace_all=replace_all
        )
        outcome = await self._commit(ns, path, origin, decide)
        return EditResult(
            path=path,
            version=outcome.version,
            base_version=outcome.base_version,
            replacements=outcome.replacements or 0,
            content=outcome.content or "",
            concurrent_change=seen_version is not None and seen_version != outcome.base_version,
        )

    async def delete(
        self, ns: Namespace, path: str, origin: Origin, *, expected_version: int | None = None
    ) -> int:
        """Delete (a tombstone revision); returns the tombstone's version.

        Raises FileNotFound, StaleVersion, InvalidPath.
        """
        path = normalise_file_path(path)

        decide = decisions.to_delete(path, expected_version)
        return (await self._commit(ns, path, origin, decide)).version

    async def listdir(self, ns: Namespace, prefix: str = "/") -> list[Entry]:
        """One directory level under ``prefix``, directories first then files, by name.

        A directory that holds no file is empty (directories exist only through files).
        Raises InvalidPath.
        """
        prefix = normalise_path(prefix)
        async with self._db.read() as conn:
            found = await rows.fetch_live(conn, ns, prefix, with_content=False)
        return listing.children(found, prefix)

    async def glob(
        self, ns: Namespace, pattern: str, prefix: str = "/", *, limit: int | None = None
    ) -> list[Entry]:
        """Files matching a glob (``*``, ``**``, ``?``, ``[…]``, ``{a,b}``) relative to
        ``prefix`` (or absolute within the scope), most recently modified first; at
        most ``limit`` of them (None: all).

        With a limit on PostgreSQL the database matches and orders the paths (only the
        ``limit`` newest cross the wire); otherwise matching runs off the event loop,
        in linear time (RE2). Raises InvalidPath (a bad ``prefix``).
        """
        prefix = normalise_path(prefix)
        absolute = listing.absolute_pattern(pattern, prefix)
        async with self._db.read() as conn:
            if limit is not None and self._db.is_postgres:
                regex = f"^(?:{translate(absolute)})$"
                found = await lean.paths_matching(conn, ns, prefix, regex, limit)
            else:
                found = await lean.paths(conn, ns, prefix)
        entries = await asyncio.to_thread(listing.glob_entries, found, absolute)
        return entries if limit is None else entries[:limit]

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
        newest_first: bool = False,
        timeout_s: float = SEARCH_TIMEOUT_S,
        enough: int | None = None,
    ) -> list[FileMatches]:
        """Lines matching a regex (RE2 syntax, ripgrep's; see ``grep``), with context lines:
        one ``FileMatches`` per file with a match (``grep_lines`` gives one entry per line).

        ``enough``: the caller shows no more than this many entries (matching and context
        lines), so the search stops after the file that reached it (None: every file).

        Files come in path order, or most recently modified first when
        ``newest_first``; lines in line order. ``prefix`` is a directory or one file.
        ``glob`` filters files: a pattern without ``/`` matches the file name, one with
        ``/`` the path below ``prefix``. The search runs off the event loop in linear
        time, and gives up after ``timeout_s`` seconds.

        Raises InvalidPath; ValueError for a bad regex; SearchTimeout.
        """
        prefix = normalise_path(prefix)
        deadline = time.monotonic() + timeout_s
        literal = None if multiline else required_literal(pattern)
        if ignore_case and literal is not None and not literal.isascii():
            literal = None  # SQL's lower() and RE2's case folding may disagree past ASCII
        async with self._db.read() as conn:
            found = await lean.contents(
                conn, ns, prefix, containing=literal, ignore_case=ignore_case
            )

        def run() -> list[FileMatches]:
            regex = compile_pattern(pattern, ignore_case=ignore_case, multiline=multiline)
            chosen = listing.grep_order(found, glob, prefix, newest_first=newest_first)
            return search(
                chosen,
                regex,
                before=before,
                after=after,
                multiline=multiline,
                deadline=deadline,
                enough=enough,
            )

        return await asyncio.to_thread(run)

    async def index(self, ns: Namespace) -> list[IndexEntry]:
        """Every live file with its summary line, by path (for the prompt's indexes).

        Built from stored columns (path, version, summary): no content is read. The
        summary is described in ``IndexEntry``.
        """
        async with self._db.read() as conn:
            return await lean.index(conn, ns)

    async def versions_of(self, namespaces: Sequence[Namespace]) -> list[dict[str, int]]:
        """Path → version of every live file (what ``index`` lists, without summaries) of
        each namespace, in the order given, read in one statement (a model step asks for
        its session's three trees at once).

        Raises DatabaseUnavailable."""
        async with self._db.read() as conn:
            return await lean.versions_of(conn, namespaces)

    async def history(
        self,
        ns: Namespace,
        path: str,
        *,
        before_version: int | None = None,
        limit: int | None = None,
    ) -> list[Revision]:
        """Revisions of a path, oldest first (deletes included), one page at a time.

        Args:
            before_version: only revisions older than this version (the next page).
            limit: at most this many, the newest of them (None: all).

        Raises FileNotFound (never existed), InvalidPath.
        """
        path = normalise_file_path(path)
        async with self._db.read() as conn:
            found = await revisions.history(
                conn, ns, path, before_version=before_version, limit=limit
            )
            if not found and await rows.fetch_file(conn, ns, path) is None:
                raise FileNotFound(path)
        return found

    async def contents_at(
        self, ns: Namespace, path: str, versions: Collection[int]
    ) -> dict[int, str | None]:
        """The content of each of ``versions`` of a file, read by index (not the history).

        A version that does not exist is absent from the result; a deletion maps to None.
        Raises InvalidPath.
        """
        path = normalise_file_path(path)
        async with self._db.read() as conn:
            return await revisions.contents_at(conn, ns, path, versions)

    async def usage(self, org_id: str) -> tuple[int, int]:
        """(live files, live bytes) of the org across all scopes: what its quota counts
        (the org's counter, less its files' allowances: ``allowance``)."""
        async with self._db.read() as conn:
            return await allowance.real_use(conn, org_id)

    async def stored_usage(self, org_id: str) -> int:
        """The bytes of every revision the org keeps, across all scopes: what its
        stored-bytes quota (``Limits.max_stored_bytes_per_org``) counts."""
        async with self._db.read() as conn:
            return await allowance.real_stored(conn, org_id)

    async def set_mode(self, ns: Namespace, path: str, mode: int) -> None:
        """Set a live file's POSIX permission bits (``0o755`` for a script); no new version.

        Raises FileNotFound, InvalidPath, ValueError (``mode`` outside 0..0o777).
        """
        path = normalise_file_path(path)
        if not 0 <= mode <= 0o777:
            raise ValueError(f"mode {mode:o} is not a permission value (0..777 octal)")
        async with self._db.write() as conn:
            if not await rows.set_mode(conn, ns, path, mode):
                raise FileNotFound(path)

    async def restore(self, ns: Namespace, path: str, version: int, origin: Origin) -> WriteResult:
        """Make the content of ``version`` current again (a new version, ``operation``
        ``restore``); also brings back a deleted file. ``unchanged`` when it is current.

        Raises FileNotFound, VersionNotFound (unknown version or a deletion),
        InvalidPath, CaseConflict, FileTooLarge, QuotaExceeded, InvalidSkill.
        """
        path = normalise_file_path(path)
        async with self._db.read() as conn:
            old = await revisions.at_version(conn, ns, path, version)
        if old is None or old.content is None:
            async with self._db.read() as conn:
                if await rows.fetch_file(conn, ns, path) is None:
                    raise FileNotFound(path)
            raise VersionNotFound(path, version)
        decisions.check_content(self._limits, ns, path, old.content)
        decide = decisions.to_restore(old.content)
        return _write_result(await self._commit(ns, path, origin, decide))

    async def changed_since(self, seen: Mapping[FileKey, int]) -> list[Change]:
        """Which of the given files are no longer at the given version.

        One query per 200 keys. A key whose file never existed is not reported (the
        caller saw version 0 and it still is 0). Keys with invalid paths are ignored.
        Results follow the order of ``seen``.
        """
        keys = [(key, path) for key in seen if (path := _valid_path(key.path)) is not None]
        if not keys:
            return []
        current: dict[tuple[Namespace, str], rows.FileRow] = {}
        for start in range(0, len(keys), CHANGED_SINCE_BATCH):
            async with self._db.read() as conn:
                current |= await rows.current_of(conn, keys[start : start + CHANGED_SINCE_BATCH])
        changes = []
        for key, path in keys:
            row = current.get((key.ns, path))
            if row is not None and row.version != seen[key]:
                changes.append(
                    Change(
                        key=key,
                        seen_version=seen[key],
                        version=row.version,
                        deleted=row.deleted,
                        actor=row.actor,
                        session_id=row.session_id,
                    )
                )
        return changes

    async def _commit(
        self,
        ns: Namespace,
        path: str,
        origin: Origin,
        decide: Decide,
        *,
        top_up: bool = False,
    ) -> Outcome:
        target = Target(ns, path, origin, top_up)
        return await commit_change(self._db, self._limits, target, decide)


def _write_result(outcome: Outcome) -> WriteResult:
    return WriteResult(
        path=outcome.path,
        version=outcome.version,
        base_version=outcome.base_version,
        created=outcome.created,
        unchanged=outcome.unchanged,
    )


def _valid_path(path: str) -> str | None:
    try:
        return normalise_file_path(path)
    except InvalidPath:
        return None
