"""The literal text every match of a regex must contain, for narrowing rows in SQL.

Conservative: when in doubt it returns None (no narrowing), never a wrong literal.
Only runs of plain characters at the top level of a pattern without alternation or
inline flags count;
a character followed by a quantifier that allows zero (``?``, ``*``, ``{0``) or by
``{`` at all is left out.

>>> required_literal(r"ERROR code \\d+"), required_literal(r"timeout after \\d+ms")
('ERROR code ', 'timeout after ')
>>> required_literal("a|b"), required_literal("(?i)abc"), required_literal("abcd?e")
(None, None, 'abc')
>>> required_literal(r"db\\.internal"), required_literal("colou?r")
('db.internal', 'colo')
>>> required_literal(r"\\p{Greek}+ x"), required_literal(r"\\x{41}BCD")
(None, 'BCD')
>>> required_literal(r"\\pLabc")
'abc'

"""

from __future__ import annotations

_META = set(".^$*+?()[]{}|\\")
_ZERO_OK = set("?*{")
_ESCAPED_LITERAL = set(".^$*+?()[]{}|\\-/ #&~\"'")
MIN_CHARS = 3


def required_literal(pattern: str) -> str | None:
    """The longest literal every match must contain (at least 3 chars), or None."""
    if "|" in pattern or "(?" in pattern:
        return None
    runs: list[str] = []
    current: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        char, width = _token(pattern, i)
        following = pattern[i + width] if i + width < len(pattern) else ""
        if char is None or depth or following in _ZERO_OK:
            runs.append("".join(current))
            current = []
        else:
            current.append(char)
            if following == "+":
                runs.append("".join(current))
                current = []
        if pattern[i] == "[":
            i = _class_end(pattern, i)
            continue
        if pattern[i] == "(":
            depth += 1
        elif pattern[i] == ")":
            depth = max(0, depth - 1)
        i += width
    runs.append("".join(current))
    best = max(runs, key=len)
    return best if len(best) >= MIN_CHARS else None


def _token(pattern: str, i: int) -> tuple[str | None, int]:
    """(the literal character at ``i`` or None, the token's width)."""
    char = pattern[i]
    if char == "\\":
        following = pattern[i + 1 : i + 2]
        if following in _ESCAPED_LITERAL and following:
            return following, 2
        if following in ("p", "P", "x") and pattern[i + 2 : i + 3] == "{":
            end = pattern.find("}", i)
            return None, (end + 1 - i) if end > 0 else len(pattern) - i
        return None, {"p": 3, "P": 3, "x": 4}.get(following, 2)
    if char in _META:
        return None, 1
    return char, 1


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at ``i``."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1
