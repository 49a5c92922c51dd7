"""The bash guard's analysis: a walk over the tree-sitter-bash tree of one command.

The walk simulates what bash would do without running anything: statements in order,
with a ``ShellState`` (variables, working directories) that subshells, pipeline stages
and command substitutions copy and branches merge. Each simple command's words are
expanded (``bash_words``), its redirections checked, and its arguments handed to the
command table (``bash_commands``), which says which arguments are paths, patterns,
messages or code. Nested code (``bash -c``, ``eval``, ``| sh``, heredoc-fed shells,
interpreter code) is parsed and walked the same way, up to ``MAX_DEPTH`` levels.

The first path that resolves into ``/memory``, ``/skills`` or ``/incident`` stops the
walk with a ``Finding``; so do the policy refusals (downloaded or decoded text run as
code, parse errors that could hide a path, nesting too deep, expansion too large).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import tree_sitter
import tree_sitter_bash
from tree_sitter import Node

from .bash_builtins import (
    DIRECTORY_BUILTINS,
    STATE_BUILTINS,
    apply_state_builtin,
    change_directory,
    directory_target,
)
from .bash_commands import handler_for
from .bash_fields import TAINT, UNKNOWN, as_glob, is_tainted, plain
from .bash_invocation import Access, Finding
from .bash_literals import code_literals
from .bash_paths import (
    VIRTUAL_ROOTS,
    VirtualHit,
    glob_reads_virtual,
    resolve_directory,
    virtual_target,
)
from .bash_source import Heredoc, Source, prepare_source
from .bash_state import UNKNOWN_STREAM, ShellState, Stream
from .bash_words import WordEvaluator, node_text, stream_value, word_technique

MAX_DEPTH = 8
"""Most levels of nested code (``bash -c "eval '…'"``) the guard follows."""

MAX_STEPS = 20_000
"""Most statements and command calls one analysis may walk (nested code included)."""

_REDIRECTS = ("file_redirect", "herestring_redirect", "heredoc_redirect")
_OUTPUT_OPERATORS = (">", ">>", "&>", "&>>", ">|")
_RISKY_IN_ERROR = re.compile(r"/[^\s]*[*?\[{\\$]")
_HEREDOC_PARAMETER = re.compile(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")


class Refused(Exception):
    """Raised inside the walk to stop at the first finding (never escapes ``analyse``)."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.technique)
        self.finding = finding


@cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def analyse(command: str, *, cwd: str, home: str) -> Finding | None:
    """Walk ``command`` as bash would run it from ``cwd`` with ``HOME=home``.

    Returns:
        the first reason to refuse it, or None when it stays off the virtual namespaces.
    """
    state = ShellState.initial(cwd, home)
    walker = _Walker(prepare_source(command), depth=0, technique=None, budget=_Budget(command))
    try:
        walker.program(state, UNKNOWN_STREAM)
    except Refused as refusal:
        return refusal.finding
    return None


def _join(streams: Sequence[Stream]) -> Stream:
    texts = [stream.text for stream in streams]
    taint = next((stream.taint for stream in streams if stream.taint), None)
    if any(text is None for text in texts):
        return Stream(None, taint)
    return Stream("".join(text or "" for text in texts), taint)


def _could_hide_virtual(text: str) -> bool:
    return any(root in text for root in VIRTUAL_ROOTS) or bool(_RISKY_IN_ERROR.search(text))


@dataclass
class _Budget:
    """What all walkers of one analysis share: the command text and the steps taken."""

    command: str
    steps: int = 0


class _Walker:
    """Walks one parsed source (the command, or one piece of nested code)."""

    def __init__(
        self, source: Source, *, depth: int, technique: str | None, budget: _Budget
    ) -> None:
        self.source = source
        self.depth = depth
        self.technique = technique
        self.budget = budget
        self.command = budget.command
        self.tree = _parser().parse(source.text.encode("utf-8", "surrogateescape"))
        self.fd_streams: dict[str, Stream] = {}
        self.origins: dict[str, Node] = {}

    # -- entry ---------------------------------------------------------------------
    def program(self, state: ShellState, stdin: Stream) -> Stream:
        """Walk the whole source in ``state`` with ``stdin`` as its standard input."""
        root = self.tree.root_node
        if root.has_error:
            self._check_errors(root)
        return self.block(root.children, state, stdin)

    def _check_errors(self, node: Node) -> None:
        if node.type == "ERROR" or node.is_missing:
            region = node if node.type == "ERROR" or node.parent is None else node.parent
            text = node_text(region)
            text += "".join(self.source.heredocs[t].body for t in self.source.heredocs if t in text)
            if _could_hide_virtual(text):
                self.refuse("parse-error", detail=text.strip()[:80])
            return
        for child in node.children:
            if child.has_error or child.is_missing:
                self._check_errors(child)

    def _step(self) -> None:
        self.budget.steps += 1
        if self.budget.steps > MAX_STEPS:
            self.refuse("too-complex", detail=f"needs more than {MAX_STEPS:,} analysis steps")

    def refuse(
        self,
        technique: str,
        *,
        access: Access | None = None,
        path: str | None = None,
        detail: str = "",
    ) -> None:
        """Stop the walk with a finding."""
        raise Refused(Finding(technique, access, path, detail))

    # -- statements ----------------------------------------------------------------
    def block(self, nodes: Sequence[Node], state: ShellState, stdin: Stream) -> Stream:
        """Walk statements in order; their outputs concatenate."""
        outputs = [self.statement(node, state, stdin) for node in nodes if node.is_named]
        return _join(outputs) if outputs else Stream("")

    def statement(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        """Walk one statement node of any kind."""
        self._step()
        handler = _STATEMENTS.get(node.type)
        if handler is not None:
            return handler(self, node, state, stdin)
        if node.type in ("comment", "word", "number", "variable_name", "string"):
            return Stream("")
        return self.block(node.children, state, stdin)

    def _subshell(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        return self.block(node.children, state.copy(), stdin)

    def _list(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        """``a && b || c``: each operand runs in the state where the previous one succeeded
        (``&&``) or failed (``||``); afterwards any of those states is possible."""
        operands, operators = _flatten_list(node)
        if not operands:
            return Stream("")
        outputs = [self.statement(operands[0], state, stdin)]
        succeeded, failed = state.copy(), state.copy()
        for operator, operand in zip(operators, operands[1:], strict=False):
            branch = (succeeded if operator == "&&" else failed).copy()
            outputs.append(self.statement(operand, branch, stdin))
            if operator == "&&":
                failed.merge(branch)
                succeeded = branch
            else:
                succeeded.merge(branch)
                failed = branch
        succeeded.merge(failed)
        state.assume(succeeded)
        return _join(outputs)

    def _pipeline(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        current = stdin
        for stage in (child for child in node.children if child.is_named):
            current = self.statement(stage, state.copy(), current)
        return current

    def _redirected(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        body = node.child_by_field_name("body")
        redirects = [child for child in node.children if child.type in _REDIRECTS]
        stdin, extra, targets = self._redirects(redirects, state, stdin)
        if body is None:
            return Stream("")
        if body.type == "command":
            out = self._command(body, state, stdin, extra)
        else:
            out = self.statement(body, state, stdin)
        if not targets:
            return out
        for target, append in targets:
            paths = resolve_directory(target, state.cwd) - {UNKNOWN}
            if out.taint:
                state.downloads.update(paths)
            for path in paths:
                known = out.text is not None and not out.taint
                before = state.written.get(path, "") if append else ""
                state.written[path] = before + (out.text or "") if known else ""
        return Stream("")

    def _branches(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        """if / case: conditions in order, each branch on a copy, then the union."""
        outputs, branches = [], []
        body: list[Node] = []
        for index, child in enumerate(node.children):
            field = node.field_name_for_child(index)
            if field in ("condition", "value") and node.type != "case_item":
                outputs.append(self.statement(child, state, stdin))
            elif child.type in ("elif_clause", "else_clause", "case_item"):
                branch = state.copy()
                outputs.append(self._branch_body(child, branch, stdin))
                branches.append(branch)
            elif child.is_named:
                body.append(child)
        if body:
            branch = state.copy()
            outputs.append(self.block(body, branch, stdin))
            branches.append(branch)
        for branch in branches:
            state.merge(branch)
        return _join(outputs)

    def _branch_body(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        kept = [
            child
            for index, child in enumerate(node.children)
            if node.field_name_for_child(index) != "value"
        ]
        return self.block(kept, state, stdin)

    def _for(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        variable = node.child_by_field_name("variable")
        values = node.children_by_field_name("value")
        evaluator = self._evaluator(state)
        items: set[str] = set()
        for value in values:
            for alternative in evaluator.fields(value):
                for field in alternative:
                    self._check_glob_read(field, state)
                    items.add(plain(field))
        if variable is not None:
            name = node_text(variable)
            state.assign(name, frozenset(items) if values else state.lookup("@"))
        body = node.child_by_field_name("body")
        return self.statement(body, state, stdin) if body is not None else Stream("")

    def _function(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        body = node.child_by_field_name("body")
        if body is not None:
            self.statement(body, state.copy(), UNKNOWN_STREAM)
        return Stream("")

    def _assignment(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        name, values = self._assigned(node, state)
        if name:
            state.assign(name, values)
        return Stream("")

    def _assigned(self, node: Node, state: ShellState) -> tuple[str, frozenset[str]]:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        if name_node is None:
            return "", frozenset()
        element = name_node.type == "subscript"
        if element:
            inner = name_node.child_by_field_name("name")
            name = node_text(inner) if inner is not None else ""
        else:
            name = node_text(name_node)
        values = self._evaluator(state).value(value_node) if value_node else frozenset({""})
        if element or any(child.type == "+=" for child in node.children):
            old = state.lookup(name) if state.is_set(name) else frozenset({""})
            joiner = "" if not element else "\x00"
            values = frozenset(f"{o}{joiner if o else ''}{v}" for o in old for v in values)
        return name, values

    def _declaration(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        keyword = node.children[0].type if node.children else ""
        flags = "".join(node_text(c) for c in node.children if node_text(c).startswith("-"))
        exported = keyword == "export" or "x" in flags
        for child in node.children:
            if child.type == "variable_assignment":
                name, values = self._assigned(child, state)
                if name:
                    state.assign(name, values, exported=exported or None)
            elif child.type == "variable_name" and exported:
                state.export(node_text(child))
            elif child.type == "variable_name" and not state.is_set(node_text(child)):
                state.assign(node_text(child), frozenset({""}))
            elif child.type not in ("word", "variable_name") and child.is_named:
                self.statement(child, state, stdin)
        return Stream("")

    def _unset(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        for child in node.children:
            if child.type == "variable_name":
                state.unset(node_text(child))
        return Stream("")

    def _test(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        for child in node.children:
            if child.is_named:
                self._test_expression(child, state)
        return Stream("")

    def _test_expression(self, node: Node, state: ShellState) -> None:
        operator = node.child_by_field_name("operator")
        op = node_text(operator) if operator is not None else ""
        operands = [c for c in node.children if c.is_named and c != operator]
        if (node.type == "unary_expression" and op in _FILE_TESTS) or (
            node.type == "binary_expression" and op in ("-ef", "-nt", "-ot")
        ):
            for operand in operands:
                self._touch_node(operand, Access.READ, state)
        elif node.type in (
            "unary_expression",
            "binary_expression",
            "parenthesized_expression",
            "negated_expression",
        ):
            for operand in operands:
                self._test_expression(operand, state)
        else:
            self._evaluator(state).fields(node)

    def _touch_node(self, node: Node, access: Access, state: ShellState) -> None:
        for alternative in self._evaluator(state).fields(node):
            for field in alternative:
                self.touch(field, access, state)

    def _bare_redirect(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        """A redirection with no command (``$(< file)``, ``> file``): opens the file."""
        self._redirects([node], state, stdin)
        return UNKNOWN_STREAM

    def _substitution_statement(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        self.block(node.children, state.copy(), UNKNOWN_STREAM)
        return Stream("")

    # -- commands ------------------------------------------------------------------
    def _command_statement(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        return self._command(node, state, stdin, [])

    def _command(self, node: Node, state: ShellState, stdin: Stream, extra: list[Node]) -> Stream:
        env: dict[str, frozenset[str]] = {}
        name_node = None
        words: list[Node] = []
        redirects: list[Node] = []
        for index, child in enumerate(node.children):
            field = node.field_name_for_child(index)
            if child.type == "variable_assignment":
                name, values = self._assigned(child, state)
                env[name] = values
            elif child.type in _REDIRECTS:
                redirects.append(child)
            elif field == "name":
                name_node = child
            elif child.is_named or field == "argument":
                words.append(child)
        stdin, more, _ = self._redirects(redirects, state, stdin)
        if name_node is None or not node_text(name_node):
            for name, values in env.items():
                state.assign(name, values)
            return Stream("")
        evaluator = self._evaluator(state)
        vectors = evaluator.argv([name_node, *words, *more, *extra])
        if evaluator.truncated and any(root in self.command for root in VIRTUAL_ROOTS):
            self.refuse("too-complex", detail="expands to too many words")
        for vector in vectors:
            for field in vector:
                self._check_glob_read(field, state)
        if len(vectors) == 1:
            return self.dispatch(list(vectors[0]), state, env, stdin)
        return self._alternatives(vectors, state, env, stdin)

    def _alternatives(
        self,
        vectors: list[tuple[str, ...]],
        state: ShellState,
        env: Mapping[str, frozenset[str]],
        stdin: Stream,
    ) -> Stream:
        merged: ShellState | None = None
        outputs = []
        for vector in vectors:
            branch = state.copy()
            outputs.append(self.dispatch(list(vector), branch, env, stdin))
            if merged is None:
                merged = branch
            else:
                merged.merge(branch)
        if merged is not None:
            state.assume(merged)
        return outputs[0] if outputs else Stream("")

    def dispatch(
        self,
        argv: list[str],
        state: ShellState,
        env: Mapping[str, frozenset[str]],
        stdin: Stream,
        chdir: str | None = None,
    ) -> Stream:
        """Run one argument vector: builtins here, programs through the command table."""
        self._step()
        if not argv:
            return Stream("")
        if is_tainted(argv[0]):
            self.refuse("download-exec", detail="runs downloaded or decoded text as a command")
        name = plain(argv[0])
        if "/" in name:
            self.execute_file(argv[0], state)
        base = name.rsplit("/", 1)[-1]
        if base in DIRECTORY_BUILTINS:
            self._directory_builtin(base, argv[1:], state, env)
            return Stream("")
        if base in STATE_BUILTINS:
            apply_state_builtin(base, argv[1:], state, stdin)
            return Stream("")
        if base == "pwd":
            known = len(state.cwd) == 1 and UNKNOWN not in next(iter(state.cwd))
            return Stream(next(iter(state.cwd)) + "\n" if known else None)
        if chdir is not None:
            self.touch(chdir, Access.CHDIR, state)
            state = state.copy()
            state.change_directory(resolve_directory(chdir, state.cwd))
        call = _Call(self, base if UNKNOWN not in base else "", tuple(argv[1:]), state, env, stdin)
        handler_for(call.name)(call)
        return call.stdout if call.stdout is not None else Stream(None, stdin.taint)

    def _directory_builtin(
        self, name: str, args: list[str], state: ShellState, env: Mapping[str, frozenset[str]]
    ) -> None:
        targets = directory_target(name, args, state, env)
        cdpath = env.get("CDPATH") or (state.lookup("CDPATH") if state.is_set("CDPATH") else None)
        for target in list(targets):
            if cdpath and not plain(target).startswith(("/", ".")):
                entries = {entry for value in cdpath for entry in value.split(":") if entry}
                targets.extend(f"{entry}/{plain(target)}" for entry in sorted(entries))
        for target in targets:
            self.touch(target, Access.CHDIR, state, hint="cd")
        change_directory(name, targets, state)

    # -- redirections --------------------------------------------------------------
    def _redirects(
        self, nodes: Sequence[Node], state: ShellState, stdin: Stream
    ) -> tuple[Stream, list[Node], list[tuple[str, bool]]]:
        """Check redirection targets; return (stdin, stray argument nodes, stdout files).

        Each stdout file comes with whether it is appended to (``>>``).
        """
        extra: list[Node] = []
        targets: list[tuple[str, bool]] = []
        for node in nodes:
            if node.type == "herestring_redirect":
                stdin = self._herestring(node, state)
                continue
            if node.type == "heredoc_redirect":
                body = next((c for c in node.children if c.type == "heredoc_body"), None)
                stdin = Stream(node_text(body) if body is not None else "")
                continue
            stdin, more = self._file_redirect(node, state, stdin, targets)
            extra.extend(more)
        return stdin, extra, targets

    def _file_redirect(
        self, node: Node, state: ShellState, stdin: Stream, targets: list[tuple[str, bool]]
    ) -> tuple[Stream, list[Node]]:
        destinations = node.children_by_field_name("destination")
        operator = next((c.type for c in node.children if not c.is_named), "")
        descriptor = node.child_by_field_name("descriptor")
        if not destinations:
            return stdin, []
        first = destinations[0]
        if operator in ("<&", ">&", "<&-", ">&-") and first.type == "number":
            return stdin, destinations[1:]
        access = Access.READ if operator in ("<", "<&") else Access.WRITE
        for alternative in self._evaluator(state).fields(first):
            for field in alternative:
                heredoc = self.source.heredocs.get(plain(field))
                if heredoc is not None:
                    stdin = self._heredoc_stream(heredoc, state)
                    continue
                self.touch(field, access, state, hint="redirect")
                if operator == "<":
                    stdin = UNKNOWN_STREAM
                stdout = descriptor is None or node_text(descriptor) == "1"
                if operator in _OUTPUT_OPERATORS and stdout:
                    targets.append((field, operator in (">>", "&>>")))
        return stdin, destinations[1:]

    def _herestring(self, node: Node, state: ShellState) -> Stream:
        values = [
            " ".join(alternative)
            for child in node.children
            if child.is_named
            for alternative in self._evaluator(state).fields(child)
        ]
        text = values[0] if values else ""
        if TAINT in text:
            return Stream(None, "download")
        return Stream(None) if UNKNOWN in text else Stream(plain(text) + "\n")

    def _heredoc_stream(self, heredoc: Heredoc, state: ShellState) -> Stream:
        if not heredoc.expands:
            return Stream(heredoc.body)
        body = heredoc.body
        for inner in _command_substitutions(body):
            out = self.run_shell(inner, state.copy(), {}, None, UNKNOWN_STREAM, current=True)
            body = body.replace(f"$({inner})", stream_value(out))

        def parameter(match: re.Match[str]) -> str:
            name = match.group(1).strip("{}")
            values = sorted(state.lookup(name)) if name.isidentifier() else [UNKNOWN]
            return values[0] if values else ""

        body = _HEREDOC_PARAMETER.sub(parameter, body)
        taint = "download" if TAINT in body else None
        return Stream(None if UNKNOWN in body else body, taint)

    # -- effects used by command handlers ------------------------------------------
    def touch(
        self,
        field: str,
        access: Access,
        state: ShellState,
        *,
        base: str | None = None,
        hint: str | None = None,
    ) -> None:
        """Refuse when ``field`` (a path) resolves into a virtual namespace."""
        text = plain(field)
        if text.startswith("file:"):
            field = "/" + field[len("file:") :].lstrip("/")
        cwds = state.cwd if base is None else resolve_directory(base, state.cwd)
        hit = virtual_target(field, cwds)
        if hit is not None:
            self.refuse(self._technique(hit, hint, field), access=access, path=hit.path)

    def _check_glob_read(self, field: str, state: ShellState) -> None:
        hit = glob_reads_virtual(field, state.cwd)
        if hit is not None:
            self.refuse(self._technique(hit, "glob", field), access=Access.LIST, path=hit.path)

    def _technique(self, hit: VirtualHit, hint: str | None, field: str) -> str:
        if self.technique is not None:
            return self.technique
        if hint == "cd" or hit.via_cwd:
            return "cd"
        if hit.via_dotdot:
            return "dotdot"
        if hit.via_glob:
            return "glob"
        root = "/" + hit.path.split("/")[1]
        origin = self.origins.get(field)
        if origin is not None:
            technique = word_technique(origin, root)
            return hint if technique == "abs" and hint else technique
        if re.search(re.escape(root) + r"(?![\w-])", self.command):
            return hint or "abs"
        for marker, technique in (("{", "brace"), ("$", "var"), ("~", "tilde")):
            if marker in self.command:
                return technique
        return "quote"

    def touch_pattern(self, pattern: str, access: Access, state: ShellState) -> None:
        """Refuse when plain glob ``pattern`` singles out a virtual namespace."""
        self.touch(as_glob(pattern), access, state)

    def execute_file(self, field: str, state: ShellState, language: str = "shell") -> None:
        """A ``language`` script runs from ``field``: check the path, and what it holds when known.

        A process substitution (``bash <(…)``) holds the output of its command; a file this
        command downloaded holds network content.
        """
        if is_tainted(field):
            self.refuse("download-exec", detail="runs a script read from the network")
        known = self.fd_streams.get(plain(field))
        if known is not None:
            self.run_stdin(language, known, state, {})
            return
        for path in resolve_directory(field, state.cwd) & state.written.keys():
            self.run_stdin(language, Stream(state.written[path]), state, {})
        self.touch(field, Access.EXECUTE, state)
        if resolve_directory(field, state.cwd) & state.downloads:
            self.refuse("download-exec", detail="runs a file this command downloaded")

    def run_shell(
        self,
        code: str,
        state: ShellState,
        env: Mapping[str, frozenset[str]],
        positional: Sequence[str] | None,
        stdin: Stream,
        *,
        current: bool = False,
        technique: str = "nested",
    ) -> Stream:
        """Walk shell ``code`` (an encoded field) in a child shell (or ``current`` one)."""
        if is_tainted(code):
            self.refuse("download-exec", detail="runs downloaded or decoded text as shell code")
        if self.depth + 1 > MAX_DEPTH:
            self.refuse("too-deep", detail=f"nests code more than {MAX_DEPTH} levels deep")
        shell = state if current else state.child(dict(env))
        if positional is not None:
            if positional:
                shell.assign("0", frozenset({plain(positional[0])}))
            shell.positional = tuple(frozenset({plain(arg)}) for arg in positional[1:])
        walker = _Walker(
            prepare_source(plain(code)),
            depth=self.depth + 1,
            technique=self.technique or technique,
            budget=self.budget,
        )
        return walker.program(shell, stdin)

    def run_program(self, language: str, code: str, state: ShellState) -> None:
        """Scan interpreter ``code`` for literal paths and shell commands."""
        if is_tainted(code):
            self.refuse("download-exec", detail=f"runs downloaded or decoded {language} code")
        for literal in code_literals(language, plain(code)):
            if literal.shell:
                self.run_shell(literal.text, state, {}, (), UNKNOWN_STREAM, technique="interp")
            elif "/" in literal.text:
                hit = virtual_target(literal.text.strip().lstrip("<>+|&= "), state.cwd)
                if hit is not None:
                    technique = self.technique or "interp"
                    self.refuse(technique, access=Access.READ, path=hit.path)

    def run_stdin(
        self, language: str, stdin: Stream, state: ShellState, env: Mapping[str, frozenset[str]]
    ) -> None:
        """Standard input runs as ``language`` code."""
        if stdin.taint:
            self.refuse(f"{stdin.taint}-exec", detail=f"pipes {stdin.taint}ed text into {language}")
        if stdin.text is None:
            return
        if language == "shell":
            self.run_shell(stdin.text, state, env, None, UNKNOWN_STREAM)
        else:
            self.run_program(language, stdin.text, state)

    def _evaluator(self, state: ShellState) -> WordEvaluator:
        return WordEvaluator(state, _Substitutions(self, state), self.origins)


class _Substitutions:
    """Command and process substitution for word expansion, in a subshell of ``state``."""

    def __init__(self, walker: _Walker, state: ShellState) -> None:
        self.walker = walker
        self.state = state

    def command_output(self, node: Node) -> Stream:
        return self.walker.block(node.children, self.state.copy(), UNKNOWN_STREAM)

    def process_path(self, node: Node) -> str:
        out = self.walker.block(node.children, self.state.copy(), UNKNOWN_STREAM)
        path = f"/dev/fd/{63 - len(self.walker.fd_streams)}"
        self.walker.fd_streams[path] = out
        return path + (TAINT if out.taint else "")


class _Call:
    """One program call: the ``Invocation`` the command table's handlers report to."""

    def __init__(
        self,
        walker: _Walker,
        name: str,
        args: tuple[str, ...],
        state: ShellState,
        env: Mapping[str, frozenset[str]],
        stdin: Stream,
    ) -> None:
        self._walker = walker
        self._name = name
        self._args = args
        self._state = state
        self._env = env
        self._stdin = stdin
        self.stdout: Stream | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def args(self) -> tuple[str, ...]:
        return self._args

    @property
    def stdin(self) -> Stream:
        return self._stdin

    def touch(self, field: str, access: Access, *, base: str | None = None) -> None:
        self._walker.touch(field, access, self._state, base=base)

    def touch_pattern(self, pattern: str, access: Access) -> None:
        self._walker.touch_pattern(pattern, access, self._state)

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, frozenset[str]] | None = None,
        stdin: Stream | None = None,
        chdir: str | None = None,
    ) -> Stream:
        merged = {**self._env, **(env or {})}
        return self._walker.dispatch(
            list(argv), self._state, merged, stdin or UNKNOWN_STREAM, chdir
        )

    def run_shell(
        self,
        code: str,
        *,
        positional: Sequence[str] = (),
        env: Mapping[str, frozenset[str]] | None = None,
    ) -> Stream:
        merged = {**self._env, **(env or {})}
        current = self._name in ("eval", "trap")
        return self._walker.run_shell(
            code,
            self._state,
            merged,
            None if current else positional,
            self._stdin,
            current=current,
        )

    def run_program(self, language: str, code: str) -> None:
        self._walker.run_program(language, code, self._state)

    def run_stdin(self, language: str) -> None:
        self._walker.run_stdin(language, self._stdin, self._state, self._env)

    def execute_file(self, field: str, language: str = "shell") -> None:
        self._walker.execute_file(field, self._state, language)

    def mark_download(self, field: str) -> None:
        self._state.downloads |= resolve_directory(field, self._state.cwd) - {UNKNOWN}

    def assign(self, name: str, values: frozenset[str]) -> None:
        self._state.assign(name, values)

    def output(self, stream: Stream) -> None:
        self.stdout = stream


def _flatten_list(node: Node) -> tuple[list[Node], list[str]]:
    """The operands and operators of a left-nested ``list`` node, in order."""
    operands: list[Node] = []
    operators: list[str] = []
    for child in node.children:
        if child.type == "list":
            inner_operands, inner_operators = _flatten_list(child)
            operands.extend(inner_operands)
            operators.extend(inner_operators)
        elif child.is_named:
            operands.append(child)
        elif child.type in ("&&", "||"):
            operators.append(child.type)
    return operands, operators


def _command_substitutions(body: str) -> list[str]:
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


_FILE_TESTS = frozenset(
    [
        "-a",
        "-b",
        "-c",
        "-d",
        "-e",
        "-f",
        "-g",
        "-G",
        "-h",
        "-k",
        "-L",
        "-N",
        "-O",
        "-p",
        "-r",
        "-s",
        "-S",
        "-u",
        "-w",
        "-x",
    ]
)

_Statement = Callable[[_Walker, Node, ShellState, Stream], Stream]
_STATEMENTS: dict[str, _Statement] = {
    "subshell": _Walker._subshell,
    "list": _Walker._list,
    "pipeline": _Walker._pipeline,
    "redirected_statement": _Walker._redirected,
    "command": _Walker._command_statement,
    "if_statement": _Walker._branches,
    "case_statement": _Walker._branches,
    "for_statement": _Walker._for,
    "function_definition": _Walker._function,
    "variable_assignment": _Walker._assignment,
    "declaration_command": _Walker._declaration,
    "unset_command": _Walker._unset,
    "test_command": _Walker._test,
    "file_redirect": _Walker._bare_redirect,
    "command_substitution": _Walker._substitution_statement,
    "process_substitution": _Walker._substitution_statement,
}
