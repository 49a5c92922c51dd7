"""Glob's and Grep's output text, the same for every mount (Claude Code's formats).

Follows Claude Code 2.1.336. Glob: paths, oldest modification first, at most 100,
then a line saying how many were left out. Grep: ``files_with_matches`` →
``Found N files`` and the paths (newest first); ``content`` → ``path:line:text``
(context lines ``path-line-text``, ``--`` between groups; a line over 500 columns is
replaced by an omission marker); ``count`` → ``path:N`` lines then a total line.
``offset`` skips entries and ``head_limit`` (default 250, 0 = no limit) keeps the
next ones, like ``| tail -n +N | head -N``; the result then says, after an empty line,
``[Showing results with pagination = limit: L, offset: O]``. Count mode's total
follows an empty line too, also when nothing matched.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TypeVar

from harness.tools.bounds import MAX_GREP_COLUMNS, grep_line
from memory_store import FileMatches

T = TypeVar("T")
GLOB_MAX_FILES = 100
NO_FILES = "No files found"
NO_MATCHES = "No matches found"


def glob_listing(paths: Sequence[str]) -> str:
    """Glob's answer for ``paths`` (already oldest first).

    >>> glob_listing([f"/w/{i}" for i in range(102)]).endswith("2 more are not listed. "
    ...     "Narrow the pattern or path to see the rest.)")
    True
    """
    if not paths:
        return NO_FILES
    text = "\n".join(paths[:GLOB_MAX_FILES])
    if len(paths) > GLOB_MAX_FILES:
        left = len(paths) - GLOB_MAX_FILES
        text += (
            f"\n(Showing {GLOB_MAX_FILES} of {len(paths)} matching files; {left} more are not "
            "listed. Narrow the pattern or path to see the rest.)"
        )
    return text


def files_listing(paths: Sequence[str], head_limit: int, offset: int = 0) -> str:
    """Grep ``files_with_matches``: ``Found N files`` (N shown) then the paths.

    >>> files_listing(["/a", "/b", "/c"], 1, 1).split()
    ['Found', '1', 'file', 'limit:', '1,', 'offset:', '1', '/b']
    """
    shown, note = _page(paths, head_limit, offset)
    if not shown:
        return f"No entries at this offset. {_showing(note)}" if paths and offset else NO_FILES
    noun = "file" if len(shown) == 1 else "files"
    return f"Found {len(shown)} {noun}" + (f" {note}" if note else "") + "\n" + "\n".join(shown)


def content_listing(
    files: Sequence[FileMatches],
    *,
    line_numbers: bool,
    context: bool,
    head_limit: int,
    offset: int = 0,
    prefix: str = "",
) -> str:
    """Grep ``content``: one line per match or context line; with ``context``, ``--``
    between groups that are not adjacent (as ripgrep prints them), files included. Each
    path is shown as ``prefix + path`` (the mount root for virtual files).

    Pagination counts the ``--`` lines as entries. Only the files with a shown entry are
    formatted, each in one pass; CPU-bound for a large listing (40,000 lines: ~8 ms),
    so callers run such a one off the event loop.

    >>> print(content_listing([FileMatches("/a", [1, 2, 5], ["x", "y", "z"], frozenset({2}))],
    ...     line_numbers=True, context=True, head_limit=3, prefix="/memory"))
    /memory/a:1:x
    /memory/a-2-y
    --
    <BLANKLINE>
    [Showing results with pagination = limit: 3]
    """
    stop = None if head_limit == 0 else offset + head_limit
    numerals = _numerals(files)
    shown: list[str] = []
    total = 0  # entries so far, ``--`` lines included
    for found in files:
        if not found.line_numbers:
            continue
        separated = context and total > 0
        count = len(found.line_numbers) + (_gaps(found) + separated if context else 0)
        if total + count > offset and (stop is None or total < stop):
            first, last = max(0, offset - total), None if stop is None else stop - total
            if context:
                entries = _context_entries(found, prefix, line_numbers, separated)
                shown.append("\n".join(entries[first:last]))
            else:
                head = f"{prefix}{found.path}:"
                parts = _parts(found, line_numbers, numerals)
                if first == 0 and (last is None or last >= count):  # the whole file
                    shown.append(head + f"\n{head}".join(parts))
                else:
                    shown.append("\n".join(head + part for part in parts[first:last]))
        total += count
    if not total:
        return NO_MATCHES
    parts = [f"limit: {head_limit}"] if stop is not None and total > stop else []
    if offset:
        parts.append(f"offset: {offset}")
    body = "\n".join(shown) or ("No entries at this offset" if offset else NO_MATCHES)
    return body + (f"\n\n{_showing(', '.join(parts))}" if parts else "")


def content_size(files: Sequence[FileMatches]) -> int:
    """How many lines ``files`` show (what ``content_listing``'s cost grows with)."""
    return sum(len(found.line_numbers) for found in files)


def _gaps(found: FileMatches) -> int:
    """How many ``--`` lines go inside one file's entries (between lines not adjacent)."""
    numbers = found.line_numbers
    return sum(1 for a, b in pairwise(numbers) if b > a + 1)  # ``-o`` repeats a number


def _numerals(files: Sequence[FileMatches]) -> list[str] | None:
    """``str(n)`` at index ``n`` for every line number ``files`` show, made once for
    the listing (the same numbers recur in every file: converting each anew was a third
    of a large listing's time); None when they are too sparse for that to pay."""
    highest = max((found.line_numbers[-1] for found in files if found.line_numbers), default=0)
    if highest > 2 * content_size(files) + 1_000:
        return None
    return list(map(str, range(highest + 1)))


def _parts(found: FileMatches, line_numbers: bool, numerals: list[str] | None) -> list[str]:
    """What follows ``path:`` on each of a file's listing lines without context:
    ``line:text``, or ``text``. Made without a per-line object other than the string
    itself: a listing may have tens of thousands. ``numerals``: ``_numerals``."""
    texts = _shortened(found)
    if not line_numbers:
        return texts
    numbers = found.line_numbers
    if numerals is None:
        return [f"{n}:{text}" for n, text in zip(numbers, texts, strict=True)]
    return [f"{numerals[n]}:{text}" for n, text in zip(numbers, texts, strict=True)]


def _context_entries(
    found: FileMatches, prefix: str, line_numbers: bool, separated: bool
) -> list[str]:
    """One file's listing lines with context: ``path:line:text`` for a match,
    ``path-line-text`` for a context line, ``--`` between groups (and first, when
    ``separated``)."""
    head = prefix + found.path
    entries = ["--"] if separated else []
    previous: int | None = None
    for n, text in zip(found.line_numbers, _shortened(found), strict=True):
        if previous is not None and n > previous + 1:  # ``-o``: parts of one line abut
            entries.append("--")
        sep = "-" if n in found.context else ":"
        entries.append(f"{head}{sep}{n}{sep}{text}" if line_numbers else f"{head}{sep}{text}")
        previous = n
    return entries


def _shortened(found: FileMatches) -> list[str]:
    """The file's shown lines, each over ``MAX_GREP_COLUMNS`` replaced by its marker."""
    texts = found.lines
    if len(max(texts, key=len)) <= MAX_GREP_COLUMNS:
        return texts
    context = found.context
    return [
        grep_line(text, is_context=n in context)
        for n, text in zip(found.line_numbers, texts, strict=True)
    ]


def count_listing(
    files: Sequence[FileMatches], head_limit: int, offset: int = 0, prefix: str = ""
) -> str:
    """Grep ``count``: ``path:N`` (matching lines per file), then the total of those shown."""
    counts: dict[str, int] = {}
    for found in files:
        if found.hit_count:
            counts[found.path] = counts.get(found.path, 0) + found.hit_count
    if not counts:
        return f"{NO_MATCHES}\n\n{_total(0, 0)}"
    items = list(counts.items())
    shown, note = _page(items, head_limit, offset)
    body = "\n".join(f"{prefix}{path}:{n}" for path, n in shown) or "No entries at this offset"
    total = sum(n for _, n in shown)
    return f"{body}\n\n{_total(total, len(shown))}" + (f" with pagination = {note}" if note else "")


def _total(occurrences: int, files: int) -> str:
    """Count mode's last line (Claude Code 2.1.336, after an empty line).

    >>> _total(0, 0)
    'Found 0 total occurrences across 0 files.'
    """
    noun = "occurrence" if occurrences == 1 else "occurrences"
    return f"Found {occurrences} total {noun} across {files} {'file' if files == 1 else 'files'}."


def matched_paths(files: Sequence[FileMatches]) -> list[str]:
    """Distinct paths with at least one match, in first-seen order."""
    return list(dict.fromkeys(found.path for found in files if found.hit_count))


def _page(items: Sequence[T], head_limit: int, offset: int) -> tuple[Sequence[T], str]:
    """The entries after ``offset``, at most ``head_limit`` (0 = all), and the pagination
    note (``limit: L`` only when entries were left out; ``offset: O`` when O > 0)."""
    rest = items[offset:]
    shown = rest if head_limit == 0 else rest[:head_limit]
    parts = [f"limit: {head_limit}"] if len(shown) < len(rest) else []
    if offset:
        parts.append(f"offset: {offset}")
    return shown, ", ".join(parts)


def _showing(note: str) -> str:
    return f"[Showing results with pagination = {note}]"
