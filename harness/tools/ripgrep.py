"""Glob and Grep on sandbox paths: ripgrep command lines, and its output parsed.

The commands run inside the sandbox through ``Workspace.exec``; every argument is
quoted with ``shlex.quote``. File lists are NUL-separated and come with their
mtimes; Grep's lines come from ``rg --json`` (one JSON event per line), so paths and
lines containing ``:``, ``-`` or newlines parse without ambiguity (ripgrep 13+, GNU
``xargs``/``stat``). All search hidden files and skip ``.git``; Grep honours
``.gitignore``, Glob lists ignored files too (Claude Code 2.1.332's defaults).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from shlex import quote
from typing import Any

from harness.sandbox.workspace import CommandResult
from harness.tools.roots import meant_root
from memory_store import FileMatches

_COMMON = ("--hidden", "-g", "!.git")
_WITH_MTIMES = " | xargs -0 -r stat --printf '%.9Y\\t%n\\0' --"


@dataclass(frozen=True)
class GrepOptions:
    """ripgrep flags for one Grep call (``type`` is ripgrep's ``--type`` name)."""

    glob: str | None = None
    type: str | None = None
    ignore_case: bool = False
    before: int = 0
    after: int = 0
    multiline: bool = False


def files_command(pattern: str, root: str) -> str:
    """Files under ``root`` matching the glob, each with its mtime (see ``parse_files``).

    ripgrep's own ``--sortr=modified`` sorts each directory's entries (a directory by
    its own mtime), not the whole list, so the mtimes come from ``stat`` (GNU
    coreutils) and the harness sorts.

    >>> print(files_command("*.py", "/workspace/my dir"))  # doctest: +NORMALIZE_WHITESPACE
    set -o pipefail; rg --files -0 --no-ignore --hidden -g '!.git' -g '*.py' -- '/workspace/my dir'
    | xargs -0 -r stat --printf '%.9Y\\t%n\\0' --
    """
    return (
        "set -o pipefail; "
        + _join(["rg", "--files", "-0", "--no-ignore", *_COMMON, "-g", pattern, "--", root])
        + _WITH_MTIMES
    )


def matching_files_command(pattern: str, root: str, options: GrepOptions) -> str:
    """Files under ``root`` with a match, each with its mtime (see ``parse_files``)."""
    args = ["rg", "--files-with-matches", "-0", *_COMMON, *_filters(options)]
    return (
        "set -o pipefail; " + _join([*args, "-e", rg_pattern(pattern), "--", root]) + _WITH_MTIMES
    )


def grep_command(pattern: str, root: str, options: GrepOptions) -> str:
    """``rg --json`` searching ``root`` for ``pattern``, files in path order.

    >>> grep_command("a b", "/workspace", GrepOptions(ignore_case=True, after=2))
    "rg --json --hidden -g '!.git' --sort=path -i -A 2 -e '(?:a b)' -- /workspace"
    """
    args = ["rg", "--json", *_COMMON, "--sort=path", *_filters(options)]
    if options.before:
        args += ["-B", str(options.before)]
    if options.after:
        args += ["-A", str(options.after)]
    return _join([*args, "-e", rg_pattern(pattern), "--", root])


def _filters(options: GrepOptions) -> list[str]:
    args: list[str] = []
    if options.ignore_case:
        args.append("-i")
    if options.multiline:
        args += ["-U", "--multiline-dotall"]
    if options.glob is not None:
        args += ["-g", options.glob]
    if options.type is not None:
        args += ["-t", options.type]
    return args


TIMED_OUT = "The search timed out; search a narrower path or use a more specific pattern."
REJECTED = (
    "Search failed \u2014 ripgrep rejected the pattern, glob, or file type without searching:"
)
"""Grep's first line when ripgrep refuses its arguments (Claude Code 2.1.336), then
ripgrep's own error."""


@dataclass(frozen=True)
class Failure:
    """What to tell the model when ripgrep failed: ``text``, and whether Claude Code
    gives it inside ``<tool_use_error>`` (``wrapped``) or as it is."""

    text: str
    wrapped: bool = True


def failure(result: CommandResult, root: str, *, produced: bool, cwd: str) -> Failure | None:
    """The error to report when ripgrep failed and ``produced`` nothing, else None.

    ripgrep exits 0 with matches, 1 without, 2 on an error (a bad regex, a missing
    path; also an unreadable file somewhere, when the other results still count).
    """
    if result.timed_out:
        return Failure(
            "The search timed out; search a narrower path or use a more specific pattern."
        )
    if result.exit_code in (0, 1) or produced:
        return None
    message = result.stderr.strip()
    if "(os error 2)" in message:
        guess = meant_root(root)
        if guess is not None:
            return Failure(f"Path does not exist: {root}. Did you mean {guess}?")
        return Failure(missing_directory(root, cwd), wrapped=False)
    if message:  # ripgrep 14 names itself on each error line; 13 did not
        named = message if message.startswith("rg: ") else f"rg: {message}"
        return Failure(f"{REJECTED}\n{named}", wrapped=False)
    return Failure("ripgrep failed.")


NEWLINE_REFUSED = (
    "rg: the literal '\"\\n\"' is not allowed in a regex\n\n"
    "Consider enabling multiline mode with the --multiline flag (or -U for short).\n"
    "When multiline mode is enabled, new line characters can be matched."
)
"""What ripgrep (13 and 14) answers a pattern that must match a newline when multiline
mode is off (then named ``rg:``, as ``failure`` names every error)."""

_NEWLINE_ESCAPE = re.compile(
    r"\\(?:n|x0[aA]|x\{0*[aA]\}|u000[aA]|u\{0*[aA]\}|U0000000[aA]|U\{0*[aA]\})"
)
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?[:)]")


def refuses_newline(pattern: str) -> bool:
    """Whether ripgrep, multiline off, refuses ``pattern`` for a literal newline: a newline
    (itself, or ``\\n``, ``\\x0a``, ``\\x{a}``, ``\\u000a``, ``\\u{a}``, ``\\U0000000a``,
    ``\\U{a}``) outside a bracket class, or a class of newlines alone (``[\\n]``,
    ``[[\\n]]``); a class with other members has the newline dropped instead, as ripgrep
    does, and in extended mode (``(?x)``) a literal newline and a ``#`` comment are
    ignored. An approximation of ripgrep's check on its parsed regex, for the searches
    that run without it (``/memory``, ``/skills``, ``/incident``): where it is unsure
    (a negated class, a range, a class operation) it accepts, and the search finds no
    line holding a newline.
    """
    depth, newline, other, extended, i = 0, False, False, False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            found = _NEWLINE_ESCAPE.match(pattern, i)
            if found is not None and depth == 0:
                return True
            newline, other = newline or found is not None, other or found is None
            i = found.end() if found is not None else i + 2
            continue
        if extended and char == "#":  # a comment, to the end of the line
            end = pattern.find("\n", i)
            i = len(pattern) if end == -1 else end + 1
            continue
        if extended and char.isspace():
            i += 1
            continue
        if char == "\n":
            if depth == 0:
                return True
            newline = True
        elif depth == 0 and (flags := _FLAGS.match(pattern, i)) is not None:
            on, off = flags.group(1), flags.group(2) or ""
            extended = ("x" in on or extended) and "x" not in off
            i = flags.end()
            continue
        elif char == "[":
            if depth and pattern.startswith("[:", i) and (end := pattern.find(":]", i + 2)) != -1:
                other, i = True, end + 2  # a POSIX class inside the bracket class
                continue
            if depth == 0:
                newline, other = False, False
            depth, i = depth + 1, i + 1
            if pattern.startswith("^", i):
                other, i = True, i + 1  # negated: unsure, so accepted
            if pattern.startswith("]", i):
                other, i = True, i + 1  # []...] and [^]...] hold a ]
            continue
        elif char == "]" and depth:
            depth -= 1
            if depth == 0 and newline and not other:
                return True  # [\n]: a class of the newline alone
        elif depth:
            other = True  # a member, a range's -, or a class operation (&&, --, ~~)
        i += 1
    return False


def missing_directory(root: str, cwd: str) -> str:
    """Glob's and Grep's error for a path that does not exist (Claude Code 2.1.336)."""
    return f"Directory does not exist: {root}. Note: your current working directory is {cwd}."


def rg_pattern(pattern: str) -> str:
    """The pattern as ripgrep 14 compiles it, ``(?:PATTERN)``: the same matches, and a
    bad pattern's error quotes it as Claude Code's ripgrep does.

    >>> rg_pattern("(unclosed")
    '(?:(unclosed)'
    """
    return f"(?:{pattern})"


def parse_files(stdout: str) -> list[str]:
    """The paths of a ``files_command``/``matching_files_command``, newest first
    (ties by path).

    >>> parse_files("1.5\\t/w/old\\x002.0\\t/w/new\\x00")
    ['/w/new', '/w/old']
    """
    stamped: list[tuple[float, str]] = []
    for record in stdout.split("\0"):
        mtime, tab, path = record.partition("\t")
        if tab:
            stamped.append((-float(mtime), path))
    return [path for _, path in sorted(stamped)]


def parse_json(stdout: str) -> list[FileMatches]:
    """Match and context lines from ``rg --json`` output, in its order, one entry per
    run of records of the same file (ripgrep gives each file's records together).

    A multi-line match (``-U``) gives one match line per line it spans.
    """
    found: list[FileMatches] = []
    context: set[int] = set()
    for raw in stdout.split("\n"):
        if not raw.startswith("{"):
            continue
        event = json.loads(raw)
        kind = event.get("type")
        if kind not in ("match", "context"):
            continue
        data = event["data"]
        path, first = _text(data["path"]), int(data["line_number"])
        lines = _text(data["lines"]).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not found or found[-1].path != path:
            if found:
                found[-1] = found[-1]._replace(context=frozenset(context))
            found.append(FileMatches(path, [], []))
            context = set()
        numbers = range(first, first + len(lines))
        found[-1].line_numbers.extend(numbers)
        found[-1].lines.extend(line.removesuffix("\r") for line in lines)
        if kind == "context":
            context.update(numbers)
    if found:
        found[-1] = found[-1]._replace(context=frozenset(context))
    return found


def _text(field: Mapping[str, Any]) -> str:
    """ripgrep's ``{"text": …}`` or, for bytes that are not UTF-8, ``{"bytes": base64}``."""
    if "text" in field:
        return str(field["text"])
    return base64.b64decode(field.get("bytes", "")).decode("utf-8", errors="replace")


def _join(args: list[str]) -> str:
    return " ".join(quote(a) for a in args)
