"""Encoded field text: how the bash guard carries one shell word through expansion.

The guard evaluates a word the way bash would (quote removal, parameter and brace
expansion, field splitting) but keeps what bash would still act on as private
marker characters inside an ordinary ``str``:

- ``STAR``, ``QMARK``, ``LBRACKET``: unquoted glob characters (a quoted ``*`` stays a
  plain ``*`` and names a literal file);
- ``LBRACE``, ``RBRACE``, ``COMMA``: unquoted brace-expansion syntax;
- ``SPLIT``: unquoted whitespace from an expansion, where field splitting cuts;
- ``EMPTY``: an empty quoted string, which still makes a field;
- ``UNKNOWN``: text the guard cannot know (an unset environment variable, the output of
  an unsimulated command);
- ``TAINT``: text that came from a download or a decoder (see ``bash_analysis``).

A *field* is the encoded text of one argument after splitting; ``plain`` turns it back
into what a program would see (globs unexpanded).
"""

from __future__ import annotations

import re

STAR = "\ue003"
QMARK = "\ue004"
LBRACKET = "\ue005"
LBRACE = "\ue000"
RBRACE = "\ue001"
COMMA = "\ue002"
EMPTY = "\ue006"
SPLIT = "\x00"
UNKNOWN = "\x01"
TAINT = "\x02"

GLOB_MARKERS = STAR + QMARK + LBRACKET
_GLOB_MARKER = re.compile(f"[{GLOB_MARKERS}]")
_TO_PLAIN = str.maketrans(
    {
        STAR: "*",
        QMARK: "?",
        LBRACKET: "[",
        LBRACE: "{",
        RBRACE: "}",
        COMMA: ",",
        EMPTY: None,
        SPLIT: " ",
    }
)
_GLOB_OF = {"*": STAR, "?": QMARK, "[": LBRACKET}
_IFS_WHITESPACE = " \t\n"
_POSIX_CLASSES = {
    "alpha": "a-zA-Z",
    "lower": "a-z",
    "upper": "A-Z",
    "alnum": "a-zA-Z0-9",
    "digit": "0-9",
    "xdigit": "0-9a-fA-F",
    "word": "a-zA-Z0-9_",
    "punct": "!-/:-@[-`{-~",
    "space": " \t\n",
    "print": " -~",
    "graph": "!-~",
}
_POSIX_CLASS = re.compile(r"\[:(" + "|".join(_POSIX_CLASSES) + r"):\]")


def plain(field: str) -> str:
    """Return the text a program would receive for ``field`` (markers turned back).

    >>> plain("/mem" + STAR)
    '/mem*'
    """
    return field.translate(_TO_PLAIN)


def visible(field: str) -> str:
    """Return ``plain(field)`` without the UNKNOWN and TAINT markers (for messages)."""
    return plain(field).replace(UNKNOWN, "").replace(TAINT, "")


def has_glob(field: str) -> bool:
    """Tell whether ``field`` holds an unquoted glob character."""
    return _GLOB_MARKER.search(field) is not None


def is_tainted(field: str) -> bool:
    """Tell whether ``field`` carries text from a download or a decoder."""
    return TAINT in field


def unquoted_value(value: str, ifs: str = _IFS_WHITESPACE) -> str:
    """Encode an expansion result used outside quotes: ``ifs`` characters split, globs act."""
    out = []
    for char in value:
        if char in ifs:
            out.append(SPLIT)
        else:
            out.append(_GLOB_OF.get(char, char))
    return "".join(out)


def as_glob(text: str) -> str:
    """Encode plain ``text`` whose ``*``, ``?`` and ``[`` are glob characters (find -path)."""
    return "".join(_GLOB_OF.get(char, char) for char in text)


def literal_value(encoded: str) -> str:
    """Turn an encoded word into the literal string an assignment would store."""
    return plain(encoded)


def glob_pattern(field: str) -> str:
    """Translate ``field`` to an ``fnmatch`` pattern: markers act, literal ``*?[`` do not.

    Bash bracket forms fnmatch lacks are rewritten: ``[^…]`` is ``[!…]`` and POSIX
    classes like ``[:alpha:]`` become ranges.

    >>> glob_pattern(LBRACKET + LBRACKET + ":lower:]]emory")
    '[a-z]emory'
    """
    out = []
    for char in field:
        if char == STAR:
            out.append("*")
        elif char == QMARK:
            out.append("?")
        elif char == LBRACKET:
            out.append("[")
        elif char in "*?[":
            out.append(f"[{char}]")
        else:
            out.append(plain(char))
    pattern = "".join(out).replace("[^", "[!")
    return _POSIX_CLASS.sub(lambda match: _POSIX_CLASSES[match.group(1)], pattern)


def fields_of(encoded: str) -> list[str]:
    """Cut an encoded word at SPLIT markers into fields, dropping empty unquoted ones.

    An empty quoted piece (``""``) keeps a field alive but adds nothing to a longer one.
    """
    return [field.replace(EMPTY, "") or EMPTY for field in encoded.split(SPLIT) if field]
