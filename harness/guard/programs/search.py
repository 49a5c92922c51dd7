"""Roles for programs whose first operand is a pattern or a script (grep, sed, awk, jq, find).

The pattern (``grep -r memory /var/log``, ``sed 's#/memory/#/x/#'``,
``awk '/memory/ {print}'``, ``jq .memory``) is a mention; the operands after it are the
files searched or edited. With ``-e``/``-f`` the pattern comes from the option and every
operand is a file. Scripts are still looked into for what they open themselves: sed's
``w``/``r``/``e`` commands, awk's quoted file names and shell commands.
``find`` roots are paths; its ``-path``/``-name`` tests single out namespaces under ``/``;
``-exec`` runs a command.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

from harness.guard.fields import plain
from harness.guard.invocation import Access, Invocation
from harness.guard.options import (
    OptionSpec,
    has_option,
    names,
    operands,
    option_values,
    parse_args,
    spec,
)
from harness.guard.paths import VIRTUAL_ROOTS
from harness.guard.programs.sed import sed_operands

Handler = Callable[[Invocation], None]

_GREP = spec(
    "-e -f -m -A -B -C -d -D",
    "--regexp --file --max-count --after-context --before-context --context",
    "--include --exclude --exclude-dir --exclude-from --label --binary-files",
    "--devices --directories --group-separator",
)
_RG = spec(
    "-e -f -g -t -T -j -M -r -E -d -m -A -B -C",
    "--regexp --file --glob --iglob --type --type-not --type-add --type-clear",
    "--threads --max-columns --replace --encoding --max-depth --maxdepth",
    "--ignore-file --pre --pre-glob --sort --sortr --colors --max-count",
    "--context-separator --path-separator --max-filesize --engine",
)
_AG = spec("-G -g -p -m -A -B -C --ignore --ignore-dir --depth --file-search-regex")
_SED = spec("-e", "-f", "-l", "--expression", "--file", "--line-length")
_AWK = spec("-f -v -F -i -l -E -W --file --assign --field-separator --include --load")
_AWK_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_FIND_ZERO_ARG = names(
    "-print -print0 -delete -ls -prune -quit -true -false -empty -executable -readable "
    "-writable -depth -mount -xdev -noleaf -daystart -follow -nouser -nogroup -o -a -not "
    "-and -or -ignore_readdir_race -noignore_readdir_race -help -version -d"
)
_FIND_LEADING = re.compile(r"^-(?:[HLP]|D.*|O\d*)$")
"""find's options before the roots: symlink policy, ``-D debugopts``, ``-O level``."""
_NAME_CHARS = re.compile(r"\[!?\^?\]?[^\]]*\]|[*?\\]")
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_PATH_TESTS = frozenset({"-path", "-wholename", "-ipath", "-iwholename", "-regex", "-iregex"})
_FIND_NAME_TESTS = frozenset({"-name", "-iname", "-lname", "-ilname"})
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fls", "-fprintf"})
_FIND_READS = frozenset({"-newer", "-anewer", "-cnewer", "-samefile", "-files0-from"})


def _search(inv: Invocation, option_spec: OptionSpec, pattern_options: tuple[str, ...]) -> None:
    parsed = parse_args(inv.args, option_spec)
    for name in ("-f", "--file", "--exclude-from", "--ignore-file"):
        for value in option_values(parsed, name):
            inv.touch(value, Access.READ)
    files = operands(parsed)
    if not has_option(parsed, *pattern_options) and files:
        files = files[1:]
    for field in files:
        inv.touch(field, Access.SEARCH)


def _grep(inv: Invocation) -> None:
    _search(inv, _GREP, ("-e", "--regexp", "-f", "--file"))


def _rg(inv: Invocation) -> None:
    pattern_options = ("-e", "--regexp", "-f", "--file", "--files", "--type-list")
    _search(inv, _RG, pattern_options)


def _ag(inv: Invocation) -> None:
    _search(inv, _AG, ("-g", "-G", "--file-search-regex"))


def _sed(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _SED)
    scripts = option_values(parsed, "-e", "--expression")
    for value in option_values(parsed, "-f", "--file"):
        inv.touch(value, Access.READ)
    files = operands(parsed)
    if not scripts and not has_option(parsed, "-f", "--file") and files:
        scripts, files = files[:1], files[1:]
    for script in scripts:
        for found in sed_operands(plain(script)):
            if found.kind == "shell":
                inv.run_shell(found.text)
            else:
                inv.touch(found.text, Access.READ if found.kind == "read" else Access.WRITE)
    in_place = any(a.option and a.option.startswith(("-i", "--in-place")) for a in parsed)
    for field in files:
        inv.touch(field, Access.EDIT if in_place else Access.READ)


def _awk(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _AWK)
    program_files = option_values(parsed, "-f", "--file", "-E")
    for value in program_files:
        inv.touch(value, Access.READ)
    files = operands(parsed)
    if not program_files and files:
        inv.run_program("awk", files[0])
        files = files[1:]
    assignments = option_values(parsed, "-v", "--assign")
    for field in files:
        if _AWK_ASSIGNMENT.match(plain(field)):
            assignments.append(field)
        else:
            inv.touch(field, Access.READ)
    for field in assignments:
        value = field[plain(field).find("=") + 1 :]
        if plain(value).startswith("/"):
            inv.touch(value, Access.READ)


def _jq(inv: Invocation) -> None:
    args = list(inv.args)
    filter_seen = False
    index = 0
    in_place = False
    while index < len(args):
        text = plain(args[index])
        index += 1
        if text in ("--arg", "--argjson"):
            index += 2
        elif text in ("--slurpfile", "--rawfile"):
            if index + 1 < len(args):
                inv.touch(args[index + 1], Access.READ)
            index += 2
        elif text in ("-f", "--from-file"):
            if index < len(args):
                inv.touch(args[index], Access.READ)
            filter_seen = True
            index += 1
        elif text in ("--indent", "-L", "-I", "-o", "-p", "--output-format", "--input-format"):
            index += 1
        elif text in ("--args", "--jsonargs"):
            break
        elif text in ("-i", "--inplace"):
            in_place = True
        elif text.startswith("-") and text != "-":
            continue
        elif not filter_seen:
            filter_seen = text not in ("eval", "e", "eval-all", "ea") or inv.name != "yq"
        else:
            inv.touch(args[index - 1], Access.EDIT if in_place else Access.READ)


def _find(inv: Invocation) -> None:
    args = list(inv.args)
    index = 0
    while index < len(args) and _FIND_LEADING.match(plain(args[index])):
        index += 2 if plain(args[index]) == "-D" else 1
    roots: list[str] = []
    while index < len(args) and not re.match(r"[-(!),]", plain(args[index])):
        roots.append(args[index])
        index += 1
    roots = roots or ["."]
    for root in roots:
        inv.touch(root, Access.LIST)
    _find_expression(inv, args[index:], [plain(root) for root in roots])


def _find_expression(inv: Invocation, args: list[str], roots: list[str]) -> None:
    index = 0
    while index < len(args):
        test = plain(args[index])
        index += 1
        if test in _FIND_EXEC:
            end = index
            while end < len(args) and plain(args[end]) not in (";", "+"):
                end += 1
            inv.run(args[index:end])
            index = end + 1
        elif test in _FIND_ZERO_ARG or not test.startswith("-") or index >= len(args):
            continue
        else:
            _find_test(inv, test, args[index], roots)
            index += 1


def _find_test(inv: Invocation, test: str, field: str, roots: list[str]) -> None:
    value = plain(field)
    if test in _FIND_WRITES:
        inv.touch(field, Access.WRITE)
    elif test in _FIND_READS or test.startswith("-newer"):
        inv.touch(field, Access.READ)
    elif test in _FIND_NAME_TESTS:
        folded = value.lower() if test in ("-iname", "-ilname") else value
        if _names_namespace(folded):
            for root in roots:
                inv.touch_pattern(root.rstrip("/") + "/" + folded, Access.LIST)
    elif test in _FIND_PATH_TESTS:
        pattern = value.replace(".*", "*").replace("\\.", ".") if "regex" in test else value
        if not any(_names_namespace(part) for part in pattern.split("/")):
            return
        if pattern.startswith("*/"):
            for root in roots:
                inv.touch_pattern(root.rstrip("/") + pattern[1:], Access.LIST)
        elif pattern.startswith("/"):
            inv.touch_pattern(pattern, Access.LIST)


def _names_namespace(pattern: str) -> bool:
    """Whether find name pattern ``pattern`` singles out a namespace, not a class of names.

    It must match ``memory``, ``skills`` or ``incident`` and spell at least half of it
    literally: ``memory``, ``mem*``, ``[sS]kills`` do; ``*``, ``m*``, ``[a-j]*`` match a
    namespace among many other names, as a sweep of ``/`` does (not a touch).

    >>> [_names_namespace(p) for p in ("memory", "mem*", "*ills", "m*", "[a-j]*", "*.log")]
    [True, True, True, False, False, False]
    """
    matched = [root for root in VIRTUAL_ROOTS if fnmatch.fnmatchcase(root, pattern)]
    literal = len(_NAME_CHARS.sub("", pattern))
    return any(2 * literal >= len(root) for root in matched)


def search_handlers() -> dict[str, Handler]:
    """The handlers of this module by command name."""
    handlers: dict[str, Handler] = {}
    handlers.update({name: _grep for name in ("grep", "egrep", "fgrep", "zgrep", "ack")})
    handlers.update({"rg": _rg, "ag": _ag, "sed": _sed, "gsed": _sed, "find": _find})
    handlers.update({name: _awk for name in ("awk", "gawk", "mawk", "nawk")})
    handlers.update({name: _jq for name in ("jq", "yq", "gojq", "jaq")})
    return handlers
