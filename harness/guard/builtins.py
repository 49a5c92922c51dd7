"""Shell builtins that change the simulated shell itself: cd, pushd, popd, read, set.

Each function takes the evaluated argument fields and the state; the ones that move the
working directory return the field that names the target, so the analysis can refuse a
``cd`` into a virtual namespace before the state moves there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.guard.fields import SPLIT, UNKNOWN, plain
from harness.guard.options import names
from harness.guard.paths import resolve_directory
from harness.guard.state import ShellState, Stream
from harness.guard.words import words_of

DIRECTORY_BUILTINS = frozenset({"cd", "pushd", "popd"})
SHELL_BUILTINS = names(
    ": . [ alias bg bind break builtin caller cd command compgen complete continue "
    "declare dirs disown echo enable eval exec exit export false fc fg getopts hash help "
    "history jobs kill let local logout mapfile popd printf pushd pwd read readarray "
    "readonly return set shift shopt source suspend test times trap true type typeset "
    "ulimit umask unalias unset wait"
)
"""bash(1) SHELL BUILTIN COMMANDS: run without a ``PATH`` search."""
STATE_BUILTINS = frozenset({"read", "mapfile", "readarray", "set"})


def _operands(args: Sequence[str]) -> list[str]:
    rest = list(args)
    while rest and plain(rest[0]).startswith("-") and plain(rest[0]) not in ("-",):
        if plain(rest.pop(0)) == "--":
            break
    return rest


def directory_target(
    name: str, args: Sequence[str], state: ShellState, env: Mapping[str, frozenset[str]]
) -> list[str]:
    """The fields a ``cd``/``pushd`` moves to (empty for ``popd`` or a stack rotation)."""
    rest = _operands(args)
    if name == "popd" or (rest and plain(rest[0])[:1] in "+-" and plain(rest[0]) != "-"):
        return []
    if not rest:
        homes = env.get("HOME") or state.lookup("HOME")
        return sorted(homes) if name == "cd" else []
    if plain(rest[0]) == "-":
        return sorted(state.oldpwd)
    return [rest[0]]


def change_directory(name: str, targets: Sequence[str], state: ShellState) -> None:
    """Apply ``cd``/``pushd``/``popd`` to ``state`` given the target fields."""
    if name == "popd":
        state.change_directory(state.dirstack.pop() if state.dirstack else frozenset({UNKNOWN}))
        return
    if not targets:
        if name == "pushd" and state.dirstack:
            top = state.dirstack.pop()
            state.dirstack.append(state.cwd)
            state.change_directory(top)
        return
    reached: set[str] = set()
    for target in targets:
        reached |= resolve_directory(target, state.cwd)
    if name == "pushd":
        state.dirstack.append(state.cwd)
    state.change_directory(frozenset(reached))


def apply_state_builtin(name: str, args: Sequence[str], state: ShellState, stdin: Stream) -> None:
    """``read`` / ``mapfile`` assign from standard input; ``set -- …`` sets ``$1…``."""
    texts = [plain(arg) for arg in args]
    if name == "set":
        _set_allexport(texts, state)
        if texts and (texts[0] == "--" or not texts[0].startswith(("-", "+"))):
            rest = args[1:] if texts[0] == "--" else args
            state.positional = tuple(frozenset({plain(arg)}) for arg in rest)
        return
    names = [t for t in _skip_valued_options(texts) if t.isidentifier()]
    text = stdin.text
    if name in ("mapfile", "readarray"):
        target = names[-1] if names else "MAPFILE"
        value = SPLIT.join(text.splitlines()) if text is not None else UNKNOWN
        state.assign(target, frozenset({value}))
        return
    names = names or ["REPLY"]
    if text is None:
        for target in names:
            state.assign(target, frozenset({UNKNOWN}))
        return
    lines = text.splitlines() or [""]
    for index, target in enumerate(names):
        state.assign(target, frozenset(_read_field(line, index, names, texts) for line in lines))


def _set_allexport(texts: Sequence[str], state: ShellState) -> None:
    """Follow ``set -a`` / ``set -o allexport`` (and ``+a``, ``+o allexport``)."""
    for index, text in enumerate(texts):
        if text == "--" or not text.startswith(("-", "+")):
            return
        if text in ("-o", "+o"):
            if texts[index + 1 : index + 2] == ["allexport"]:
                state.allexport = text == "-o"
        elif "a" in text[1:] and text[1:].isalpha():
            state.allexport = text.startswith("-")


def _read_field(line: str, index: int, names: list[str], texts: list[str]) -> str:
    """What ``read`` puts in its ``index``-th variable from ``line`` (any line may come,
    since ``while read`` loops over them all)."""
    words = words_of(line)
    if "-a" in texts:
        return SPLIT.join(words)
    if index == len(names) - 1:
        return " ".join(words[index:])
    return words[index] if index < len(words) else ""


def _skip_valued_options(texts: list[str]) -> list[str]:
    kept = []
    skip = False
    for text in texts:
        if skip:
            skip = False
            continue
        if text in ("-d", "-p", "-t", "-n", "-N", "-u", "-C", "-c", "-O", "-s", "-i"):
            skip = True
            continue
        if not text.startswith("-"):
            kept.append(text)
    return kept
