"""Every program a Bash command would run, as the guard's walk sees it (for the approval policy).

The walk that guards the virtual namespaces already runs each simple command as bash would:
variables expanded, wrappers (``sudo``, ``env``, ``timeout``, ``xargs`` with the words of a
known input, ``find -exec``) unwrapped, nested code (``bash -c``, ``eval``, ``| sh``, heredoc
shells, shell functions, ``$(…)``) walked. ``program_calls`` runs that same walk and records
each program call it dispatches, so a policy outside the guard classifies ``K=kubectl; $K
delete pod x`` or ``echo pod/x | xargs kubectl delete`` exactly as the guard reads them.

The command's own standard input is empty (the Bash tool gives it none). Text the guard
cannot know (an unset variable, the output of a command it does not simulate) is kept in
the arguments as ``UNKNOWN``; a program name it cannot know is "".

>>> [c.name for c in program_calls("K=kubectl; sudo env X=1 $K delete pod web-1").calls]
['sudo', 'env', 'kubectl']
>>> program_calls("bash -c 'kubectl scale deploy/api --replicas=0'").calls[-1].args
('scale', 'deploy/api', '--replicas=0')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.guard.analysis import analyse
from harness.guard.budget import Budget
from harness.guard.check import MAX_COMMAND_CHARS
from harness.guard.fields import TAINT, UNKNOWN
from harness.guard.state import Stream

__all__ = ["UNKNOWN", "ProgramCall", "ProgramCalls", "program_calls"]


@dataclass(frozen=True)
class ProgramCall:
    """One program the command would run.

    Attributes:
        name: the program's base name (``kubectl`` for ``/usr/bin/kubectl``); "" when the
            guard cannot know it (``$CMD`` of an unset variable).
        args: the argument texts after the name, quotes removed; ``UNKNOWN`` marks text
            the guard cannot know.
        stdin: the program's standard input, when the guard knows it (a heredoc, an
            ``echo`` piped in); None when it cannot tell.
        path: the program as typed, when that differs from ``name`` (``/tmp/k``,
            ``./run.sh``); "" for a name looked up in ``PATH``.
        environment: the variables this command gives the program (exported, or assigned
            before it; ``PATH`` also when set unexported; ``HOME`` only when changed).
    """

    name: str
    args: tuple[str, ...]
    stdin: str | None
    path: str = ""
    environment: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ProgramCalls:
    """What ``program_calls`` saw.

    Attributes:
        calls: every program call, in the order the walk reached them (a word with
            several possible values gives one call per value).
        complete: the walk followed the whole command; False when it gave up on part of
            it (too long, too complex, a parse error, or a namespace touch that stopped
            it), so some programs may be missing from ``calls``.
        written: the paths the walk saw written or edited (redirections, ``cp``/``tee``
            destinations, ``sed -i``), as typed after expansion (``UNKNOWN`` marks text it
            cannot know).
    """

    calls: tuple[ProgramCall, ...]
    complete: bool
    written: tuple[str, ...] = ()


def program_calls(command: str, *, cwd: str = "/workspace", home: str = "/root") -> ProgramCalls:
    """Walk ``command`` as the guard does and return every program call it would make.

    CPU-bound like ``check_bash`` (bounded by the same step and time budget): run it off
    the event loop. Never raises.
    """
    seen: list[ProgramCall] = []
    if len(command) > MAX_COMMAND_CHARS:
        return ProgramCalls((), complete=False)

    def observe(
        name: str,
        args: tuple[str, ...],
        stdin: str | None,
        typed: str,
        environment: Mapping[str, frozenset[str]],
    ) -> None:
        known = tuple(arg.replace(TAINT, UNKNOWN) for arg in args)  # downloaded: unknown
        path = typed.replace(TAINT, UNKNOWN) if "/" in typed else ""
        given = frozenset(n for n, v in environment.items() if n != "HOME" or v != {home})
        seen.append(ProgramCall(name.replace(TAINT, UNKNOWN), known, stdin, path, given))

    written: list[str] = []

    def observe_write(path: str) -> None:
        written.append(path.replace(TAINT, UNKNOWN))

    budget = Budget(command, start=cwd, observe=observe, observe_write=observe_write)
    try:
        finding = analyse(command, cwd=cwd, home=home, budget=budget, stdin=Stream(""))
    except Exception:  # RecursionError or a bug: what was seen so far, marked incomplete
        return ProgramCalls(tuple(seen), complete=False, written=tuple(written))
    return ProgramCalls(tuple(seen), complete=finding is None, written=tuple(written))
