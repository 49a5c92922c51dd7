"""The analysis side of one program call: the ``Invocation`` that command handlers report to.

``Call`` binds a handler's reports (this field is a path, run this code, this is my
output) to the walker, the shell state the program runs in, its environment and its
standard input. ``Substitutions`` lets word expansion walk ``$(…)`` and ``<(…)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tree_sitter import Node

from harness.guard.fields import TAINT, UNKNOWN
from harness.guard.invocation import Access
from harness.guard.paths import resolve_directory
from harness.guard.state import UNKNOWN_STREAM, ShellState, Stream

if TYPE_CHECKING:
    from harness.guard.walker import Walker

_CURRENT_SHELL = frozenset({"eval", "trap"})
"""Programs whose shell code runs in the calling shell, not a child."""


class Substitutions:
    """Command and process substitution for word expansion, in a subshell of ``state``."""

    def __init__(self, walker: Walker, state: ShellState) -> None:
        self.walker = walker
        self.state = state

    def command_output(self, node: Node) -> Stream:
        """Walk the command inside ``$(…)``; return its output."""
        return self.walker.block(node.children, self.state.copy(), UNKNOWN_STREAM)

    def process_path(self, node: Node) -> str:
        """Walk the command inside ``<(…)``; return the ``/dev/fd/N`` field it becomes."""
        out = self.walker.block(node.children, self.state.copy(), UNKNOWN_STREAM)
        path = f"/dev/fd/{63 - len(self.walker.fd_streams)}"
        self.walker.fd_streams[path] = out
        return path + (TAINT if out.taint else "")


class Call:
    """One program call being analysed (implements ``bash_invocation.Invocation``).

    Attributes:
        stdout: what the handler said the program prints, or None when it did not say.
    """

    def __init__(
        self,
        walker: Walker,
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
        """The program's base name."""
        return self._name

    @property
    def args(self) -> tuple[str, ...]:
        """The encoded argument fields."""
        return self._args

    @property
    def stdin(self) -> Stream:
        """The program's standard input."""
        return self._stdin

    def touch(self, field: str, access: Access, *, base: str | None = None) -> None:
        """See ``Invocation.touch``."""
        self._walker.touch(field, access, self._state, base=base)

    def touch_pattern(self, pattern: str, access: Access) -> None:
        """See ``Invocation.touch_pattern``."""
        self._walker.touch_pattern(pattern, access, self._state)

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, frozenset[str]] | None = None,
        stdin: Stream | None = None,
        chdir: str | None = None,
    ) -> Stream:
        """See ``Invocation.run``."""
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
        """See ``Invocation.run_shell``; ``eval`` and ``trap`` run in the current shell."""
        merged = {**self._env, **(env or {})}
        current = self._name in _CURRENT_SHELL
        return self._walker.run_shell(
            code,
            self._state,
            merged,
            None if current else positional,
            self._stdin,
            current=current,
        )

    def run_program(self, language: str, code: str) -> None:
        """See ``Invocation.run_program``."""
        self._walker.run_program(language, code, self._state)

    def run_stdin(self, language: str) -> None:
        """See ``Invocation.run_stdin``."""
        self._walker.run_stdin(language, self._stdin, self._state, self._env)

    def execute_file(self, field: str, language: str = "shell") -> None:
        """See ``Invocation.execute_file``."""
        self._walker.execute_file(field, self._state, language)

    def known_content(self, field: str) -> str | None:
        """See ``Invocation.known_content``."""
        return self._walker.known_content(field, self._state)

    def mark_download(self, field: str) -> None:
        """See ``Invocation.mark_download``."""
        self._state.downloads |= resolve_directory(field, self._state.cwd) - {UNKNOWN}

    def assign(self, name: str, values: frozenset[str]) -> None:
        """See ``Invocation.assign``."""
        self._state.assign(name, values)

    def output(self, stream: Stream) -> None:
        """See ``Invocation.output``."""
        self.stdout = stream
