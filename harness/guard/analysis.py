"""The bash guard's analysis: walk one command as bash would run it, without running it.

The command is prepared (``bash_source``: continuations joined, here-documents lifted
out), parsed with tree-sitter-bash and walked (``bash_walker``) from a fresh
``ShellState``. The walk follows statements in order: subshells, pipeline stages and
substitutions on copies of the state, branches merged (``bash_compound``); each simple
command's words expanded (``bash_words``), its redirections checked
(``bash_redirects``) and its arguments handed to the command table
(``bash_commands``), which says which arguments are paths, patterns, messages or code.
Nested code (``bash -c``, ``eval``, ``| sh``, heredoc-fed shells, interpreter code) is
parsed and walked the same way, up to ``bash_walker.MAX_DEPTH`` levels.
"""

from __future__ import annotations

from harness.guard.budget import Budget
from harness.guard.invocation import Finding
from harness.guard.source import prepare_source
from harness.guard.state import UNKNOWN_STREAM, ShellState, Stream
from harness.guard.walker import Refused, Walker


def analyse(
    command: str, *, cwd: str, home: str, budget: Budget | None = None, stdin: Stream | None = None
) -> Finding | None:
    """Walk ``command`` as bash would run it from ``cwd`` with ``HOME=home``.

    Returns:
        the first touch of a namespace or policy refusal; else a ``too-complex`` finding
        when the walk gave up on part of the command (``budget.Budget``: out of steps or
        time, or a word with too many values); else None (the command stays off the
        virtual namespaces). ``check`` decides what a give-up means.

    ``budget`` (default: a fresh one) may carry an observer (``calls``); ``stdin`` is the
    command's standard input (default: unknown).

    Raises:
        RecursionError: nesting deeper than Python's stack allows (``check`` catches it).
    """
    state = ShellState.initial(cwd, home)
    budget = budget or Budget(command, start=next(iter(state.cwd)))
    try:
        walker = Walker(prepare_source(command), depth=0, technique=None, budget=budget)
        walker.program(state, UNKNOWN_STREAM if stdin is None else stdin)
    except Refused as refusal:
        return refusal.finding
    if budget.gave_up is not None:
        return Finding("too-complex", detail=budget.gave_up)
    return None
