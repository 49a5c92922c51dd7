"""The shape bash gives a list, a pipeline and a redirection, fixed where tree-sitter errs.

bash(1), SHELL GRAMMAR: a redirection belongs to one simple or compound command, a
pipeline joins commands, and a list joins pipelines with ``&&`` / ``||``. tree-sitter-bash
instead hangs a redirection or a pipe that follows a list on the whole list:

- ``a && b > f`` parses as ``(a && b) > f``; bash runs ``a && (b > f)``, so the
  redirection sees the working directory and variables ``a`` set (``cd / && echo hi >
  memory/x`` writes ``/memory/x``);
- ``a && b 2>&1 | c`` parses as ``(a && b 2>&1) | c``; bash runs ``a && (b 2>&1 | c)``,
  so ``c`` runs after ``a`` in the same shell state, not in a fork of the start state.

``reshape`` turns those three node types into the shape bash runs (``AndOr``, ``Piped``,
``Redirected``), re-associating redirections and pipes to the last command of the list.
Every other node is returned as it is; the walker runs shapes (``walker.Walker.shape``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

REDIRECT_NODES = ("file_redirect", "herestring_redirect", "heredoc_redirect")
"""Node types of one redirection."""

_SKIPPED = ("comment",)


@dataclass(frozen=True)
class AndOr:
    """``a && b || c``: ``operators[i]`` joins ``operands[i]`` and ``operands[i + 1]``."""

    operands: tuple[Shape, ...]
    operators: tuple[str, ...]


@dataclass(frozen=True)
class Piped:
    """``a | b | c``: each stage's output is the next one's input."""

    stages: tuple[Shape, ...]


@dataclass(frozen=True)
class Redirected:
    """``body`` run with ``redirects`` (nodes in ``REDIRECT_NODES``); body None: no command."""

    body: Shape | None
    redirects: tuple[Node, ...]


Shape = Node | AndOr | Piped | Redirected
"""A statement as bash runs it: a tree-sitter node or a re-associated list/pipe/redirect."""


def reshape(node: Node) -> Shape:
    """The shape bash runs for ``node`` (``list``, ``pipeline``, ``redirected_statement``).

    >>> import tree_sitter, tree_sitter_bash
    >>> parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    >>> shape = reshape(parser.parse(b"cd / && ls > f").root_node.children[0])
    >>> [type(operand).__name__ for operand in shape.operands]
    ['Node', 'Redirected']
    """
    if node.type == "list":
        return _and_or(node)
    if node.type == "pipeline":
        return _piped(node)
    if node.type == "redirected_statement":
        return _redirected(node)
    return node


def _and_or(node: Node) -> AndOr:
    operands: list[Shape] = []
    operators: list[str] = []
    for child in node.children:
        if child.type in ("&&", "||"):
            operators.append(child.type)
        elif child.is_named and child.type not in _SKIPPED:
            shape = reshape(child)
            if isinstance(shape, AndOr):
                operands.extend(shape.operands)
                operators.extend(shape.operators)
            else:
                operands.append(shape)
    return AndOr(tuple(operands), tuple(operators))


def _piped(node: Node) -> Shape:
    stages: list[Shape] = []
    for child in node.children:
        if child.is_named and child.type not in _SKIPPED:
            shape = reshape(child)
            stages.extend(shape.stages if isinstance(shape, Piped) else (shape,))
    first = stages[0] if stages else None
    if isinstance(first, AndOr) and first.operands:
        last = first.operands[-1]
        head = last.stages if isinstance(last, Piped) else (last,)
        joined = Piped((*head, *stages[1:]))
        return AndOr((*first.operands[:-1], joined), first.operators)
    return Piped(tuple(stages))


def _redirected(node: Node) -> Shape:
    body = node.child_by_field_name("body")
    redirects = tuple(child for child in node.children if child.type in REDIRECT_NODES)
    if body is None:
        return Redirected(None, redirects)
    return _attach(reshape(body), redirects)


def _attach(shape: Shape, redirects: tuple[Node, ...]) -> Shape:
    """Give ``redirects`` to the last command of ``shape`` (a list or pipe's last part)."""
    if isinstance(shape, AndOr) and shape.operands:
        last = _attach(shape.operands[-1], redirects)
        return AndOr((*shape.operands[:-1], last), shape.operators)
    if isinstance(shape, Piped) and shape.stages:
        return Piped((*shape.stages[:-1], _attach(shape.stages[-1], redirects)))
    return Redirected(shape, redirects)
