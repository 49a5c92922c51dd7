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
from itertools import compress
from typing import Any

import re2

from memory_store.errors import SearchTimeout
from memory_store.records import FileMatches

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
) -> list[FileMatches]:
    """What each ``(path, content)`` shows (matching lines, with context lines), in the
    given order; files without a match are left out.

    Args:
        deadline: ``time.monotonic()`` value after which the search gives up.
        enough: stop after the file in which this many entries (matching and context
            lines) were found; None: search every file.

    Raises:
        SearchTimeout: the deadline passed.
    """
    found: list[FileMatches] = []
    entries = 0
    whole = multiline or _whole_content_is_a_superset(regex.pattern)
    scan = None if multiline or not whole else scanner(regex)
    for path, content in files:
        if enough is not None and entries >= enough:
            break
        if time.monotonic() > deadline:
            raise SearchTimeout(path)
        if scan is None and whole and regex.search(content) is None:
            continue  # one pass rules most files out
        shown = grep_content(
            path, content, regex, before=before, after=after, multiline=multiline, scan=scan
        )
        if shown.line_numbers:
            found.append(shown)
            entries += len(shown.line_numbers)
    return found


def scanner(regex: Regex) -> Regex | str:
    """What ``grep_content``'s ``scan`` takes for ``regex``: the text itself when the
    pattern is a plain, case-sensitive literal (a line matches iff it holds the text);
    else ``regex`` compiled for UTF-8 bytes (same pattern, same options), since
    searching bytes skips what the binding does for ``str`` at every call (encode the
    text, convert offsets between characters and bytes).

    >>> scanner(compile_pattern(r"db\\.internal", ignore_case=False, multiline=False))
    'db.internal'
    >>> type(scanner(compile_pattern("db.internal", ignore_case=False, multiline=False))).__name__
    '_Regexp'
    """
    literal = _literal(regex.pattern.removeprefix("(?m:").removesuffix(")"))
    if literal and regex.options.case_sensitive:
        return literal
    return re2.compile(regex.pattern.encode(), regex.options)


_META = frozenset(".^$*+?()[]{}|\\")


def _literal(pattern: str) -> str | None:
    """The text ``pattern`` matches when it is plain text (metacharacters escaped with
    ``\\``); None when it is anything else.

    >>> _literal("pools"), _literal(r"a\\.b\\(c\\)"), _literal("a.b"), _literal(r"a\\d")
    ('pools', 'a.b(c)', None, None)
    """
    text: list[str] = []
    escaped = False
    for char in pattern:
        if escaped:
            if char not in _META:
                return None  # \\d, \\n, \\x41…: not plain text
            text.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in _META:
            return None
        else:
            text.append(char)
    return None if escaped else "".join(text)


def _whole_content_is_a_superset(pattern: str) -> bool:
    """Whether a line's match is also a match of the whole content, at the same place
    (so a content without a match has no matching line): true unless the pattern anchors
    at the text's ends (``\\A``, ``\\z``) or sets flags (``(?-m)`` would make ``^`` the
    text's start). Groups ``(?:…)`` and ``(?P<name>…)`` set none.

    >>> _whole_content_is_a_superset("(?m:^a$)"), _whole_content_is_a_superset("(?m:a\\\\z)")
    (True, False)
    >>> _whole_content_is_a_superset("(?m:(?:a|b)c)"), _whole_content_is_a_superset("(?m:(?i)a)")
    (True, False)
    """
    inner = pattern.removeprefix("(?m:")
    if "\\A" in inner or "\\z" in inner:
        return False
    return all(after[:1] in (":", "P", "<") for after in inner.split("(?")[1:])


def grep_content(
    path: str,
    content: str,
    regex: Regex,
    *,
    before: int = 0,
    after: int = 0,
    multiline: bool = False,
    scan: Regex | str | None = None,
) -> FileMatches:
    """The lines of one file that match, in line order, with ``before``/``after``
    context lines.

    Without ``multiline`` each line is searched on its own; with it, the whole
    content is searched and each match is reported by its first line. A line is
    reported once, as a match if it matches, else as context.

    ``scan``: ``scanner(regex)``, for a pattern whose every line match is also a match of
    the whole content (``_whole_content_is_a_superset``): the lines are then found by
    searching the content once (``_scanned_lines``), or, for plain text, by looking for
    it in each line, with the same result.

    >>> found = grep_content(
    ...     "/f", "a\\nb\\nc\\nb\\n", compile_pattern("b", ignore_case=False, multiline=False),
    ...     before=1)
    >>> found.line_numbers, sorted(found.context)
    ([1, 2, 3, 4], [1, 3])
    """
    lines = split_lines(content)
    if isinstance(scan, str) and not multiline:
        matching = [scan in line for line in lines]
        if not before and not after and all(matching):  # every line: nothing to pick
            return FileMatches(path, list(range(1, len(lines) + 1)), lines)
        if not before and not after:  # the common case, with no per-line object
            return FileMatches(
                path,
                list(compress(range(1, len(lines) + 1), matching)),
                list(compress(lines, matching)),
            )
        hits = set(compress(range(len(lines)), matching))
    elif scan is not None and not multiline:
        hits = _scanned_lines(lines, content, regex, scan)
    else:
        hits = _matching_lines(lines, content, regex, multiline=multiline)
    if not before and not after:
        ordered = sorted(hits)
        return FileMatches(path, [i + 1 for i in ordered], [lines[i] for i in ordered])
    shown: set[int] = set()
    for hit in hits:
        shown.update(range(max(0, hit - before), min(len(lines), hit + after + 1)))
    ordered = sorted(shown)
    context = frozenset(i + 1 for i in shown.difference(hits))
    return FileMatches(path, [i + 1 for i in ordered], [lines[i] for i in ordered], context)


def _matching_lines(lines: list[str], content: str, regex: Regex, *, multiline: bool) -> set[int]:
    """0-based indexes of the lines where a match starts."""
    if not multiline:
        return {i for i, line in enumerate(lines) if regex.search(line) is not None}
    starts = {content.count("\n", 0, m.start()) for m in regex.finditer(content)}
    return {i for i in starts if i < len(lines)}


def _scanned_lines(lines: list[str], content: str, regex: Regex, scan: Regex) -> set[int]:
    """``_matching_lines`` without ``multiline``, for a pattern whose line matches are
    matches of the whole content (``_whole_content_is_a_superset``), found by one pass
    over the content's UTF-8 bytes (``scan``: the pattern compiled for bytes).

    From the start of a line, the next match of the content starts on the first line
    at or after it that has a match of its own (a line's match is one of the content's,
    and none of the lines before it has one: a match that started there would be the
    next). A match within its line (no newline in it) is that line's match; one that
    runs past the line's end is checked on the line alone. Either way the scan goes on
    at the next line's start. ``\\n`` is one byte in UTF-8 and never inside another
    character, so line starts are found in the bytes.

    >>> regex = compile_pattern("b+|a\\\\sb", ignore_case=False, multiline=False)
    >>> content = "a\\nb\\nab\\na\\n\\n"
    >>> sorted(_scanned_lines(split_lines(content), content, regex, scanner(regex)))
    [1, 2]
    """
    data = content.encode()
    found: set[int] = set()
    line, line_start = 0, 0
    while line < len(lines):
        match = scan.search(data, line_start)
        if match is None:
            break
        start, end = match.span()
        line += data.count(b"\n", line_start, start)
        if line >= len(lines):  # an empty match after the last newline
            break
        if data.find(b"\n", start, end) < 0 or regex.search(lines[line]) is not None:
            found.add(line)
        line_end = data.find(b"\n", start)
        if line_end < 0:
            break
        line, line_start = line + 1, line_end + 1
    return found
