"""What changed in a file, for telling the model: the new lines around each change
(``changed_lines``, Claude Code 2.1.336's change notices), or a unified diff with a line
number on every line (``numbered_diff``).

Diff hunks have the usual ``@@ -a,b +c,d @@`` header; each line then starts with
``' '`` (unchanged), ``'-'`` (removed: old line number) or ``'+'`` (added: new line
number), the number right-aligned in 6 columns and a tab.
"""

from __future__ import annotations

import difflib

from harness.tools.listing import number_line, split_lines

CONTEXT_LINES = 2
MAX_DIFF_LINES = 200


def numbered_diff(old: str, new: str, *, max_lines: int = MAX_DIFF_LINES) -> str:
    """The changes from ``old`` to ``new``; empty when they are equal.

    >>> numbered_diff("a\\nb\\nc\\n", "a\\nB\\nc\\n").split("\\n")
    ['@@ -1,3 +1,3 @@', '      1\\ta', '-     2\\tb', '+     2\\tB', '      3\\tc']
    """
    a, b = split_lines(old), split_lines(new)
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        out.append(_header(group))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(f" {j + 1:>6}\t{b[j]}" for j in range(j1, j2))
                continue
            out.extend(f"-{i + 1:>6}\t{a[i]}" for i in range(i1, i2))
            out.extend(f"+{j + 1:>6}\t{b[j]}" for j in range(j1, j2))
    if len(out) > max_lines:
        left = len(out) - max_lines
        out = [*out[:max_lines], f"... ({left} more diff lines not shown; Read the file)"]
    return "\n".join(out)


def changed_lines(old: str, new: str, *, max_lines: int = MAX_DIFF_LINES) -> str:
    """The lines of ``new`` around each change from ``old``, numbered as Read numbers
    them, groups apart separated by ``...``; "" when nothing changed.

    >>> changed_lines("a\\nb\\nc\\nd\\ne\\nf\\ng\\n", "a\\nB\\nc\\nd\\ne\\nf\\ng\\n").split("\\n")
    ['1\\ta', '2\\tB', '3\\tc', '4\\td']
    """
    a, b = split_lines(old), split_lines(new)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    groups: list[str] = []
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        first, last = group[0][3], group[-1][4]
        groups.append("\n".join(number_line(j + 1, b[j]) for j in range(first, last)))
    lines = "\n...\n".join(g for g in groups if g).split("\n")
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"... ({len(lines) - max_lines} more lines; Read the file)"]
    return "\n".join(lines) if groups else ""


def _header(group: list[tuple[str, int, int, int, int]]) -> str:
    i1, i2 = group[0][1], group[-1][2]
    j1, j2 = group[0][3], group[-1][4]
    return f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@"


def _range(start: int, stop: int) -> str:
    length = stop - start
    return f"{start + 1 if length else start},{length}"
