"""Bash quoting and brace rules on plain text (no tree, no state).

Sources: bash(1) sections QUOTING (backslash, double quotes, ``$'…'`` escapes) and
Brace Expansion (``{a,b}``, ``{x..y[..incr]}``, at least one unquoted comma or a valid
sequence, otherwise the braces are literal).

A long numeric sequence (``{1..500}``) is kept as its first and last
``SEQUENCE_SAMPLE`` numbers: digits never spell a namespace name and a number is never
``..``, so every member resolves the same way as a path (whether a field lands in
``/memory`` cannot depend on which number it holds).
"""

from __future__ import annotations

import itertools
import re

from harness.guard.fields import COMMA, LBRACE, LBRACKET, QMARK, RBRACE, STAR, plain

_UNQUOTED_MARKERS = {"*": STAR, "?": QMARK, "[": LBRACKET, "{": LBRACE, "}": RBRACE, ",": COMMA}
_UNQUOTED_SPECIAL = re.compile(r"[\\*?\[{},]")
_DOUBLE_QUOTE_ESCAPES = '$`"\\'
_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_C_NUMERIC = re.compile(r"x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})|U([0-9a-fA-F]{1,8})|([0-7]{1,3})")
SEQUENCE_SAMPLE = 8
"""Numbers kept from each end of a long numeric brace sequence."""

_SEQUENCE = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")


def unquoted_word(text: str) -> str:
    """Encode an unquoted word: backslash quotes the next character, globs and braces act.

    >>> plain(unquoted_word(r"/sk\\ills")) == "/skills"
    True
    """
    if not _UNQUOTED_SPECIAL.search(text):
        return text
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            out.append(text[index + 1])
            index += 2
            continue
        out.append(_UNQUOTED_MARKERS.get(char, char))
        index += 1
    return "".join(out)


def double_quoted_unescape(text: str) -> str:
    """Remove the backslashes bash removes inside double quotes (before ``$ ` " \\``)."""
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in _DOUBLE_QUOTE_ESCAPES:
            out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


def ansi_c_decode(body: str) -> str:
    r"""Decode the inside of ``$'…'``: ``\x6d`` is ``m``, ``\155`` is ``m``, ``\n`` a newline."""
    out = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\" or index + 1 >= len(body):
            out.append(char)
            index += 1
            continue
        nxt = body[index + 1]
        if nxt in _C_ESCAPES:
            out.append(_C_ESCAPES[nxt])
            index += 2
            continue
        if nxt == "c" and index + 2 < len(body):
            out.append(chr(ord(body[index + 2]) & 0x1F))
            index += 3
            continue
        match = _C_NUMERIC.match(body, index + 1)
        if match is None:
            out.append(char + nxt)
            index += 2
            continue
        hex_digits = match.group(1) or match.group(2) or match.group(3)
        code = int(hex_digits, 16) if hex_digits else int(match.group(4), 8)
        out.append(chr(min(code, 0x10FFFF)))
        index = match.end()
    return "".join(out)


def brace_expand(text: str, limit: int) -> list[str]:
    """Expand brace markers in encoded ``text``, giving at most ``limit`` words.

    >>> [plain(w) for w in brace_expand(unquoted_word("/{skills,memory}"), 10)]
    ['/skills', '/memory']
    """
    start = text.find(LBRACE)
    while start >= 0:
        alternatives, end = _alternatives(text, start)
        if alternatives is not None:
            prefix, suffix = text[:start], text[end + 1 :]
            words: list[str] = []
            for alternative in alternatives:
                words.extend(brace_expand(prefix + alternative + suffix, limit))
                if len(words) >= limit:
                    return words[:limit]
            return words
        start = text.find(LBRACE, start + 1)
    return [text]


def _alternatives(text: str, start: int) -> tuple[list[str] | None, int]:
    depth = 0
    commas: list[int] = []
    for index in range(start, len(text)):
        char = text[index]
        if char == LBRACE:
            depth += 1
        elif char == RBRACE:
            depth -= 1
            if depth == 0:
                inner = text[start + 1 : index]
                if commas:
                    cuts = [start, *commas, index]
                    return [text[a + 1 : b] for a, b in itertools.pairwise(cuts)], index
                return _sequence(inner), index
        elif char == COMMA and depth == 1:
            commas.append(index)
    return None, len(text)


def _sequence(inner: str) -> list[str] | None:
    match = _SEQUENCE.match(plain(inner))
    if match is None:
        return None
    first, last, step_text = match.groups()
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        lo, hi = int(first), int(last)
        numbers = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        if len(numbers) > 2 * SEQUENCE_SAMPLE:
            return [str(n) for n in (*numbers[:SEQUENCE_SAMPLE], *numbers[-SEQUENCE_SAMPLE:])]
        return [str(n) for n in numbers]
    if first.isalpha() and last.isalpha():
        lo, hi = ord(first), ord(last)
        codes = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [chr(c) for c in codes]
    return None
