"""Turning live file rows into directory listings and glob/grep file selections (pure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from memory_store.files.globs import compile_glob, matching
from memory_store.files.lean import PathRow
from memory_store.files.rows import FileRow
from memory_store.records import Entry


def entry(row: FileRow) -> Entry:
    """The listing entry of one file."""
    return Entry(
        path=row.path,
        is_dir=False,
        version=row.version,
        size_bytes=row.size_bytes,
        updated_at=row.updated_at,
    )


def children(found: list[FileRow], prefix: str) -> list[Entry]:
    """One directory level under ``prefix``: directories (by name), then files (by path).

    ``found`` are the live files under ``prefix``, sorted by path.
    """
    base = "" if prefix == "/" else prefix
    dirs: set[str] = set()
    files: list[Entry] = []
    for row in found:
        if row.path == prefix:
            continue
        head, sep, _ = row.path[len(base) + 1 :].partition("/")
        if sep:
            dirs.add(f"{base}/{head}")
        else:
            files.append(entry(row))
    return [Entry(path=d, is_dir=True) for d in sorted(dirs)] + files


def absolute_pattern(pattern: str, prefix: str) -> str:
    """A glob pattern relative to directory ``prefix``, made absolute within the scope.

    >>> absolute_pattern("**/*.md", "/teams"), absolute_pattern("/x/*", "/teams")
    ('/teams/**/*.md', '/x/*')
    """
    return pattern if pattern.startswith("/") else f"{prefix.rstrip('/')}/{pattern}"


def file_filter(glob: str | None, prefix: str) -> Callable[[str], bool]:
    """Which paths grep's ``glob`` keeps, by ripgrep's ``--glob`` rule.

    A pattern without ``/`` matches the file name; one with ``/`` matches the path
    below ``prefix`` (the whole path when it starts with ``/``). None keeps every path.

    >>> keep = file_filter("*.md", "/")
    >>> keep("/a/b.md"), keep("/a/b.txt")
    (True, False)
    """
    if glob is None:
        return lambda _path: True
    regex = compile_glob(glob)
    if glob.startswith("/"):
        return lambda path: regex.fullmatch(path) is not None
    if "/" not in glob:
        return lambda path: regex.fullmatch(path.rsplit("/", 1)[-1]) is not None
    cut = 1 if prefix == "/" else len(prefix) + 1
    return lambda path: regex.fullmatch(path[cut:]) is not None


def glob_entries(found: Sequence[PathRow], pattern: str) -> list[Entry]:
    """The files of ``found`` whose path matches the absolute glob ``pattern``, most
    recently modified first (ties by path). CPU-bound: run it off the event loop."""
    kept = matching([row[0] for row in found], pattern)
    matches = sorted(
        (row for row in found if row[0] in kept),
        key=lambda row: (-row[3].timestamp(), row[0]),
    )
    return [
        Entry(path=path, is_dir=False, version=version, size_bytes=size, updated_at=at)
        for path, version, size, at, _mode in matches
    ]


def grep_order(
    found: Sequence[tuple[str, str, datetime]],
    glob: str | None,
    prefix: str,
    *,
    newest_first: bool,
) -> list[tuple[str, str]]:
    """(path, content) of the files grep searches: kept by ``glob`` (``file_filter``),
    by path, or most recently modified first (ties by path) when ``newest_first``."""
    chosen = _filtered([row[0] for row in found], glob, prefix)
    kept = [row for row in found if row[0] in chosen]
    if newest_first:
        kept.sort(key=lambda row: (-row[2].timestamp(), row[0]))
    else:
        kept.sort(key=lambda row: row[0])
    return [(path, content) for path, content, _at in kept]


def _filtered(paths: list[str], glob: str | None, prefix: str) -> set[str]:
    """The paths grep's ``glob`` keeps (``file_filter``'s rule), matched in one pass."""
    if glob is None:
        return set(paths)
    if glob.startswith("/"):
        return matching(paths, glob)
    if "/" not in glob:
        names = {path: path.rsplit("/", 1)[-1] for path in paths}
        kept = matching(list(set(names.values())), glob)
        return {path for path, name in names.items() if name in kept}
    cut = 1 if prefix == "/" else len(prefix) + 1
    below = {path: path[cut:] for path in paths}
    kept = matching(list(below.values()), glob)
    return {path for path, rest in below.items() if rest in kept}
