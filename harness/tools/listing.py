"""Numbered listings of file content, like ``cat -n`` (Read's output format).

Each line is ``{number}\\t{text}`` (Claude Code 2.1's form: the number unpadded, a
tab, the text); numbers start at 1. Lines are split on
``\\n`` only, and a trailing newline does not make an extra empty line.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_LIMIT_LINES = 2000  # Claude Code's Read default
MAX_LINE_CHARS = 2000  # Claude Code cuts longer lines


@dataclass(frozen=True)
class Page:
    """A window of a file, numbered.

    Attributes:
        text: the numbered lines, or a notice for an empty file / an offset past the end.
        first_line: number of the first line shown (1-based).
        shown_lines: how many lines were shown.
        total_lines: lines in the whole file.
        full: True when every line of the file was shown (from the first to the last),
            even if some lines longer than ``MAX_LINE_CHARS`` were cut in the display:
            that counts as a complete read for read-before-write, as in Claude Code;
            the cut note points to Edit, which leaves those lines as they are.
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
    return "\n".join(number_line(i + 1, lines[i][:MAX_LINE_CHARS]) for i in range(lo, hi))


def page(content: str, offset: int | None, limit: int | None) -> Page:
    """Number lines ``offset`` (1-based; 0 or None = 1) to ``offset + limit - 1``.

    >>> page("a\\nb\\nc\\n", 2, 5).text
    '2\\tb\\n3\\tc'
    >>> page("", None, None).text
    '<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>'
    """
    lines = split_lines(content)
    first = max(offset or 1, 1)
    count = limit if limit is not None else DEFAULT_LIMIT_LINES
    if not lines:
        return Page(_EMPTY, 1, 0, 0, full=True)
    if first > len(lines):
        return Page(_past_end(first, len(lines)), first, 0, len(lines), full=False)
    window = lines[first - 1 : first - 1 + count]
    cut = sum(1 for line in window if len(line) > MAX_LINE_CHARS)
    text = "\n".join(number_line(first + i, line[:MAX_LINE_CHARS]) for i, line in enumerate(window))
    last = first + len(window) - 1
    if last < len(lines):
        text += (
            f"\n\n(Showing lines {first}-{last} of {len(lines)}. "
            "Use offset and limit to read the rest.)"
        )
    if cut:
        text += (
            f"\n\n({cut} line(s) longer than {MAX_LINE_CHARS} characters were cut in this "
            "view. To change the file without retyping those lines, use Edit.)"
        )
    full = first == 1 and last == len(lines)
    return Page(text, first, len(window), len(lines), full)


_EMPTY = "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"


def _past_end(offset: int, total: int) -> str:
    return (
        "<system-reminder>Warning: the file exists but is shorter than the provided offset "
        f"({offset}). The file has {total} lines.</system-reminder>"
    )
