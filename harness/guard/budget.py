"""The work one analysis may do: steps and wall time, shared by every walker of a command.

The guard walks a command as bash would run it; a hostile command can make that walk
long (300 nested ``sudo env`` wrappers, 10,000 statements) or make tree-sitter's own
parse slow (thousands of nested ``a=(((…)))`` arrays). The budget bounds both: each
statement and program call costs a step, a call with a long argument vector costs one
more step per ``ARGS_PER_STEP`` arguments (so a chain of wrappers, each of which hands
the rest of the line to the next, costs what it really costs), and the whole analysis,
parsing included, must end within ``MAX_ANALYSIS_S``. Running out is a give-up; the
guard's policy for that is in ``check``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

MAX_STEPS = 20_000
"""Most steps one analysis may take (nested code included)."""

MAX_ANALYSIS_S = 2.0
"""Longest one analysis may run, parsing included (seconds of wall time)."""

ARGS_PER_STEP = 4
"""A program call costs one extra step per this many arguments."""


Observer = Callable[[str, tuple[str, ...], str | None, str, Mapping[str, frozenset[str]]], None]
"""Told of one program call: ``(name, args, stdin, path, environment)`` (``Budget.observe``)."""


@dataclass
class Budget:
    """What all walkers of one analysis share.

    Attributes:
        command: the command text; start: the working directory it starts in;
        steps: steps taken so far; calls: shell functions running now;
        deadline: ``time.monotonic()`` value after which the analysis gives up;
        gave_up: why part of the command could not be followed (a word with more
            values than the guard keeps), or None; the walk goes on to find a
            definite touch, and the give-up decides only if none is found.
        observe: told of every program call the walk dispatches, wrappers and nested
            code included, as ``(name, args, stdin, path, environment)``: the base name
            ("" when it is not known), the plain argument texts (``fields.UNKNOWN`` marks
            text the guard cannot know), the standard input's text when known, the
            program as typed (``/tmp/k``, ``./run.sh``, ``kubectl``) and the variables
            the command gave it (exported or assigned before it; ``PATH`` also when set
            unexported), each with its possible encoded values (``calls``).
        observe_write: told of every path the walk sees written or edited (a redirection's
            target, ``cp``'s destination, ``sed -i``'s files), as its plain text (``calls``).
    """

    command: str
    start: str
    steps: int = 0
    calls: int = 0
    deadline: float = field(default_factory=lambda: time.monotonic() + MAX_ANALYSIS_S)
    gave_up: str | None = None
    observe: Observer | None = None
    observe_write: Callable[[str], None] | None = None

    def charge(self, steps: int = 1) -> str | None:
        """Take ``steps``; return why the budget is exhausted, or None while it lasts."""
        self.steps += steps
        if self.steps > MAX_STEPS:
            return f"needs more than {MAX_STEPS:,} analysis steps"
        if self.out_of_time():
            return f"takes more than {MAX_ANALYSIS_S:g} s to analyse"
        return None

    def out_of_time(self) -> bool:
        """Tell whether the wall-time bound has passed."""
        return time.monotonic() > self.deadline
