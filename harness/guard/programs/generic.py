"""The default role of arguments: what the guard assumes about a command it does not know.

An unknown program may open any operand as a path, so every operand is checked (a
relative one against the simulated working directory). Option values are checked when
they look like paths (``--config=/skills/x``, ``-I/memory``); a bare word value is an
option value, not a file (``--sort-by=memory``). A sentence is never a path in the
virtual namespaces: ``"see /memory/x"`` resolves to ``/workspace/see /memory/x``.
Values of message-like long options (``--message``, ``--body``, ``--name`` …) are data.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.guard.fields import COMMA, plain
from harness.guard.invocation import Access, Invocation
from harness.guard.options import names, parse_args, spec

MESSAGE_OPTIONS = names(
    "--message --body --title --description --comment --text --subject --summary --note "
    "--notes --label --labels --name --query --msg --reason --annotation --grep --pattern "
    "--regex --filter --xpath --jq --template --format --expression --selector"
)
"""Long options whose value is text for people or a pattern, never a local path."""

GENERIC_SPEC = spec(*MESSAGE_OPTIONS)
_PIECE_CUT = re.compile(f"[=:,{COMMA}]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*=")
_SENTENCE = re.compile(r"\S\s+\S")


def looks_like_path(field: str) -> bool:
    """A value that names a file rather than a word (``/x``, ``./x``, ``~/x``, ``a/b``)."""
    text = plain(field)
    return text.startswith(("/", ".", "~", "file:")) or "/" in text


def touch_pieces(inv: Invocation, field: str, access: Access) -> None:
    """Check the absolute paths embedded after ``=``, ``:`` or ``,`` in ``field``."""
    pieces = _PIECE_CUT.split(field)
    for piece in pieces[1:]:
        if plain(piece).startswith("/"):
            inv.touch(piece, access)


def touch_operand(inv: Invocation, field: str, access: Access) -> None:
    """An operand of an unknown program: a path, or ``@path``, or ``NAME=path``."""
    text = plain(field)
    if text.startswith("@"):
        inv.touch(field[1:], access)
        return
    if _ASSIGNMENT.match(text):
        value = field[text.index("=") + 1 :]
        if looks_like_path(value):
            inv.touch(value, access)
        return
    inv.touch(field, access)
    touch_pieces(inv, field, access)


def touch_value(inv: Invocation, field: str, access: Access) -> None:
    """An option value of an unknown program: checked when it looks like a path."""
    text = plain(field)
    if text.startswith("@"):
        inv.touch(field[1:], access)
    elif looks_like_path(field):
        inv.touch(field, access)
    touch_pieces(inv, field, access)


def touch_attached(inv: Invocation, field: str, access: Access) -> None:
    """A short option with a path glued on (``-I/memory``, ``-XX:Dump=/skills/x``)."""
    text = plain(field)
    if text.startswith("-") and not text.startswith("--") and "/" in text:
        inv.touch(field[text.index("/") :], access)


def generic(inv: Invocation, access: Access = Access.READ) -> None:
    """Check ``inv``'s arguments under the unknown-program assumptions above."""
    generic_fields(inv, inv.args, access)


def unknown_program(inv: Invocation) -> None:
    """A program the table does not know: like ``generic``, and an argument holding
    whitespace is taken for text (``notify -s "/incident/INC-1 resolved"``)."""
    generic_fields(inv, [field for field in inv.args if not _SENTENCE.search(plain(field))])


def generic_fields(inv: Invocation, fields: Sequence[str], access: Access = Access.READ) -> None:
    """Check ``fields`` (arguments of an unknown program) under the assumptions above."""
    for field in fields:
        touch_attached(inv, field, access)
    for arg in parse_args(fields, GENERIC_SPEC):
        if arg.value is None or arg.option in MESSAGE_OPTIONS:
            continue
        if arg.option is None:
            touch_operand(inv, arg.value, access)
        else:
            touch_value(inv, arg.value, access)


def touch_all(inv: Invocation, fields: Sequence[str], access: Access) -> None:
    """Each of ``fields`` is a path the program opens."""
    for field in fields:
        inv.touch(field, access)
