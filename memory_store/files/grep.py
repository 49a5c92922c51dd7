"""Searching file contents for a regex, in linear time, with context lines.

The engine is RE2 (``google-re2``): its syntax is the one ripgrep's default engine
(Rust ``regex``) shares with it — no look-around, no backreferences — and its running
time is linear in the text, so no pattern can stall a worker. Differences from
ripgrep: ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII-only (use ``\\pL``, ``\\pN`` for
Unicode letters and digits); Rust's class set operations (``[a-z&&[^x]]``) are refused.
As in ripgrep, ``^``/``$`` match at line boundaries and ``.`` never matches a newline
unless ``multiline`` (``rg -U --multiline-dotall``).

``search`` is CPU-bound: callers run it off the event loop (``asyncio.to_thread``);
it checks a deadline between files. Lines are split on ``\\n`` (a trailing newline
does not make an extra empty line); line numbers are 1-based.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import re2

from memory_store.errors import SearchTimeout
from memory_store.records import GrepMatch

Regex = Any  # re2's compiled pattern (the binding ships no type information)


def compile_pattern(pattern: str, *, ignore_case: bool, multiline: bool) -> Regex:
    """Compile ``pattern`` for ``search`` (``^``/``$`` at line boundaries).

    Raises:
        ValueError: the pattern is not a valid regex (the message says why).
    """
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.dot_nl = multiline
    options.max_mem = 64 << 20
    options.log_errors = False
    try:
        return re2.compile(f"(?m:{pattern})", options)
    except re2.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {_reason(exc)}") from exc


def _reason(exc: Exception) -> str:
    """RE2's reason (``missing )``), without the pattern it quotes (ours, wrapped)."""
    raw = exc.args[0] if exc.args else ""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    return text.split(": ", 1)[0]


def compile_full(pattern: str) -> Regex:
    """Compile a regex for paths (globs translated by ``globs``; ``.`` never matches a
    newline, which no path holds)."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def split_lines(content: str) -> list[str]:
    """The lines of ``content``.

    >>> split_lines("a\\nb\\n"), split_lines(""), split_lines("a\\n\\nb")
    (['a', 'b'], [], ['a', '', 'b'])
    """
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def search(
    files: Iterable[tuple[str, str]],
    regex: Regex,
    *,
    before: int = 0,
    after: int = 0,
    multiline: bool = False,
    deadline: float,
    enough: int | None = None,
) -> list[GrepMatch]:
    """Matching lines of each ``(path, content)``, with context lines, in the given order.

    Args:
        deadline: ``time.monotonic()`` value after which the search gives up.
        enough: stop after the file in which this many entries (matching and context
            lines) were found; None: search every file.

    Raises:
        SearchTimeout: the deadline passed.
    """
    found: list[GrepMatch] = []
    whole = multiline or _whole_content_is_a_superset(regex.pattern)
    for path, content in files:
        if enough is not None and len(found) >= enough:
            break
        if time.monotonic() > deadline:
            raise SearchTimeout(path)
        if not whole or regex.search(content) is not None:  # one pass rules most files out
            found += grep_content(
                path, content, regex, before=before, after=after, multiline=multiline
            )
    return found


def _whole_content_is_a_superset(pattern: str) -> bool:
    """Whether a file whose whole content has no match surely has no matching line:
    true unless the pattern anchors at the text's ends (``\\A``, ``\\z``) or sets flags.

    >>> _whole_content_is_a_superset("(?m:^a$)"), _whole_content_is_a_superset("(?m:a\\\\z)")
    (True, False)
    """
    inner = pattern.removeprefix("(?m:")
    return not ("\\A" in inner or "\\z" in inner or "(?" in inner)


def grep_content(
    path: str,
    content: str,
    regex: Regex,
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
    ...     "/f", "a\\nb\\nc\\nb\\n", compile_pattern("b", ignore_case=False, multiline=False),
    ...     before=1)]
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


def _matching_lines(lines: list[str], content: str, regex: Regex, *, multiline: bool) -> set[int]:
    """0-based indexes of the lines where a match starts."""
    if not multiline:
        return {i for i, line in enumerate(lines) if regex.search(line) is not None}
    starts = {content.count("\n", 0, m.start()) for m in regex.finditer(content)}
    return {i for i in starts if i < len(lines)}
