"""Shell builtins that change the simulated shell itself: cd, pushd, popd, read, set.

Each function takes the evaluated argument fields and the state; the ones that move the
working directory return the field that names the target, so the analysis can refuse a
``cd`` into a virtual namespace before the state moves there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .bash_fields import SPLIT, UNKNOWN, plain
from .bash_paths import resolve_directory
from .bash_state import ShellState, Stream
from .bash_words import words_of

DIRECTORY_BUILTINS = frozenset({"cd", "pushd", "popd"})
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
    array = "-a" in texts
    line = text.split("\n", 1)[0] if text is not None else None
    names = names or ["REPLY"]
    words = words_of(line) if line is not None else []
    for index, target in enumerate(names):
        if line is None:
            state.assign(target, frozenset({UNKNOWN}))
        elif array:
            state.assign(target, frozenset({SPLIT.join(words)}))
        elif index == len(names) - 1:
            state.assign(target, frozenset({" ".join(words[index:])}))
        else:
            state.assign(target, frozenset({words[index] if index < len(words) else ""}))


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
