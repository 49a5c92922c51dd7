"""Compound statements for the bash guard's walk: how control flow moves the shell state.

- a subshell ``( … )``, a pipeline stage and a function body run on a *copy* of the state
  (bash forks for them), so a ``cd`` inside does not leak out;
- ``a && b || c`` (grouped as bash groups it, see ``shape``): each operand runs in the
  state where the previous one succeeded or failed; afterwards any of those states is
  possible (their union);
- ``if`` / ``case``: each branch on a copy, then the union of all branches and of "no
  branch ran";
- ``for x in …``: a short list runs the body once per item in order (a ``cd`` in the
  body moves step by step); a long one runs it once with ``x`` standing for any item;
- assignments, ``export``/``declare``/``local``/``readonly``, ``unset``;
- ``[ … ]`` / ``[[ … ]]``: file tests (``-d``, ``-f`` …, ``-nt``) open paths; string
  comparisons and pattern matches (``== /memory/*``) are mentions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tree_sitter import Node

from harness.guard.fields import SPLIT, plain
from harness.guard.invocation import Access
from harness.guard.programs.files import FILE_TESTS
from harness.guard.shape import AndOr, Piped
from harness.guard.state import MAX_VALUES, UNKNOWN_STREAM, ShellState, Stream, join_streams
from harness.guard.words import node_text

if TYPE_CHECKING:
    from harness.guard.walker import Walker

Statement = Callable[["Walker", Node, ShellState, Stream], Stream]

_TEST_NESTING = ("unary_expression", "binary_expression", "parenthesized_expression")


def subshell(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``( … )``: the body runs on a copy of the state."""
    return walker.block(node.children, state.copy(), stdin)


def and_or(walker: Walker, shape: AndOr, state: ShellState, stdin: Stream) -> Stream:
    """``a && b || c``: each operand in the state where the previous one succeeded/failed."""
    operands, operators = shape.operands, shape.operators
    if not operands:
        return Stream("")
    outputs = [walker.shape(operands[0], state, stdin)]
    succeeded, failed = state.copy(), state.copy()
    for operator, operand in zip(operators, operands[1:], strict=False):
        branch = (succeeded if operator == "&&" else failed).copy()
        outputs.append(walker.shape(operand, branch, stdin))
        if operator == "&&":
            failed.merge(branch)
            succeeded = branch
        else:
            succeeded.merge(branch)
            failed = branch
    succeeded.merge(failed)
    state.assume(succeeded)
    return join_streams(outputs)


def piped(walker: Walker, shape: Piped, state: ShellState, stdin: Stream) -> Stream:
    """``a | b``: each stage on a copy; one stage's output is the next one's input."""
    current = stdin
    for stage in shape.stages:
        current = walker.shape(stage, state.copy(), current)
    return current


def branches(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``if`` / ``case``: conditions in order, each branch on a copy, then the union."""
    outputs, states = [], []
    body: list[Node] = []
    for index, child in enumerate(node.children):
        field = node.field_name_for_child(index)
        if field in ("condition", "value"):
            outputs.append(walker.statement(child, state, stdin))
        elif child.type in ("elif_clause", "else_clause", "case_item"):
            branch = state.copy()
            outputs.append(_branch_body(walker, child, branch, stdin))
            states.append(branch)
        elif child.is_named:
            body.append(child)
    if body:
        branch = state.copy()
        outputs.append(walker.block(body, branch, stdin))
        states.append(branch)
    for branch in states:
        state.merge(branch)
    return join_streams(outputs)


def _branch_body(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    kept = [
        child
        for index, child in enumerate(node.children)
        if node.field_name_for_child(index) != "value"
    ]
    return walker.block(kept, state, stdin)


def for_loop(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``for x in …; do …; done`` (and ``select``)."""
    variable = node.child_by_field_name("variable")
    body = node.child_by_field_name("body")
    values = node.children_by_field_name("value")
    evaluator = walker.evaluator(state)
    items: list[str] = []
    for value in values:
        for alternative in evaluator.fields(value):
            for field in alternative:
                walker.check_glob_read(field, state)
                items.append(plain(field))
    name = node_text(variable) if variable is not None else "_"
    if not values:
        rounds = [state.lookup("@")]
    elif len(items) <= MAX_VALUES:
        rounds = [frozenset({item}) for item in items]
    else:
        rounds = [frozenset(items)]
    outputs = []
    for item in rounds:
        state.assign(name, item)
        if body is not None:
            outputs.append(walker.statement(body, state, stdin))
    return join_streams(outputs)


def function_definition(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``f() { … }``: remember the body; it runs (in the caller's shell) when ``f`` is called."""
    name = node.child_by_field_name("name")
    body = node.child_by_field_name("body")
    if name is not None and body is not None:
        state.functions[node_text(name)] = body
    return Stream("")


def assignment(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``NAME=value`` on its own."""
    name, values = assigned(walker, node, state)
    if name:
        state.assign(name, values)
    return Stream("")


def assigned(walker: Walker, node: Node, state: ShellState) -> tuple[str, frozenset[str]]:
    """The name and possible values of a ``variable_assignment`` node (``+=`` appends)."""
    name_node = node.child_by_field_name("name")
    value_node = node.child_by_field_name("value")
    if name_node is None:
        return "", frozenset()
    element = name_node.type == "subscript"
    inner = name_node.child_by_field_name("name") if element else name_node
    name = node_text(inner) if inner is not None else ""
    values = walker.evaluator(state).value(value_node) if value_node else frozenset({""})
    if element or any(child.type == "+=" for child in node.children):
        old = state.lookup(name) if state.is_set(name) else frozenset({""})
        joiner = SPLIT if element else ""
        values = frozenset(f"{o}{joiner if o else ''}{v}" for o in old for v in values)
    return name, values


def declaration(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``export`` / ``declare`` / ``typeset`` / ``local`` / ``readonly``."""
    keyword = node.children[0].type if node.children else ""
    flags = "".join(node_text(c) for c in node.children if node_text(c).startswith("-"))
    exported = keyword == "export" or "x" in flags
    for child in node.children:
        if child.type == "variable_assignment":
            name, values = assigned(walker, child, state)
            if name:
                state.assign(name, values, exported=exported or None)
        elif child.type == "variable_name" and exported:
            state.export(node_text(child))
        elif child.type == "variable_name" and not state.is_set(node_text(child)):
            state.assign(node_text(child), frozenset({""}))
        elif child.type not in ("word", "variable_name") and child.is_named:
            walker.statement(child, state, stdin)
    return Stream("")


def unset(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``unset NAME…``."""
    for child in node.children:
        if child.type == "variable_name":
            state.unset(node_text(child))
        elif child.is_named:
            walker.evaluator(state).fields(child)  # ``unset $(…)`` runs the substitution
    return Stream("")


def test(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``[ … ]`` / ``[[ … ]]``."""
    for child in node.children:
        if child.is_named:
            _test_expression(walker, child, state)
    return Stream("")


def _test_expression(walker: Walker, node: Node, state: ShellState) -> None:
    operator = node.child_by_field_name("operator")
    op = node_text(operator) if operator is not None else ""
    operands = [c for c in node.children if c.is_named and c != operator]
    opens_files = (node.type == "unary_expression" and op in FILE_TESTS) or (
        node.type == "binary_expression" and op in ("-ef", "-nt", "-ot")
    )
    if opens_files:
        for operand in operands:
            for alternative in walker.evaluator(state).fields(operand):
                for field in alternative:
                    walker.touch(field, Access.READ, state)
    elif node.type in _TEST_NESTING or node.type == "negated_expression":
        for operand in operands:
            _test_expression(walker, operand, state)
    else:
        walker.evaluator(state).fields(node)


def substitution(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """``$(…)`` / ``<(…)`` met as a statement (inside arithmetic, say): walk it."""
    walker.block(node.children, state.copy(), UNKNOWN_STREAM)
    return Stream("")


COMPOUND_STATEMENTS: dict[str, Statement] = {
    "subshell": subshell,
    "if_statement": branches,
    "case_statement": branches,
    "for_statement": for_loop,
    "function_definition": function_definition,
    "variable_assignment": assignment,
    "declaration_command": declaration,
    "unset_command": unset,
    "test_command": test,
    "command_substitution": substitution,
    "process_substitution": substitution,
}
"""Statement node type -> how the walk runs it."""
