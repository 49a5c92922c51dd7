"""The walker: runs one parsed piece of shell, simple commands first-hand.

A ``Walker`` owns one tree-sitter tree (the command, or one piece of nested code) and
walks it statement by statement over a ``ShellState``. Compound statements are in
``bash_compound``, redirections in ``bash_redirects``; here are simple commands (expand
the words, apply prefix assignments, dispatch builtins or hand the call to the command
table) and the effects handlers ask for: touching a path, running nested shell or
interpreter code, running a script file.

The first touch of ``/memory``, ``/skills`` or ``/incident`` raises ``Refused`` with a
``Finding``; so does a policy refusal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tree_sitter import Node

from harness.guard.budget import ARGS_PER_STEP, MAX_ANALYSIS_S, Budget
from harness.guard.builtins import (
    DIRECTORY_BUILTINS,
    SHELL_BUILTINS,
    STATE_BUILTINS,
    apply_state_builtin,
    change_directory,
    directory_target,
)
from harness.guard.call import Call, Substitutions
from harness.guard.commands import handler_for
from harness.guard.compound import COMPOUND_STATEMENTS, Statement, and_or, assigned, piped
from harness.guard.environment import handed_paths
from harness.guard.fields import TAINT, UNKNOWN, as_glob, is_tainted, plain
from harness.guard.invocation import Access, Finding
from harness.guard.literals import code_literals
from harness.guard.parser import ParseTimeout, parse
from harness.guard.paths import (
    VIRTUAL_ROOTS,
    VirtualHit,
    glob_reads_virtual,
    resolve_directory,
    virtual_target,
)
from harness.guard.programs.listed import touch_listed
from harness.guard.redirects import apply_redirects, bare_redirect, redirected
from harness.guard.shape import REDIRECT_NODES, AndOr, Piped, Redirected, Shape, reshape
from harness.guard.source import Source, prepare_source
from harness.guard.state import UNKNOWN_STREAM, ShellState, Stream, join_streams
from harness.guard.techniques import Technique
from harness.guard.words import WordEvaluator, node_text, word_technique

MAX_DEPTH = 8
"""Most levels of nested code (``bash -c "eval '…'"``) the guard follows."""

MAX_CALL_DEPTH = 16
"""Most nested shell-function calls followed (a recursive function stops here)."""

_RISKY_IN_ERROR = re.compile(r"/[^\s]*[*?\[{\\$]")
_STATEMENTS: dict[str, Statement] = {
    **COMPOUND_STATEMENTS,
    "file_redirect": bare_redirect,
    "command": lambda walker, node, state, stdin: walker.command(node, state, stdin, []),
}
_RESHAPED = frozenset({"list", "pipeline", "redirected_statement"})
"""Node types tree-sitter may group differently from bash (see ``shape``)."""
_SYSTEM_BIN = frozenset({"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin"})
"""Where a program is found before any later ``PATH`` entry is searched."""
_LEAVES = frozenset({"comment", "word", "number", "variable_name", "string"})


class Refused(Exception):
    """Raised inside the walk to stop at the first finding."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.technique)
        self.finding = finding


class Walker:
    """Walks one parsed source.

    Attributes:
        source: the prepared text and its here-documents.
        depth: nesting level (0 for the command itself).
        technique: the tag every finding gets in nested code (``nested``, ``interp``).
        fd_streams: ``/dev/fd/N`` of each process substitution -> its output.
        origins: each expanded field -> the word node it came from.
    """

    def __init__(self, source: Source, *, depth: int, technique: Technique | None, budget: Budget):
        self.source = source
        self.depth = depth
        self.technique = technique
        self.budget = budget
        try:
            self.tree = parse(source.text, budget)
        except ParseTimeout:
            self.refuse("too-complex", detail=f"takes more than {MAX_ANALYSIS_S:g} s to parse")
        self.fd_streams: dict[str, Stream] = {}
        self.origins: dict[str, Node] = {}

    # -- walking -------------------------------------------------------------------
    def program(self, state: ShellState, stdin: Stream) -> Stream:
        """Walk the whole source in ``state`` with ``stdin`` as its standard input."""
        root = self.tree.root_node
        if root.has_error:
            self._check_errors(root)
        return self.block(root.children, state, stdin)

    def _check_errors(self, node: Node) -> None:
        """Refuse when an unparsed region could hide a path (see the guard's policy)."""
        if node.type == "ERROR" or node.is_missing:
            region = node if node.type == "ERROR" or node.parent is None else node.parent
            text = node_text(region)
            text += "".join(
                doc.body for token, doc in self.source.heredocs.items() if token in text
            )
            if any(root in text for root in VIRTUAL_ROOTS) or _RISKY_IN_ERROR.search(text):
                self.refuse("parse-error", detail=text.strip()[:80])
            return
        for child in node.children:
            if child.has_error or child.is_missing:
                self._check_errors(child)

    def block(self, nodes: Sequence[Node], state: ShellState, stdin: Stream) -> Stream:
        """Walk statements in order; their outputs concatenate."""
        return join_streams([self.statement(n, state, stdin) for n in nodes if n.is_named])

    def statement(self, node: Node, state: ShellState, stdin: Stream) -> Stream:
        """Walk one statement node of any kind."""
        self._step()
        if node.type in _RESHAPED:
            return self.shape(reshape(node), state, stdin)
        handler = _STATEMENTS.get(node.type)
        if handler is not None:
            return handler(self, node, state, stdin)
        if node.type in _LEAVES:
            return Stream("")
        return self.block(node.children, state, stdin)

    def shape(self, shape: Shape, state: ShellState, stdin: Stream) -> Stream:
        """Walk a statement in the shape bash runs it (``shape.reshape``)."""
        if isinstance(shape, AndOr):
            return and_or(self, shape, state, stdin)
        if isinstance(shape, Piped):
            return piped(self, shape, state, stdin)
        if isinstance(shape, Redirected):
            return redirected(self, shape, state, stdin)
        return self.statement(shape, state, stdin)

    def _step(self, steps: int = 1) -> None:
        exhausted = self.budget.charge(steps)
        if exhausted is not None:
            self.refuse("too-complex", detail=exhausted)

    def refuse(
        self,
        technique: Technique,
        *,
        access: Access | None = None,
        path: str | None = None,
        detail: str = "",
    ) -> None:
        """Stop the walk with a finding."""
        raise Refused(Finding(technique, access, path, detail))

    def evaluator(self, state: ShellState) -> WordEvaluator:
        """A word evaluator over ``state`` whose substitutions this walker walks."""
        return WordEvaluator(state, Substitutions(self, state), self.origins, self.budget)

    # -- simple commands -----------------------------------------------------------
    def command(self, node: Node, state: ShellState, stdin: Stream, extra: list[Node]) -> Stream:
        """A simple command node (``extra``: argument words tree-sitter put elsewhere)."""
        env: dict[str, frozenset[str]] = {}
        name_node = None
        words: list[Node] = []
        redirects: list[Node] = []
        for index, child in enumerate(node.children):
            field = node.field_name_for_child(index)
            if child.type == "variable_assignment":
                name, values = assigned(self, child, state)
                env[name] = values
            elif child.type in REDIRECT_NODES:
                redirects.append(child)
            elif field == "name":
                name_node = child
            elif child.is_named or field == "argument":
                words.append(child)
        stdin, more, _ = apply_redirects(self, redirects, state, stdin)
        if name_node is None or not node_text(name_node):
            for name, values in env.items():
                state.assign(name, values)
            return Stream("")
        evaluator = self.evaluator(state)
        vectors = evaluator.argv([name_node, *words, *more, *extra])
        for vector in vectors:
            for field in vector:
                self.check_glob_read(field, state)
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
        """Several possible argument vectors: each on a copy, then the union."""
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
        self._step(1 + len(argv) // ARGS_PER_STEP)
        if not argv:
            return Stream("")
        if is_tainted(argv[0]):
            self.refuse("download-exec", detail="runs downloaded or decoded text as a command")
        name = plain(argv[0])
        if "/" in name:
            self.execute_file(argv[0], state)
        base = name.rsplit("/", 1)[-1]
        if "/" not in name and base not in SHELL_BUILTINS and base not in state.functions:
            self._search_path(env, state)
        if base in DIRECTORY_BUILTINS:
            self._directory_builtin(base, argv[1:], state, env)
            return Stream("")
        if base in STATE_BUILTINS:
            apply_state_builtin(base, argv[1:], state, stdin)
            return Stream("")
        if name in state.functions and self.budget.calls < MAX_CALL_DEPTH:
            return self._call_function(state.functions[name], argv[1:], state, stdin)
        if base == "pwd":
            known = len(state.cwd) == 1 and UNKNOWN not in next(iter(state.cwd))
            return Stream(next(iter(state.cwd)) + "\n" if known else None)
        if chdir is not None:
            self.touch(chdir, Access.CHDIR, state)
            state = state.copy()
            state.change_directory(resolve_directory(chdir, state.cwd))
        if base not in SHELL_BUILTINS:
            self._check_environment(name, state, env)
        call = Call(self, base if UNKNOWN not in base else "", tuple(argv[1:]), state, env, stdin)
        if self.budget.observe is not None:
            environment = {**state.exported(), **env}
            if "PATH" not in environment and state.is_set("PATH"):
                environment["PATH"] = state.lookup("PATH")
            self.budget.observe(
                call.name, tuple(plain(a) for a in call.args), stdin.text, name, environment
            )
        touch_listed(call)
        handler_for(call.name)(call)
        return call.stdout if call.stdout is not None else Stream(None, stdin.taint)

    def _check_environment(
        self, program: str, state: ShellState, env: Mapping[str, frozenset[str]]
    ) -> None:
        """A virtual path handed to ``program`` through its environment (``environment``)."""
        for value in handed_paths(program, {**state.exported(), **env}):
            self.touch(value, Access.READ, state, hint="env")

    def _search_path(self, env: Mapping[str, frozenset[str]], state: ShellState) -> None:
        """bash looks a program up in each ``PATH`` directory: one set in this command may
        list a namespace (``PATH=/skills/tools:$PATH diag.sh``)."""
        paths = env.get("PATH") or (state.lookup("PATH") if state.is_set("PATH") else None)
        for value in paths or ():
            for entry in plain(value).split(":"):
                if UNKNOWN in entry or entry.rstrip("/") in _SYSTEM_BIN:
                    break
                if entry:
                    self.touch(entry, Access.EXECUTE, state, hint="var")

    def _call_function(
        self, body: Node, args: list[str], state: ShellState, stdin: Stream
    ) -> Stream:
        """A shell function runs in the caller's shell with its own ``$1…``."""
        saved = state.positional
        state.positional = tuple(frozenset({plain(arg)}) for arg in args)
        self.budget.calls += 1
        try:
            return self.statement(body, state, stdin)
        finally:
            self.budget.calls -= 1
            state.positional = saved

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

    # -- effects -------------------------------------------------------------------
    def touch(
        self,
        field: str,
        access: Access,
        state: ShellState,
        *,
        base: str | None = None,
        hint: Technique | None = None,
    ) -> None:
        """Refuse when ``field`` (a path, or a ``file:`` URL) resolves into a namespace."""
        if plain(field).startswith("file:"):
            field = "/" + field[len("file:") :].lstrip("/")
        if self.budget.observe_write is not None and access in (Access.WRITE, Access.EDIT):
            self.budget.observe_write(plain(field))
        cwds = state.cwd if base is None else resolve_directory(base, state.cwd)
        hit = virtual_target(field, cwds)
        if hit is not None:
            self.refuse(self._technique(hit, hint, field), access=access, path=hit.path)

    def touch_pattern(self, pattern: str, access: Access, state: ShellState) -> None:
        """Refuse when plain glob ``pattern`` singles out a virtual namespace."""
        self.touch(as_glob(pattern), access, state)

    def check_glob_read(self, field: str, state: ShellState) -> None:
        """Refuse when expanding the glob in ``field`` makes bash list a namespace."""
        hit = glob_reads_virtual(field, state.cwd)
        if hit is not None:
            self.refuse(self._technique(hit, "glob", field), access=Access.LIST, path=hit.path)

    def _technique(self, hit: VirtualHit, hint: Technique | None, field: str) -> Technique:
        if self.technique is not None:
            return self.technique
        if hit.via_dotdot:
            return "dotdot"
        if hint == "cd" or hit.base not in ("", self.budget.start):
            return "cd"
        if hit.via_glob:
            return "glob"
        root = "/" + hit.path.split("/")[1]
        origin = self.origins.get(field)
        technique = word_technique(origin, root) if origin is not None else "abs"
        return hint if technique == "abs" and hint else technique

    def known_content(self, field: str, state: ShellState) -> str | None:
        """The text this command wrote to the file at ``field``, when known."""
        paths = resolve_directory(field, state.cwd) & state.written.keys()
        return state.written[min(paths)] if len(paths) == 1 else None

    def execute_file(self, field: str, state: ShellState, language: str = "shell") -> None:
        """A ``language`` script runs from ``field``: check the path and, when known, the code.

        A process substitution (``bash <(…)``) holds its command's output; a file this
        command wrote holds that text; a file it downloaded holds network content. A
        path that merely came out of a decoder (``bash $(zcat names.gz)``) names a local
        file: like any path the guard cannot compute, it is not refused for that.
        """
        known = self.fd_streams.get(plain(field).replace(TAINT, ""))
        if known is not None:
            self.run_stdin(language, known, state, {})
            return
        content = self.known_content(field, state)
        if content is not None:
            self.run_stdin(language, Stream(content), state, {})
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
        technique: Technique = "nested",
    ) -> Stream:
        """Walk shell ``code`` (an encoded field) in a child shell, or the ``current`` one.

        ``positional`` starts with ``$0``; None keeps the shell's own.
        """
        if is_tainted(code):
            self.refuse("download-exec", detail="runs downloaded or decoded text as shell code")
        if self.depth + 1 > MAX_DEPTH:
            self.refuse("too-deep", detail=f"nests code more than {MAX_DEPTH} levels deep")
        shell = state if current else state.child(dict(env))
        if positional is not None:
            if positional:
                shell.assign("0", frozenset({plain(positional[0])}))
            shell.positional = tuple(frozenset({plain(arg)}) for arg in positional[1:])
        walker = Walker(
            prepare_source(plain(code)),
            depth=self.depth + 1,
            technique=self.technique or technique,
            budget=self.budget,
        )
        return walker.program(shell, stdin)

    def run_program(self, language: str, code: str, state: ShellState) -> None:
        """Scan interpreter ``code`` for literal paths and the shell commands it runs."""
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
            technique: Technique = "download-exec" if stdin.taint == "download" else "decode-exec"
            self.refuse(technique, detail=f"pipes {stdin.taint}ed text into {language}")
        if stdin.text is None:
            return
        if language == "shell":
            self.run_shell(stdin.text, state, env, None, UNKNOWN_STREAM)
        else:
            self.run_program(language, stdin.text, state)
