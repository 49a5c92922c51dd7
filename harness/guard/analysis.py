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

from harness.guard.invocation import Finding
from harness.guard.paths import VIRTUAL_ROOTS
from harness.guard.source import prepare_source
from harness.guard.state import UNKNOWN_STREAM, ShellState
from harness.guard.walker import Budget, Refused, Walker


def analyse(command: str, *, cwd: str, home: str) -> Finding | None:
    """Walk ``command`` as bash would run it from ``cwd`` with ``HOME=home``.

    Returns:
        the first reason to refuse it, or None when it stays off the virtual namespaces.
        A command too large to follow (``too-complex``) is refused only when its text
        names a namespace; otherwise it passes.
    """
    state = ShellState.initial(cwd, home)
    budget = Budget(command, start=next(iter(state.cwd)))
    walker = Walker(prepare_source(command), depth=0, technique=None, budget=budget)
    try:
        walker.program(state, UNKNOWN_STREAM)
    except Refused as refusal:
        too_complex = refusal.finding.technique == "too-complex"
        if too_complex and not any(root in command for root in VIRTUAL_ROOTS):
            return None
        return refusal.finding
    return None
