"""Redirections for the bash guard's walk: files opened by ``<``, ``>``, ``>>``, ``&>``, ``<>``.

A redirection target is a path the shell itself opens, whatever the command does, so it
is checked before the command runs. Redirections also feed standard input: a
here-document (lifted out by ``bash_source``), a here-string, or a file this same command
wrote with known text; the command's own handler decides what that input means (data
for ``cat``, code for ``sh``). What a command prints into a ``>`` file is remembered, so
``echo 'ls /memory' > x.sh; sh x.sh`` is followed into ``x.sh``.

tree-sitter-bash quirk: in ``cat >/o f g`` the words after the target hang off the
redirect node; they are arguments of the command and are handed back as such.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tree_sitter import Node

from harness.guard.fields import TAINT, UNKNOWN, plain
from harness.guard.invocation import Access
from harness.guard.paths import resolve_directory
from harness.guard.shape import Redirected
from harness.guard.source import Heredoc
from harness.guard.state import UNKNOWN_STREAM, ShellState, Stream
from harness.guard.words import node_text, stream_value

if TYPE_CHECKING:
    from harness.guard.walker import Walker

_OUTPUT_OPERATORS = (">", ">>", "&>", "&>>", ">|")
_HEREDOC_PARAMETER = re.compile(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")

OutputFile = tuple[str, bool]
"""A file standard output goes to: (encoded field, appended with ``>>``)."""


def redirected(walker: Walker, shape: Redirected, state: ShellState, stdin: Stream) -> Stream:
    """A command with redirections: check targets, feed input, remember written text."""
    stdin, extra, outputs = apply_redirects(walker, shape.redirects, state, stdin)
    body = shape.body
    if body is None:
        return Stream("")
    if isinstance(body, Node) and body.type == "command":
        out = walker.command(body, state, stdin, extra)
    else:
        out = walker.shape(body, state, stdin)
    if not outputs:
        return out
    _remember_output(out, outputs, state)
    return Stream("")


def bare_redirect(walker: Walker, node: Node, state: ShellState, stdin: Stream) -> Stream:
    """A redirection with no command (``$(< file)``): the shell opens the file."""
    apply_redirects(walker, [node], state, stdin)
    return UNKNOWN_STREAM


def _remember_output(out: Stream, outputs: list[OutputFile], state: ShellState) -> None:
    for target, append in outputs:
        paths = resolve_directory(target, state.cwd) - {UNKNOWN}
        if out.taint:
            state.downloads.update(paths)
        for path in paths:
            known = out.text is not None and not out.taint
            before = state.written.get(path, "") if append else ""
            state.written[path] = before + (out.text or "") if known else ""


def apply_redirects(
    walker: Walker, nodes: Sequence[Node], state: ShellState, stdin: Stream
) -> tuple[Stream, list[Node], list[OutputFile]]:
    """Check redirection targets; return (stdin, stray argument nodes, stdout files)."""
    extra: list[Node] = []
    outputs: list[OutputFile] = []
    for node in nodes:
        if node.type == "herestring_redirect":
            stdin = _herestring(walker, node, state)
        elif node.type == "heredoc_redirect":
            body = next((c for c in node.children if c.type == "heredoc_body"), None)
            stdin = Stream(node_text(body) if body is not None else "")
        else:
            stdin, more = _file_redirect(walker, node, state, stdin, outputs)
            extra.extend(more)
    return stdin, extra, outputs


def _file_redirect(
    walker: Walker, node: Node, state: ShellState, stdin: Stream, outputs: list[OutputFile]
) -> tuple[Stream, list[Node]]:
    destinations = node.children_by_field_name("destination")
    operator = next((c.type for c in node.children if not c.is_named), "")
    if operator == "<" and any(c.type == "ERROR" and node_text(c) == ">" for c in node.children):
        operator = "<>"  # tree-sitter-bash reads "<>" (open read-write) as "<" and an error
    descriptor = node.child_by_field_name("descriptor")
    if not destinations:
        return stdin, []
    first = destinations[0]
    if operator in ("<&", ">&", "<&-", ">&-") and first.type == "number":
        return stdin, destinations[1:]
    access = Access.READ if operator in ("<", "<&") else Access.WRITE
    to_stdout = descriptor is None or node_text(descriptor) == "1"
    for alternative in walker.evaluator(state).fields(first):
        for field in alternative:
            heredoc = walker.source.heredocs.get(plain(field))
            if heredoc is not None:
                stdin = _heredoc_stream(walker, heredoc, state)
                continue
            walker.touch(field, access, state, hint="redirect")
            if operator in ("<", "<>"):
                content = walker.known_content(field, state)
                stdin = UNKNOWN_STREAM if content is None else Stream(content)
            if operator in _OUTPUT_OPERATORS and to_stdout:
                outputs.append((field, operator in (">>", "&>>")))
    return stdin, destinations[1:]


def _herestring(walker: Walker, node: Node, state: ShellState) -> Stream:
    values = [
        " ".join(alternative)
        for child in node.children
        if child.is_named
        for alternative in walker.evaluator(state).fields(child)
    ]
    text = values[0] if values else ""
    if TAINT in text:
        return Stream(None, "download")
    return Stream(None) if UNKNOWN in text else Stream(plain(text) + "\n")


def _heredoc_stream(walker: Walker, heredoc: Heredoc, state: ShellState) -> Stream:
    """The body bash feeds: with an unquoted delimiter, ``$VAR`` and ``$(…)`` expand."""
    if not heredoc.expands:
        return Stream(heredoc.body)
    body = heredoc.body
    for inner in _command_substitutions(body):
        out = walker.run_shell(inner, state.copy(), {}, None, UNKNOWN_STREAM, current=True)
        body = body.replace(f"$({inner})", stream_value(out))

    def parameter(match: re.Match[str]) -> str:
        name = match.group(1).strip("{}")
        values = sorted(state.lookup(name)) if name.isidentifier() else [UNKNOWN]
        return values[0] if values else ""

    body = _HEREDOC_PARAMETER.sub(parameter, body)
    taint = "download" if TAINT in body else None
    return Stream(None if UNKNOWN in body else body, taint)


def _command_substitutions(body: str) -> list[str]:
    """The ``…`` of each top-level ``$(…)`` in here-document text."""
    found = []
    start = body.find("$(")
    while start >= 0:
        depth, index = 0, start + 1
        while index < len(body):
            if body[index] == "(":
                depth += 1
            elif body[index] == ")":
                depth -= 1
                if depth == 0:
                    found.append(body[start + 2 : index])
                    break
            index += 1
        start = body.find("$(", index)
    return found
