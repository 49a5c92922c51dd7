"""Roles for shells and language interpreters: where their code comes from.

Code reaches a shell or an interpreter in one of four ways, and the guard follows each:

- a code argument (``bash -c``, ``eval``, ``python -c``, ``perl -e``, ``node -e`` …):
  analysed (shell code fully, other languages by their string literals);
- standard input (``| sh``, ``python3 - <<EOF``, ``bash <<EOF``): analysed when the guard
  knows the text, refused when it was downloaded or decoded;
- a script file (``bash x.sh``, ``source x.sh``): the path is checked and the script
  runs unseen (allowed, unless this same command downloaded it);
- arguments after the code or script: checked like an unknown program's operands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.guard.fields import plain
from harness.guard.invocation import Access, Invocation
from harness.guard.options import names
from harness.guard.programs.generic import generic_fields

Handler = Callable[[Invocation], None]

SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "ash", "mksh", "rbash", "fish", "yash"})
_STDIN_FILES = frozenset({"/dev/stdin", "/proc/self/fd/0", "/dev/fd/0", "-"})


@dataclass(frozen=True)
class _Interpreter:
    """How one interpreter's command line names its code.

    Attributes:
        language: name passed to the literal scanner.
        code: options whose value is code (``-c``, ``-e``, ``--eval``).
        values: options that consume a value that is not code.
        module: options after which the remaining arguments are arguments (``-m``).
        cluster_code: letters that start code inside a short cluster (perl ``-ne``).
        cluster_value: letters whose value is the rest of the cluster (perl ``-I/dir``).
        in_place: letters that make file operands edited in place (perl ``-i``).
    """

    language: str
    code: frozenset[str]
    values: frozenset[str] = frozenset()
    module: frozenset[str] = frozenset()
    cluster_code: str = ""
    cluster_value: str = ""
    in_place: str = ""


def _interp(language: str, code: str, values: str = "", **letters: str) -> _Interpreter:
    return _Interpreter(
        language,
        names(code),
        names(values),
        names(letters.pop("module", "")),
        **letters,
    )


_PERL_LETTERS = {"cluster_code": "eE", "cluster_value": "IMmFl0CdDx", "in_place": "i"}
INTERPRETERS: dict[str, _Interpreter] = {
    "python": _interp("python", "-c", "-W -X -Q", module="-m"),
    "perl": _interp("perl", "-e -E", **_PERL_LETTERS),
    "ruby": _interp("ruby", "-e", "-r -I -C -E", cluster_code="e", in_place="i"),
    "node": _interp("node", "-e --eval -p --print", "-r --require --input-type"),
    "php": _interp("php", "-r -B -R -E", "-d -c -z", module="-f"),
    "lua": _interp("lua", "-e", "-l"),
    "Rscript": _interp("R", "-e", ""),
    "julia": _interp("julia", "-e -E", "-L --project"),
    "bun": _interp("node", "-e --eval -p --print", ""),
}
for _name in ("python2", "python3", "pypy", "pypy3", "python3.10", "python3.11", "python3.12"):
    INTERPRETERS[_name] = INTERPRETERS["python"]
INTERPRETERS["nodejs"] = INTERPRETERS["node"]
INTERPRETERS["luajit"] = INTERPRETERS["lua"]


def _shell(inv: Invocation) -> None:
    args = list(inv.args)
    index, code_mode, stdin_mode = 0, False, False
    while index < len(args):
        text = plain(args[index])
        if text == "--":
            index += 1
            break
        if text in ("-o", "+o", "-O", "+O"):
            index += 2
        elif text in ("--rcfile", "--init-file"):
            if index + 1 < len(args):
                inv.touch(args[index + 1], Access.READ)
            index += 2
        elif text.startswith("--") or (text[:1] in "-+" and len(text) > 1):
            code_mode = code_mode or (text[0] == "-" and "c" in text[1:] and text[1] != "-")
            stdin_mode = stdin_mode or (text[0] == "-" and "s" in text[1:] and text[1] != "-")
            index += 1
        else:
            break
    rest = args[index:]
    if rest and plain(rest[0]) == "-" and not code_mode:
        stdin_mode, rest = True, rest[1:]
    if code_mode and rest:
        inv.output(inv.run_shell(rest[0], positional=rest[1:]))
    elif stdin_mode or not rest:
        inv.run_stdin("shell")
        generic_fields(inv, rest, Access.READ)
    else:
        inv.execute_file(rest[0])
        generic_fields(inv, rest[1:], Access.READ)


def _eval(inv: Invocation) -> None:
    if inv.args:
        inv.output(inv.run_shell(" ".join(inv.args)))


def _source(inv: Invocation) -> None:
    args = [field for field in inv.args if plain(field) != "--"]
    if not args:
        return
    if plain(args[0]) in _STDIN_FILES:
        inv.run_stdin("shell")
    else:
        inv.execute_file(args[0])
    generic_fields(inv, args[1:], Access.READ)


def _cluster(
    spec: _Interpreter, inv: Invocation, args: list[str], index: int, codes: list[str]
) -> tuple[int, bool]:
    """Read one short-option cluster at ``args[index - 1]``; return (next index, in-place)."""
    field, text = args[index - 1], plain(args[index - 1])
    for position in range(1, len(text)):
        letter, rest = text[position], field[position + 1 :]
        if letter in spec.cluster_code or f"-{letter}" in spec.code:
            if rest:
                codes.append(rest)
            elif index < len(args):
                codes.append(args[index])
                index += 1
            return index, False
        if letter in spec.in_place:
            return index, True
        if letter in spec.cluster_value:
            return index, False
        if f"-{letter}" in spec.values or f"-{letter}" in spec.module:
            return index + (0 if rest else 1), False
    return index, False


def _interpreter(inv: Invocation) -> None:
    spec = INTERPRETERS[inv.name]
    args = list(inv.args)
    codes: list[str] = []
    index, in_place, from_stdin, module = 0, False, False, False
    while index < len(args):
        text = plain(args[index])
        index += 1
        name, equals, _ = text.partition("=")
        if text in ("--", "-") or not text.startswith("-"):
            from_stdin = text == "-"
            index -= 0 if text in ("--", "-") else 1
            break
        if name in spec.code and text.startswith("--"):
            codes.append(args[index - 1][len(name) + 1 :] if equals else args[index])
            index += 0 if equals else 1
        elif text in spec.code or text in spec.values or text in spec.module:
            if text in spec.code and index < len(args):
                codes.append(args[index])
            module = module or text in spec.module
            index += 1
            if module:
                break
        elif text.startswith("--"):
            index += 1 if name in spec.values and not equals else 0
        elif text[:2] in spec.module:
            module = True
            break
        else:
            index, edit = _cluster(spec, inv, args, index, codes)
            in_place = in_place or edit
    if module:  # a library module runs: standard input is its data, not code
        for code in codes:
            inv.run_program(spec.language, code)
        generic_fields(inv, args[index:], Access.READ)
        return
    _interpreter_operands(inv, spec, codes, args[index:], in_place, from_stdin)


def _interpreter_operands(
    inv: Invocation,
    spec: _Interpreter,
    codes: list[str],
    rest: list[str],
    in_place: bool,
    no_script: bool,
) -> None:
    for code in codes:
        inv.run_program(spec.language, code)
    if codes or no_script:
        if not codes and not rest:
            inv.run_stdin(spec.language)
        generic_fields(inv, rest, Access.EDIT if in_place else Access.READ)
        return
    if not rest:
        inv.run_stdin(spec.language)
        return
    inv.execute_file(rest[0], spec.language)
    generic_fields(inv, rest[1:], Access.EDIT if in_place else Access.READ)


def interpreter_handlers() -> dict[str, Handler]:
    """The handlers of this module by command name."""
    handlers: dict[str, Handler] = {name: _shell for name in SHELLS}
    handlers.update({name: _interpreter for name in INTERPRETERS})
    handlers.update({"eval": _eval, "source": _source, ".": _source})
    return handlers
