"""Glob's and Grep's output text, the same for every mount (Claude Code's formats).

Glob: paths, most recently modified first, at most 100, then a truncation line.
Grep: ``files_with_matches`` → ``Found N files`` and the paths; ``content`` →
``path:line:text`` (context lines ``path-line-text``, ``--`` between groups);
``count`` → ``path:N`` lines then a total line. ``head_limit`` cuts the listing
(0 = no limit) and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.tools.listing import MAX_LINE_CHARS
from memory_store import GrepMatch

GLOB_MAX_FILES = 100
NO_FILES = "No files found"
NO_MATCHES = "No matches found"


def glob_listing(paths: Sequence[str]) -> str:
    """Glob's answer for ``paths`` (already newest first)."""
    if not paths:
        return NO_FILES
    text = "\n".join(paths[:GLOB_MAX_FILES])
    if len(paths) > GLOB_MAX_FILES:
        text += "\n(Results are truncated. Consider using a more specific path or pattern.)"
    return text


def files_listing(paths: Sequence[str], head_limit: int) -> str:
    """Grep ``files_with_matches``: ``Found N files`` then the paths."""
    if not paths:
        return NO_FILES
    shown = _head(paths, head_limit)
    noun = "file" if len(paths) == 1 else "files"
    return f"Found {len(paths)} {noun}\n" + "\n".join(shown) + _cut_note(paths, shown, "files")


def content_listing(
    matches: Sequence[GrepMatch],
    *,
    line_numbers: bool,
    context: bool,
    head_limit: int,
    prefix: str = "",
) -> str:
    """Grep ``content``: one line per match or context line; with ``context``, ``--``
    between groups that are not adjacent (as ripgrep prints them). Each path is shown
    as ``prefix + path`` (the mount root for virtual files)."""
    if not matches:
        return NO_MATCHES
    lines: list[str] = []
    previous: GrepMatch | None = None
    for m in matches:
        if context and previous is not None and _gap(previous, m):
            lines.append("--")
        sep = "-" if m.is_context else ":"
        number = f"{m.line_number}{sep}" if line_numbers else ""
        lines.append(f"{prefix}{m.path}{sep}{number}{m.line[:MAX_LINE_CHARS]}")
        previous = m
    shown = _head(lines, head_limit)
    return "\n".join(shown) + _cut_note(lines, shown, "lines")


def count_listing(matches: Sequence[GrepMatch], head_limit: int, prefix: str = "") -> str:
    """Grep ``count``: ``path:N`` (matching lines per file), then the total."""
    counts: dict[str, int] = {}
    for m in matches:
        if not m.is_context:
            counts[m.path] = counts.get(m.path, 0) + 1
    if not counts:
        return NO_MATCHES
    lines = [f"{prefix}{path}:{n}" for path, n in counts.items()]
    shown = _head(lines, head_limit)
    total = sum(counts.values())
    return (
        "\n".join(shown)
        + _cut_note(lines, shown, "files")
        + f"\n\nFound {total} total {'occurrence' if total == 1 else 'occurrences'} across "
        f"{len(counts)} {'file' if len(counts) == 1 else 'files'}."
    )


def matched_paths(matches: Sequence[GrepMatch]) -> list[str]:
    """Distinct paths with at least one match, in first-seen order."""
    return list(dict.fromkeys(m.path for m in matches if not m.is_context))


def _gap(previous: GrepMatch, current: GrepMatch) -> bool:
    return previous.path != current.path or current.line_number != previous.line_number + 1


def _head(items: Sequence[str], head_limit: int) -> Sequence[str]:
    return items if head_limit == 0 else items[:head_limit]


def _cut_note(items: Sequence[str], shown: Sequence[str], unit: str) -> str:
    if len(shown) == len(items):
        return ""
    return (
        f"\n\n(Results are truncated: showing the first {len(shown)} of {len(items)} {unit}. "
        "Narrow the path, glob or pattern, or raise head_limit (0 = no limit).)"
    )
