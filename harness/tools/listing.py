"""Numbered listings of file content, like ``cat -n`` (Read's output format).

Each line is ``{number}\\t{text}`` (Claude Code 2.1's form: the number unpadded, a
tab, the text); numbers start at 1. Lines are split on ``\\n`` after every ``\\r\\n``
became ``\\n`` (Claude Code removes the CRs); the empty line after a final newline is
a line of its own, shown as its number alone (so ``"a\\n"`` has 2 lines, as Claude
Code 2.1.336 counts them). Lines are shown whole: the window's size is bounded by
the caller (bytes, tokens), not by cutting lines.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    """A window of a file, numbered.

    Attributes:
        text: the numbered lines, or a notice for an empty file / an offset past the end.
        first_line: number of the first line shown (1-based).
        shown_lines: how many lines were shown.
        total_lines: lines in the whole file.
        full: True when every line of the file was shown (from the first to the last).
    """

    text: str
    first_line: int
    shown_lines: int
    total_lines: int
    full: bool


def split_lines(content: str) -> list[str]:
    """The lines of ``content``.

    >>> split_lines("a\\nb\\n"), split_lines(""), split_lines("a\\n\\nb")
    (['a', 'b'], [], ['a', '', 'b'])
    """
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def number_line(number: int, text: str) -> str:
    """One ``cat -n`` line.

    >>> number_line(7, "x")
    '7\\tx'
    """
    return f"{number}\t{text}"


def snippet(content: str, new_string: str, *, context_lines: int = 4) -> str:
    """Numbered lines around the first occurrence of ``new_string`` ('' if absent or empty).

    >>> snippet("a\\nb\\nc\\nd\\n", "c", context_lines=1).split("\\n")
    ['2\\tb', '3\\tc', '4\\td']
    """
    at = content.find(new_string) if new_string else -1
    if at < 0:
        return ""
    lines = split_lines(content)
    first = content.count("\n", 0, at)
    last = first + new_string.count("\n")
    lo, hi = max(0, first - context_lines), min(len(lines), last + context_lines + 1)
    return "\n".join(number_line(i + 1, lines[i]) for i in range(lo, hi))


def page(content: str, offset: int | None, limit: int | None) -> Page:
    """Number lines ``offset`` (1-based; 0 or None = 1) to ``offset + limit - 1``
    (None: to the end).

    >>> page("a\\nb\\nc\\n", 2, 5).text
    '2\\tb\\n3\\tc\\n4'
    >>> page("one\\r\\ntwo", None, None).text
    '1\\tone\\n2\\ttwo'
    >>> page("", None, None).text
    '<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>'
    """
    if not content:
        return Page(_EMPTY, 1, 0, 0, full=True)
    lines = content.replace("\r\n", "\n").split("\n")
    first = max(offset or 1, 1)
    if first > len(lines):
        return Page(_past_end(first, len(lines)), first, 0, len(lines), full=False)
    window = lines[first - 1 :] if limit is None else lines[first - 1 : first - 1 + limit]
    numbered = [number_line(first + i, line) for i, line in enumerate(window)]
    last = first + len(window) - 1
    if last == len(lines) and window[-1] == "":
        numbered[-1] = str(last)  # the empty line after a final newline: its number alone
    full = first == 1 and last == len(lines)
    return Page("\n".join(numbered), first, len(window), len(lines), full)


_EMPTY = "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"


def _past_end(offset: int, total: int) -> str:
    return (
        "<system-reminder>Warning: the file exists but is shorter than the provided offset "
        f"({offset}). The file has {total} lines.</system-reminder>"
    )
