"""Searching one file's content for a regex, with context lines.

Pure functions over strings. Lines are split on ``\\n`` (a trailing newline does not
make an extra empty line); line numbers are 1-based.
"""

from __future__ import annotations

import re

from memory_store.records import GrepMatch


def compile_pattern(pattern: str, *, ignore_case: bool, multiline: bool) -> re.Pattern[str]:
    """Compile a Python ``re`` pattern for ``grep``.

    ``multiline`` adds ``re.DOTALL | re.MULTILINE`` (matches may span lines).

    Raises:
        ValueError: the pattern is not a valid regex (message says where).
    """
    flags = (re.IGNORECASE if ignore_case else 0) | (re.DOTALL | re.MULTILINE if multiline else 0)
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc


def split_lines(content: str) -> list[str]:
    """The lines of ``content``.

    >>> split_lines("a\\nb\\n"), split_lines(""), split_lines("a\\n\\nb")
    (['a', 'b'], [], ['a', '', 'b'])
    """
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def grep_content(
    path: str,
    content: str,
    regex: re.Pattern[str],
    *,
    before: int = 0,
    after: int = 0,
    multiline: bool = False,
) -> list[GrepMatch]:
    """Matching lines of one file in line order, with ``before``/``after`` context lines.

    Without ``multiline`` each line is searched on its own; with it, the whole
    content is searched and each match is reported by its first line. A line is
    reported once, as a match if it matches, else as context.

    >>> [(m.line_number, m.is_context) for m in grep_content(
    ...     "/f", "a\\nb\\nc\\nb\\n", re.compile("b"), before=1)]
    [(1, True), (2, False), (3, True), (4, False)]
    """
    lines = split_lines(content)
    hits = _matching_lines(lines, content, regex, multiline=multiline)
    shown: set[int] = set()
    for hit in hits:
        shown.update(range(max(0, hit - before), min(len(lines), hit + after + 1)))
    return [
        GrepMatch(path=path, line_number=i + 1, line=lines[i], is_context=i not in hits)
        for i in sorted(shown)
    ]


def _matching_lines(
    lines: list[str], content: str, regex: re.Pattern[str], *, multiline: bool
) -> set[int]:
    """0-based indexes of the lines where a match starts."""
    if not multiline:
        return {i for i, line in enumerate(lines) if regex.search(line)}
    starts = {content.count("\n", 0, m.start()) for m in regex.finditer(content)}
    return {i for i in starts if i < len(lines)}
