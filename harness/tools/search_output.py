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
from typing import TypeVar

from harness.tools.bounds import MAX_GREP_COLUMNS, grep_line
from memory_store import GrepMatch

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
    matches: Sequence[GrepMatch],
    *,
    line_numbers: bool,
    context: bool,
    head_limit: int,
    offset: int = 0,
    prefix: str = "",
) -> str:
    """Grep ``content``: one line per match or context line; with ``context``, ``--``
    between groups that are not adjacent (as ripgrep prints them). Each path is shown
    as ``prefix + path`` (the mount root for virtual files)."""
    if not matches:
        return NO_MATCHES
    entries: Sequence[GrepMatch | None] = matches  # None: the ``--`` between groups
    if context:
        grouped: list[GrepMatch | None] = []
        previous: GrepMatch | None = None
        for m in matches:
            if previous is not None and _gap(previous, m):
                grouped.append(None)
            grouped.append(m)
            previous = m
        entries = grouped
    shown, note = _page(entries, head_limit, offset)  # only the shown entries are formatted
    body = "\n".join(_content_lines(shown, prefix, line_numbers=line_numbers))
    body = body or ("No entries at this offset" if offset else NO_MATCHES)
    return body + (f"\n\n{_showing(note)}" if note else "")


def _content_lines(
    entries: Sequence[GrepMatch | None], prefix: str, *, line_numbers: bool
) -> list[str]:
    """``path:line:text`` (a context line: ``path-line-text``) for each entry, ``--`` for
    None. One loop for every entry: a listing may have tens of thousands."""
    lines: list[str] = []
    for entry in entries:
        if entry is None:
            lines.append("--")
            continue
        path, number, text, is_context = entry
        sep = "-" if is_context else ":"
        if len(text) > MAX_GREP_COLUMNS:
            text = grep_line(text, is_context=is_context)
        lines.append(
            f"{prefix}{path}{sep}{number}{sep}{text}"
            if line_numbers
            else f"{prefix}{path}{sep}{text}"
        )
    return lines


def count_listing(
    matches: Sequence[GrepMatch], head_limit: int, offset: int = 0, prefix: str = ""
) -> str:
    """Grep ``count``: ``path:N`` (matching lines per file), then the total of those shown."""
    counts: dict[str, int] = {}
    for m in matches:
        if not m.is_context:
            counts[m.path] = counts.get(m.path, 0) + 1
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


def matched_paths(matches: Sequence[GrepMatch]) -> list[str]:
    """Distinct paths with at least one match, in first-seen order."""
    return list(dict.fromkeys(m.path for m in matches if not m.is_context))


def _gap(previous: GrepMatch, current: GrepMatch) -> bool:
    return previous.path != current.path or current.line_number != previous.line_number + 1


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
