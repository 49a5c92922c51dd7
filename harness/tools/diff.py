"""Unified diffs with a line number on every line, for telling the model what changed.

Hunks have the usual ``@@ -a,b +c,d @@`` header; each line then starts with
``' '`` (unchanged), ``'-'`` (removed: old line number) or ``'+'`` (added: new line
number), the number right-aligned in 6 columns and a tab, like Read's output.
"""

from __future__ import annotations

import difflib

from harness.tools.listing import split_lines

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


def _header(group: list[tuple[str, int, int, int, int]]) -> str:
    i1, i2 = group[0][1], group[-1][2]
    j1, j2 = group[0][3], group[-1][4]
    return f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@"


def _range(start: int, stop: int) -> str:
    length = stop - start
    return f"{start + 1 if length else start},{length}"
