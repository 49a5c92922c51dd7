"""Glob patterns translated to regular expressions (RE2, matched in linear time).

Supported: ``*`` (any run of characters except ``/``), ``**`` (any depth; ``**/``
also matches no directory at all), ``?`` (one character except ``/``), ``[…]`` and
``[!…]`` (character classes), ``{a,b}`` (alternatives, nestable), and ``\\`` to
escape the next character. Everything else is literal.
"""

from __future__ import annotations

import itertools
import re

from memory_store.files.grep import Regex, compile_full


def compile_glob(pattern: str) -> Regex:
    """A regex (RE2: linear time) that matches a whole string exactly when the glob does.

    >>> bool(compile_glob("**/*.md").fullmatch("a.md"))
    True
    >>> bool(compile_glob("*.md").fullmatch("a/b.md"))
    False
    >>> bool(compile_glob("/teams/{pay,ops}*/[!x]?.md").fullmatch("/teams/payments/ab.md"))
    True
    """
    return compile_full(translate(pattern))


def matching(texts: list[str], pattern: str) -> set[str]:
    """The ``texts`` (paths or names) that the glob matches whole, in one linear pass.

    >>> sorted(matching(["/a.md", "/b/c.md", "/d.txt"], "/**/*.md"))
    ['/a.md', '/b/c.md']
    """
    if not texts:
        return set()
    regex = compile_full(f"(?m)^(?:{translate(pattern)})$")
    return {m.group() for m in regex.finditer("\n".join(texts))}


def translate(pattern: str) -> str:
    """The regex source for ``pattern`` (without anchors; use ``fullmatch``).

    Paths hold no newline (``paths`` refuses control characters), so classes leave
    ``\\n`` out and ``.`` does not match it: many paths can be matched in one pass over
    their newline-joined text (``matching``).

    >>> translate("a*/**/b?")
    'a[^/\\\\n]*/(?:.*/)?b[^/\\\\n]'
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        piece, i = _translate_at(pattern, i)
        out.append(piece)
    return "".join(out)


def _translate_at(pattern: str, i: int) -> tuple[str, int]:
    """Translate the token starting at ``i``; return its regex and the next index."""
    char = pattern[i]
    if pattern.startswith("**/", i):
        return "(?:.*/)?", i + 3
    if pattern.startswith("**", i):
        return ".*", i + 2
    if char == "*":
        return "[^/\\n]*", i + 1
    if char == "?":
        return "[^/\\n]", i + 1
    if char == "\\" and i + 1 < len(pattern):
        return re.escape(pattern[i + 1]), i + 2
    if char == "[":
        return _char_class(pattern, i)
    if char == "{":
        return _alternatives(pattern, i)
    return re.escape(char), i + 1


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    start = j
    if j < len(pattern) and pattern[j] == "]":
        j += 1  # a leading ']' is literal
    end = pattern.find("]", j)
    if end < 0:
        return re.escape("["), i + 1
    body = pattern[start:end].replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
    body = body.replace("]", "\\]")
    return ("[^/\\n" if negate else "[") + body + "]", end + 1


def _alternatives(pattern: str, i: int) -> tuple[str, int]:
    depth, j, cuts = 0, i, []
    while j < len(pattern):
        if pattern[j] == "\\":
            j += 2
            continue
        if pattern[j] == "{":
            depth += 1
        elif pattern[j] == "}":
            depth -= 1
            if depth == 0:
                break
        elif pattern[j] == "," and depth == 1:
            cuts.append(j)
        j += 1
    else:
        return re.escape("{"), i + 1
    bounds = [i, *cuts, j]
    options = [translate(pattern[a + 1 : b]) for a, b in itertools.pairwise(bounds)]
    return "(?:" + "|".join(options) + ")", j + 1
