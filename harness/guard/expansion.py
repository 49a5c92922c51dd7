"""Parameter expansion (``$X``, ``${X…}``) over the simulated shell state.

Source: bash(1), Parameter Expansion. Each form returns the set of literal values the
expansion may produce: ``${X:-/memory}`` with ``X`` unknown is both "whatever X is" and
``/memory``, because either can happen. Values may hold the UNKNOWN marker; arrays and
``$@`` keep their elements apart with the SPLIT marker.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence

from tree_sitter import Node

from harness.guard.fields import SPLIT, UNKNOWN
from harness.guard.state import ShellState

OperandEvaluator = Callable[[Sequence[Node]], frozenset[str]]
"""Expands the word nodes after an operator (``${X:-<these>}``) to literal values."""

_NAME_NODES = ("variable_name", "special_variable_name", "subscript")
_DEFAULT_OPS = (":-", "-", ":=", "=")
_ALTERNATE_OPS = (":+", "+")
_TRIM_OPS = ("#", "##", "%", "%%")
_REPLACE_OPS = ("/", "//", "/#", "/%")
_CASE_OPS = ("^", "^^", ",", ",,")


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", "surrogateescape") if raw is not None else ""


def expand_parameter(node: Node, state: ShellState, operand: OperandEvaluator) -> frozenset[str]:
    """Every literal value a ``simple_expansion`` or ``expansion`` node may produce."""
    children = [c for c in node.children if c.type not in ("$", "${", "}")]
    if not children:
        return frozenset({UNKNOWN})
    if node.type == "simple_expansion" or len(children) == 1:
        return _lookup(children[0], state)
    first = children[0]
    if first.type == "#" and len(children) == 2:
        return frozenset({UNKNOWN})
    if first.type == "!" and len(children) >= 2:
        return _indirect(children[1], state)
    name_index = next((i for i, c in enumerate(children) if c.type in _NAME_NODES), None)
    if name_index is None:
        return frozenset({UNKNOWN})
    base = _lookup(children[name_index], state)
    rest = children[name_index + 1 :]
    if not rest:
        return base
    return _operate(_text(rest[0]), base, rest[1:], children[name_index], state, operand)


def _operate(
    op: str,
    base: frozenset[str],
    operands: list[Node],
    name_node: Node,
    state: ShellState,
    operand: OperandEvaluator,
) -> frozenset[str]:
    if op in _DEFAULT_OPS:
        result = _default(base, operand(operands), colon=op.startswith(":"))
        if op in (":=", "=") and name_node.type == "variable_name":
            state.assign(_text(name_node), result)
        return result
    if op in _ALTERNATE_OPS:
        return _alternate(base, operand(operands))
    if op in (":?", "?", "@"):
        return base
    if op in _TRIM_OPS:
        patterns = operand(operands)
        return frozenset(_trim(v, p, op) for v in base for p in patterns)
    if op in _REPLACE_OPS:
        return _replace_all(base, operands, op, operand)
    if op in _CASE_OPS:
        return frozenset(_case(v, op) for v in base)
    if op == ":":
        return _substring(base, operands)
    return frozenset({UNKNOWN})


def _lookup(node: Node, state: ShellState) -> frozenset[str]:
    if node.type == "subscript":
        name_node = node.child_by_field_name("name")
        index_node = node.child_by_field_name("index")
        values = state.lookup(_text(name_node)) if name_node else frozenset({UNKNOWN})
        return _element(values, _text(index_node) if index_node else "0")
    return state.lookup(_text(node))


def _element(values: frozenset[str], index: str) -> frozenset[str]:
    if index in ("@", "*"):
        return values
    if index.isdigit():
        position = int(index)
        return frozenset(_nth(value, position) for value in values)
    return frozenset(item for value in values for item in value.split(SPLIT))


def _nth(value: str, position: int) -> str:
    items = value.split(SPLIT)
    if UNKNOWN in value and position >= len(items):
        return UNKNOWN
    return items[position] if position < len(items) else ""


def _indirect(node: Node, state: ShellState) -> frozenset[str]:
    if node.type != "variable_name":
        return frozenset({UNKNOWN})
    names = state.lookup(_text(node))
    values: set[str] = set()
    for name in names:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+", name):
            values |= state.lookup(name)
        else:
            values.add(UNKNOWN)
    return frozenset(values)


def _default(base: frozenset[str], fallback: frozenset[str], *, colon: bool) -> frozenset[str]:
    maybe_unset = any(UNKNOWN in v or (colon and v == "") for v in base)
    kept = {v for v in base if not (colon and v == "")}
    return frozenset(kept | fallback) if maybe_unset else frozenset(kept or fallback)


def _alternate(base: frozenset[str], alternate: frozenset[str]) -> frozenset[str]:
    result: set[str] = set()
    for value in base:
        if UNKNOWN in value:
            result |= alternate | {""}
        elif value:
            result |= alternate
        else:
            result.add("")
    return frozenset(result)


def _trim(value: str, pattern: str, op: str) -> str:
    if UNKNOWN in value:
        return UNKNOWN
    cuts = range(len(value) + 1)
    if op in ("#", "##"):
        order = cuts if op == "#" else reversed(cuts)
        for cut in order:
            if fnmatch.fnmatchcase(value[:cut], pattern):
                return value[cut:]
        return value
    order = reversed(cuts) if op == "%" else cuts
    for cut in order:
        if fnmatch.fnmatchcase(value[cut:], pattern):
            return value[:cut]
    return value


def _replace_all(
    base: frozenset[str], operands: list[Node], op: str, operand: OperandEvaluator
) -> frozenset[str]:
    slash = next((i for i, n in enumerate(operands) if n.type == "/"), len(operands))
    patterns = operand(operands[:slash])
    replacements = operand(operands[slash + 1 :]) if slash < len(operands) else frozenset({""})
    return frozenset(
        _replace(value, pattern, replacement, op)
        for value in base
        for pattern in patterns
        for replacement in replacements
    )


def _replace(value: str, pattern: str, replacement: str, op: str) -> str:
    if UNKNOWN in value:
        return UNKNOWN
    if not pattern:
        return value
    regex = fnmatch.translate(pattern).removeprefix("(?s:").removesuffix(")\\Z")
    if op == "/#":
        regex = "^(?:" + regex + ")"
    elif op == "/%":
        regex = "(?:" + regex + ")$"
    count = 0 if op == "//" else 1
    try:
        return re.sub(regex, replacement.replace("\\", "\\\\"), value, count=count)
    except re.error:
        return UNKNOWN


def _case(value: str, op: str) -> str:
    if op == "^^":
        return value.upper()
    if op == ",,":
        return value.lower()
    if not value:
        return value
    return (value[0].upper() if op == "^" else value[0].lower()) + value[1:]


def _substring(base: frozenset[str], operands: list[Node]) -> frozenset[str]:
    numbers = [_text(n) for n in operands if n.type != ":"]
    try:
        offset = int(numbers[0]) if numbers else 0
        length = int(numbers[1]) if len(numbers) > 1 else None
    except ValueError:
        return frozenset({UNKNOWN})
    result = set()
    for value in base:
        if UNKNOWN in value:
            result.add(UNKNOWN)
            continue
        start = offset if offset >= 0 else max(len(value) + offset, 0)
        end = None if length is None else (start + length if length >= 0 else length)
        result.add(value[start:end])
    return frozenset(result)
