"""One simulated command call, as the command table sees it.

A command handler (``bash_commands`` and friends) knows what a program does with its
arguments: which are paths it opens, which are patterns or messages, which are code it
runs. It reports that through an ``Invocation``; the analysis behind it resolves paths
against the simulated shell, recurses into nested code, and stops at the first
virtual-namespace touch.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.guard.state import Stream
from harness.guard.techniques import Technique


class Access(enum.Enum):
    """How a command reaches a path; decides which file tool a refusal recommends."""

    READ = "read"
    WRITE = "write"
    EDIT = "edit"
    LIST = "list"
    SEARCH = "search"
    EXECUTE = "execute"
    CHDIR = "chdir"


@dataclass(frozen=True)
class Finding:
    """Why the guard refuses a command.

    Attributes:
        technique: how the path was reached, or why the command is refused.
        access: how the path is reached (None for policy refusals).
        path: the virtual path reached, when known.
        detail: a few words on a policy refusal (what runs what).
    """

    technique: Technique
    access: Access | None = None
    path: str | None = None
    detail: str = ""


class Invocation(Protocol):
    """A command call being analysed; handlers report what the program does with it."""

    @property
    def name(self) -> str:
        """The command name as invoked, without directories (``cat``, ``python3``)."""
        ...

    @property
    def args(self) -> tuple[str, ...]:
        """The encoded argument fields after the name."""
        ...

    @property
    def stdin(self) -> Stream:
        """What the command reads on standard input, as far as known."""
        ...

    def touch(self, field: str, access: Access, *, base: str | None = None) -> None:
        """The program opens ``field`` as a path (relative to ``base`` when given)."""
        ...

    def touch_pattern(self, pattern: str, access: Access) -> None:
        """The program selects paths matching plain glob ``pattern`` (``find -path``)."""
        ...

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, frozenset[str]] | None = None,
        stdin: Stream | None = None,
        chdir: str | None = None,
    ) -> Stream:
        """The program runs another command (sudo, xargs, find -exec); returns its output."""
        ...

    def run_shell(
        self,
        code: str,
        *,
        positional: Sequence[str] = (),
        env: Mapping[str, frozenset[str]] | None = None,
    ) -> Stream:
        """The program runs shell ``code`` (an encoded field) in a child shell.

        ``positional`` starts with ``$0`` (``bash -c CODE NAME ARG…``).
        """
        ...

    def run_program(self, language: str, code: str) -> None:
        """The program runs ``code`` (an encoded field) in interpreter ``language``."""
        ...

    def run_stdin(self, language: str) -> None:
        """The program runs its standard input as ``language`` code (``| sh``)."""
        ...

    def execute_file(self, field: str, language: str = "shell") -> None:
        """The program runs the ``language`` script at ``field`` (bash x.sh, source x.sh)."""
        ...

    def known_content(self, field: str) -> str | None:
        """The text of the file at ``field`` when this command wrote it with known text."""
        ...

    def mark_download(self, field: str) -> None:
        """The program writes network content to the file at ``field`` (curl -o)."""
        ...

    def assign(self, name: str, values: frozenset[str]) -> None:
        """The program sets shell variable ``name`` (printf -v, read)."""
        ...

    def output(self, stream: Stream) -> None:
        """What the program writes to standard output (when the guard can tell)."""
        ...
