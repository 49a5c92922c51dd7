"""The simulated shell state the bash guard carries through one command.

Everything is a *set of possibilities*: a variable assigned in two branches of an ``if``
holds both values, a ``cd`` inside a conditional leaves two possible working
directories. Merging two states is a union, so the guard sees every value a path could
take (and never has to decide which branch runs).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from tree_sitter import Node

from harness.guard.fields import SPLIT, UNKNOWN

MAX_VALUES = 16
"""Most alternatives kept for one variable or working directory."""

MAX_VALUE_CHARS = 4096
"""Longest variable value kept; the rest becomes UNKNOWN (``x=$x$x`` doubles each time)."""

_SPECIAL_UNKNOWN = frozenset("?$!#-_") | {"RANDOM", "SECONDS", "LINENO", "BASHPID", "EPOCHSECONDS"}


@dataclass(frozen=True)
class Stream:
    """What a command writes to (or reads from) a pipe, as far as the guard can tell.

    Attributes:
        text: the bytes as text, or None when unknown.
        taint: ``"download"`` or ``"decode"`` when the text came from the network or a
            decoder (base64 -d …); running such text as code is refused by policy.
    """

    text: str | None = None
    taint: str | None = None


UNKNOWN_STREAM = Stream()


def join_streams(streams: list[Stream]) -> Stream:
    """The output of statements run one after another: their outputs concatenated."""
    if not streams:
        return Stream("")
    texts = [stream.text for stream in streams]
    taint = next((stream.taint for stream in streams if stream.taint), None)
    if any(text is None for text in texts):
        return Stream(None, taint)
    return Stream("".join(text or "" for text in texts), taint)


@dataclass
class Variable:
    """A shell variable: every literal value it may hold, and whether it is exported."""

    values: frozenset[str]
    exported: bool = False


def _cap(values: frozenset[str]) -> frozenset[str]:
    if any(len(value) > MAX_VALUE_CHARS for value in values):
        values = frozenset(
            v if len(v) <= MAX_VALUE_CHARS else v[:MAX_VALUE_CHARS] + UNKNOWN for v in values
        )
    if len(values) <= MAX_VALUES:
        return values
    return frozenset(sorted(values)[:MAX_VALUES])


@dataclass
class ShellState:
    """Variables, working directories and directory stack of one (sub)shell.

    ``cwd`` holds absolute paths; the marker ``UNKNOWN`` as a member means "somewhere
    the guard cannot tell" (after ``cd "$(…)"``). ``downloads`` (files written from the
    network) and ``written`` (files written with known text, by absolute path) model
    the filesystem, so every copy of a state shares them. ``functions`` maps each shell
    function defined so far to its body node. ``allexport``: ``set -a`` is on, so every
    assignment from now on exports its variable.
    """

    cwd: frozenset[str]
    variables: dict[str, Variable] = field(default_factory=dict)
    oldpwd: frozenset[str] = frozenset({UNKNOWN})
    dirstack: list[frozenset[str]] = field(default_factory=list)
    positional: tuple[frozenset[str], ...] | None = ()
    downloads: set[str] = field(default_factory=set)
    written: dict[str, str] = field(default_factory=dict)
    functions: dict[str, Node] = field(default_factory=dict)
    allexport: bool = False

    @classmethod
    def initial(cls, cwd: str, home: str) -> ShellState:
        """The state of a fresh ``bash -c`` in ``cwd`` with ``HOME=home``."""
        state = cls(cwd=frozenset({posixpath.normpath(cwd)}))
        state.variables["HOME"] = Variable(frozenset({home}), exported=True)
        state.variables["IFS"] = Variable(frozenset({" \t\n"}))
        return state

    def copy(self) -> ShellState:
        """An independent copy (a subshell, a pipeline stage, a branch)."""
        return ShellState(
            cwd=self.cwd,
            variables={name: Variable(v.values, v.exported) for name, v in self.variables.items()},
            oldpwd=self.oldpwd,
            dirstack=list(self.dirstack),
            positional=self.positional,
            downloads=self.downloads,
            written=self.written,
            functions=dict(self.functions),
            allexport=self.allexport,
        )

    def child(self, env: dict[str, frozenset[str]]) -> ShellState:
        """The state a child shell starts with: exported variables plus ``env``."""
        state = ShellState(
            cwd=self.cwd, oldpwd=self.oldpwd, downloads=self.downloads, written=self.written
        )
        for name, variable in self.variables.items():
            if variable.exported or name in ("HOME", "IFS"):
                state.variables[name] = Variable(variable.values, exported=True)
        for name, values in env.items():
            state.variables[name] = Variable(values, exported=True)
        return state

    def assume(self, other: ShellState) -> None:
        """Become ``other`` (after analysing alternatives on copies)."""
        self.cwd = other.cwd
        self.variables = other.variables
        self.oldpwd = other.oldpwd
        self.dirstack = other.dirstack
        self.positional = other.positional
        self.functions = other.functions
        self.allexport = other.allexport

    def merge(self, other: ShellState) -> None:
        """Union ``other`` into this state (both branches may have run)."""
        self.cwd = _cap(self.cwd | other.cwd)
        self.oldpwd = _cap(self.oldpwd | other.oldpwd)
        for name, variable in other.variables.items():
            mine = self.variables.get(name)
            if mine is None:
                self.variables[name] = Variable(variable.values | {""}, variable.exported)
            else:
                mine.values = _cap(mine.values | variable.values)
                mine.exported = mine.exported or variable.exported
        for name, body in other.functions.items():
            self.functions.setdefault(name, body)
        self.allexport = self.allexport or other.allexport

    def lookup(self, name: str) -> frozenset[str]:
        """Every value ``$name`` may expand to (``UNKNOWN`` when not knowable)."""
        if name == "PWD":
            return self.cwd
        if name == "OLDPWD":
            return self.oldpwd
        if name == "0":
            zero = self.variables.get("0")
            return zero.values if zero is not None else frozenset({"bash"})
        if name.isdigit():
            return self._positional(int(name))
        if name in ("@", "*"):
            return self._all_positional()
        variable = self.variables.get(name)
        if variable is not None:
            return variable.values
        if name in _SPECIAL_UNKNOWN:
            return frozenset({UNKNOWN})
        return frozenset({UNKNOWN})

    def exported(self) -> dict[str, frozenset[str]]:
        """The exported variables (what a program started from this shell receives)."""
        return {name: v.values for name, v in self.variables.items() if v.exported}

    def is_set(self, name: str) -> bool:
        """Tell whether ``name`` was assigned in this command (or is HOME/IFS/PWD)."""
        return name in self.variables or name in ("PWD", "0")

    def assign(self, name: str, values: frozenset[str], *, exported: bool | None = None) -> None:
        """Give ``name`` the possible ``values``; ``exported`` None keeps the flag."""
        current = self.variables.get(name)
        flag = exported if exported is not None else (current.exported if current else False)
        flag = flag or (exported is None and self.allexport)
        self.variables[name] = Variable(_cap(values), flag)

    def export(self, name: str) -> None:
        """Mark ``name`` exported (``export NAME``), creating it unknown if unset."""
        current = self.variables.get(name)
        if current is None:
            self.variables[name] = Variable(frozenset({UNKNOWN}), exported=True)
        else:
            current.exported = True

    def unset(self, name: str) -> None:
        """``unset NAME``: it expands to the empty string from now on."""
        self.variables[name] = Variable(frozenset({""}))

    def change_directory(self, targets: frozenset[str]) -> None:
        """Move to ``targets`` (absolute paths or UNKNOWN), remembering OLDPWD."""
        self.oldpwd = self.cwd
        self.cwd = _cap(targets) if targets else frozenset({UNKNOWN})

    def _positional(self, index: int) -> frozenset[str]:
        if self.positional is None:
            return frozenset({UNKNOWN})
        if index == 0 or index > len(self.positional):
            return frozenset({""})
        return self.positional[index - 1]

    def _all_positional(self) -> frozenset[str]:
        if self.positional is None:
            return frozenset({UNKNOWN})
        joined = [""]
        for index, values in enumerate(self.positional):
            joiner = SPLIT if index else ""
            joined = [f"{prefix}{joiner}{value}" for prefix in joined for value in values]
            joined = joined[:MAX_VALUES]
        return frozenset(joined)
