"""Roles for programs that run another command (sudo, env, timeout, xargs, watch …).

A wrapper's own options end at the first operand; the rest is a command the guard
analyses as if typed directly (with the wrapper's environment assignments, working
directory and standard input). ``watch``, ``su -c``, ``flock -c``, ``script -c`` and
``trap`` take a shell string instead. ``xargs`` appends the words of its input (when
the guard knows them) to the command it runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from harness.guard.fields import UNKNOWN, plain
from harness.guard.invocation import Access, Invocation
from harness.guard.options import (
    Arg,
    OptionSpec,
    has_option,
    operands,
    option_values,
    parse_args,
    spec,
)
from harness.guard.words import words_of

Handler = Callable[[Invocation], None]

_ASSIGNMENT = re.compile(r"^([^=]+)=(.*)$", re.DOTALL)
"""A NAME=VALUE word before the command: GNU env and sudo take any name without "="."""

_SIMPLE: dict[str, OptionSpec] = {
    "nohup": spec(stop_at_operand=True),
    "sshpass": spec("-p -f -d -e -P", stop_at_operand=True),
    "coproc": spec(stop_at_operand=True),
    "setsid": spec(stop_at_operand=True),
    "unbuffer": spec(stop_at_operand=True),
    "rlwrap": spec(
        "-a -b -C -D -e -f -g -H -l -O -p -P -q -R -s -S -t -w -z", stop_at_operand=True
    ),
    "builtin": spec(stop_at_operand=True),
    "busybox": spec(stop_at_operand=True),
    "catchsegv": spec(stop_at_operand=True),
    "valgrind": spec(stop_at_operand=True),
    "proxychains": spec("-f", stop_at_operand=True),
    "proxychains4": spec("-f", stop_at_operand=True),
    "torsocks": spec("-u", "-p", "-a", "-P", stop_at_operand=True),
    "nice": spec("-n", "--adjustment", stop_at_operand=True),
    "stdbuf": spec("-i", "-o", "-e", "--input", "--output", "--error", stop_at_operand=True),
    "ionice": spec("-c", "-n", "-p", "-P", "-u", "--class", "--classdata", stop_at_operand=True),
    "doas": spec("-u", "-C", stop_at_operand=True),
    "exec": spec("-a", stop_at_operand=True),
    "time": spec("-f", "--format", "-o", "--output", stop_at_operand=True),
    "strace": spec("-o -e -p -s -u -E -a -b -I -O -P -S -X", stop_at_operand=True),
    "ltrace": spec("-o -e -p -s -u -a -n -l", stop_at_operand=True),
    "nsenter": spec("-t -S -G -w -R --target --setuid --setgid --wd --root", stop_at_operand=True),
    "unshare": spec(
        "--map-user", "--map-group", "-R", "-w", "--root", "--wd", stop_at_operand=True
    ),
    "systemd-run": spec(
        "-p -u -E -M --unit --property --setenv --machine --uid --gid",
        "--working-directory",
        stop_at_operand=True,
    ),
    "chroot": spec("--userspec", "--groups", stop_at_operand=True),
}


def _run_rest(inv: Invocation, argv: list[str], *, chdir: str | None = None) -> None:
    env: dict[str, frozenset[str]] = {}
    while argv and (match := _ASSIGNMENT.match(plain(argv[0]))):
        env[match.group(1)] = frozenset({match.group(2)})
        argv = argv[1:]
    if argv:
        inv.output(inv.run(argv, env=env, stdin=inv.stdin, chdir=chdir))


def _simple(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _SIMPLE[inv.name])
    for value in option_values(parsed, "-o", "--output"):
        inv.touch(value, Access.WRITE)
    rest = operands(parsed)
    if inv.name == "chroot" and rest:
        inv.touch(rest[0], Access.EXECUTE)
        rest = rest[1:]
    _run_rest(inv, rest)


def _sudo(inv: Invocation) -> None:
    takes = spec(
        "-u -g -C -D -h -p -r -t -U -R -T",
        "--user --group --chdir --host --prompt --role --type --other-user --chroot",
        "--close-from",
        "--command-timeout",
        stop_at_operand=True,
    )
    parsed = parse_args(inv.args, takes)
    rest = operands(parsed)
    if has_option(parsed, "-e", "--edit") or inv.name == "sudoedit":
        for field in rest:
            inv.touch(field, Access.EDIT)
        return
    chdirs = option_values(parsed, "-D", "--chdir")
    _run_rest(inv, rest, chdir=chdirs[-1] if chdirs else None)


def _env(inv: Invocation) -> None:
    takes = spec(
        "-u", "--unset", "-C", "--chdir", "-S", "--split-string", "-P", stop_at_operand=True
    )
    parsed = parse_args(inv.args, takes)
    chdirs = option_values(parsed, "-C", "--chdir")
    for value in chdirs:
        inv.touch(value, Access.CHDIR)
    for value in option_values(parsed, "-S", "--split-string"):
        inv.run_shell(value + " " + " ".join(plain(f) for f in operands(parsed)))
        return
    _run_rest(inv, operands(parsed), chdir=chdirs[-1] if chdirs else None)


def _timeout(inv: Invocation) -> None:
    parsed = parse_args(
        inv.args, spec("-s", "-k", "--signal", "--kill-after", stop_at_operand=True)
    )
    _run_rest(inv, operands(parsed)[1:])


def _first_operand_is_setting(inv: Invocation) -> None:
    """taskset MASK cmd, chrt PRIO cmd."""
    parsed = parse_args(inv.args, spec("--cpu-list", stop_at_operand=True))
    if has_option(parsed, "-p", "--pid"):
        return
    _run_rest(inv, operands(parsed)[1:])


def _command(inv: Invocation) -> None:
    parsed = parse_args(inv.args, spec(stop_at_operand=True))
    if not has_option(parsed, "-v", "-V"):
        _run_rest(inv, operands(parsed))


def _xargs(inv: Invocation) -> None:
    takes = spec(
        "-I -n -L -l -P -d -E -s -a",
        "--arg-file --delimiter --max-args --max-lines --max-procs --replace --eof",
        "--max-chars",
        "--process-slot-var",
        stop_at_operand=True,
    )
    parsed = parse_args(inv.args, takes)
    files = option_values(parsed, "-a", "--arg-file")
    for value in files:
        inv.touch(value, Access.READ)
    text = inv.known_content(files[-1]) if files else inv.stdin.text
    delimiters = option_values(parsed, "-d", "--delimiter")
    if has_option(parsed, "-0", "--null"):
        delimiters.append("\\0")
    items = xargs_items(text, plain(delimiters[-1]) if delimiters else None) if text else []
    if text is None:  # an input the walk cannot know: arguments only known when it runs
        items = [UNKNOWN]
    replace = option_values(parsed, "-I", "--replace") + (["{}"] if _bare_i(parsed) else [])
    _run_items(inv, operands(parsed) or ["echo"], items, plain(replace[-1]) if replace else None)


def _bare_i(parsed: list[Arg]) -> bool:
    """``-i`` / ``--replace`` without a value: the replace string is ``{}``."""
    return any(arg.option in ("-i", "--replace") and not arg.value for arg in parsed)


def _run_items(inv: Invocation, argv: list[str], items: list[str], token: str | None) -> None:
    """xargs runs ``argv`` with its input ``items`` appended, or put in place of ``token``."""
    if token is None or not items:
        inv.output(inv.run([*argv, *items], stdin=inv.stdin))
        return
    for item in items:
        inv.run([plain(arg).replace(token, item) if token in plain(arg) else arg for arg in argv])


_DELIMITER_ESCAPES = {"\\0": "\0", "\\n": "\n", "\\t": "\t"}


def xargs_items(text: str, delimiter: str | None) -> list[str]:
    r"""The arguments xargs reads from ``text`` (GNU findutils, xargs(1)).

    Without a delimiter, blanks and newlines separate items, quotes group and a
    backslash escapes; with ``-d`` (``delimiter`` as typed, ``\0`` for ``-0``) only the
    delimiter separates.

    >>> xargs_items("'/memory/a b' \"c\" d\\ e\n", None)
    ['/memory/a b', 'c', 'd e']
    >>> xargs_items("a b\0c\0", "\\0")
    ['a b', 'c']
    """
    if delimiter is not None:
        cut = _DELIMITER_ESCAPES.get(delimiter, delimiter[:1] or "\n")
        return [item for item in text.split(cut) if item]
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return words_of(text)


def _watch(inv: Invocation) -> None:
    takes = spec("-n", "--interval", "-q", "--equexit", stop_at_operand=True)
    parsed = parse_args(inv.args, takes)
    rest = operands(parsed)
    if has_option(parsed, "-x", "--exec"):
        inv.run(rest)
    elif rest:
        inv.run_shell(" ".join(plain(field) for field in rest))


def _shell_string_option(inv: Invocation, takes: OptionSpec) -> list[str]:
    parsed = parse_args(inv.args, takes)
    for code in option_values(parsed, "-c", "--command"):
        inv.run_shell(code)
    return operands(parsed)


def _su(inv: Invocation) -> None:
    _shell_string_option(inv, spec("-c", "--command", "-s", "--shell", "-g", "-G", "-w"))


def _runuser(inv: Invocation) -> None:
    takes = spec("-c", "--command", "-s", "--shell", "-g", "-G", "-u", "--user", "-w")
    parsed = parse_args(inv.args, takes)
    if has_option(parsed, "-u", "--user"):
        _run_rest(inv, operands(parsed))
    else:
        _shell_string_option(inv, takes)


def _flock(inv: Invocation) -> None:
    takes = spec(
        "-w",
        "--wait",
        "--timeout",
        "-E",
        "--conflict-exit-code",
        "-c",
        "--command",
        stop_at_operand=True,
    )
    rest = _shell_string_option(inv, takes)
    if rest and not plain(rest[0]).isdigit():
        inv.touch(rest[0], Access.WRITE)
    if len(rest) > 1 and plain(rest[1]) in ("-c", "--command") and len(rest) > 2:
        inv.run_shell(rest[2])
    elif len(rest) > 1:
        _run_rest(inv, rest[1:])


def _script(inv: Invocation) -> None:
    takes = spec("-c", "--command", "-E", "-o", "-T", "-I", "-O", "-B", "--log-timing")
    for field in _shell_string_option(inv, takes):
        inv.touch(field, Access.WRITE)


def _trap(inv: Invocation) -> None:
    rest = [field for field in inv.args if plain(field) not in ("--",)]
    if rest and plain(rest[0]) not in ("-", "-l", "-p", ""):
        inv.run_shell(rest[0])


def _parallel(inv: Invocation) -> None:
    """GNU parallel: the command line (``{}`` marks where an input goes, else it is
    appended) runs through a shell once per input, from ``:::``, ``::::`` files or stdin."""
    args = list(inv.args)
    texts = [plain(field) for field in args]
    cut = next((i for i, t in enumerate(texts) if t in (":::", "::::")), len(args))
    template = [t for t in texts[:cut] if not t.startswith("-")]
    values = [plain(field) for field in args[cut + 1 :]]
    if cut < len(args) and texts[cut] == "::::":
        for field in args[cut + 1 :]:
            inv.touch(field, Access.READ)
        values = []
    if cut == len(args) and inv.stdin.text:
        values = xargs_items(inv.stdin.text, "\n")
    line = " ".join(template)
    for value in values:
        inv.run_shell(line.replace("{}", value) if "{}" in line else f"{line} {value}".strip())
    if not values and line:
        inv.run_shell(line)


def wrapper_handlers() -> dict[str, Handler]:
    """The handlers of this module by command name."""
    handlers: dict[str, Handler] = {name: _simple for name in _SIMPLE}
    handlers.update(
        {
            "sudo": _sudo,
            "sudoedit": _sudo,
            "env": _env,
            "timeout": _timeout,
            "taskset": _first_operand_is_setting,
            "chrt": _first_operand_is_setting,
            "command": _command,
            "xargs": _xargs,
            "watch": _watch,
            "su": _su,
            "runuser": _runuser,
            "flock": _flock,
            "script": _script,
            "trap": _trap,
            "parallel": _parallel,
        }
    )
    return handlers
