"""Whether SQL only reads (for the approval policy's database clients): pure text rules.

A script reads when every statement starts with a reading keyword (``SELECT``, ``SHOW``,
``EXPLAIN``, ``WITH``, ``TABLE``, ``VALUES``, transaction control, session ``SET``) and no
changing keyword or function appears outside quotes and comments (so ``WITH x AS (DELETE …)``,
``SELECT … INTO new_table``, ``EXPLAIN ANALYZE UPDATE …``, ``SELECT pg_terminate_backend(…)``
change things). psql meta-commands: ``\\copy … FROM`` writes; ``\\i``/``\\ir``/``\\include``,
``\\!``, ``\\gexec``, a pipe to a program (``\\o |cmd``, ``\\copy … program``) and a file
written or environment set (``\\o f``, ``\\w f``, ``\\setenv``) are unknown; the rest
(``\\d``, ``\\l``, ``\\x`` …) read. Quoting follows PostgreSQL: ``'…'`` with ``''``,
``E'…'`` with backslash escapes, ``"…"`` identifiers, ``$tag$…$tag$`` bodies, ``--`` and
nested ``/* */`` comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from harness.guard.options import names


class SqlKind(StrEnum):
    """What a script does."""

    READ = "read"
    WRITE = "write"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class SqlVerdict:
    """A script's kind and the statement that decided it ("" when it reads)."""

    kind: SqlKind
    statement: str = ""


READING_STARTS = names(
    "select show explain with table values begin start commit end rollback abort set reset",
    "savepoint release fetch close declare discard",
)
"""Keywords a reading statement may start with."""

CHANGING_WORDS = names(
    "insert update delete merge truncate drop alter create grant revoke copy lock into"
)
"""Keywords that make a statement that starts reading change something (``WITH … DELETE``,
``EXPLAIN ANALYZE UPDATE``, ``SELECT … INTO``, ``SELECT … FOR UPDATE``)."""

CHANGING_FUNCTIONS = names(
    "pg_terminate_backend pg_cancel_backend pg_reload_conf pg_rotate_logfile set_config",
    "setval nextval dblink_exec lo_import lo_export lo_unlink pg_switch_wal",
    "pg_create_restore_point pg_promote pg_drop_replication_slot",
    "pg_create_logical_replication_slot pg_create_physical_replication_slot",
)
"""Functions that act when a ``SELECT`` calls them."""

_UNKNOWN_META = frozenset({"i", "ir", "include", "include_relative", "!", "gexec", "e", "edit"})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def classify_sql(script: str) -> SqlVerdict:
    """Classify ``script`` (one or more statements, psql meta-commands allowed).

    >>> classify_sql("select count(*) from orders where note = 'drop table x';").kind.value
    'read'
    >>> classify_sql("WITH gone AS (DELETE FROM jobs RETURNING id) SELECT * FROM gone").kind.value
    'write'
    >>> classify_sql("\\\\dt\\nselect 1").kind.value
    'read'
    >>> classify_sql("\\\\i fix.sql").kind.value
    'unknown'
    """
    statements: list[str] = []
    for line_kind, text in _pieces(script):
        if line_kind == "meta":
            verdict = _meta(text)
            if verdict.kind is not SqlKind.READ:
                return verdict
        else:
            statements.extend(s for s in text.split(";") if s.strip())
    for statement in statements:
        words = [w.lower() for w in _WORD.findall(statement)]
        if not words:
            continue
        shown = " ".join(statement.split())[:200]
        if words[0] not in READING_STARTS:
            return SqlVerdict(SqlKind.WRITE, shown)
        if set(words) & (CHANGING_WORDS | CHANGING_FUNCTIONS):
            return SqlVerdict(SqlKind.WRITE, shown)
    return SqlVerdict(SqlKind.READ)


_WRITING_META = frozenset({"o", "out", "w", "write", "g", "gx", "s", "setenv"})
"""psql meta-commands that, given an argument, write a file or set the environment of the
programs psql starts (psql(1): \\o, \\w, \\g, \\s, \\setenv)."""


def _meta(command: str) -> SqlVerdict:
    """A psql backslash command."""
    name = re.match(r"\\([A-Za-z!]*)", command)
    word = name.group(1) if name else ""
    rest = command[len(word) + 1 :].strip()
    if word in _UNKNOWN_META or word.startswith("!") or "|" in command:
        return SqlVerdict(SqlKind.UNKNOWN, command.strip()[:200])
    if word == "copy" and re.search(r"\bprogram\b", command, re.IGNORECASE):
        return SqlVerdict(SqlKind.UNKNOWN, command.strip()[:200])  # runs a local program
    if word in _WRITING_META and rest:  # a file the policy does not follow (a config, maybe)
        return SqlVerdict(SqlKind.UNKNOWN, command.strip()[:200])
    if word == "copy" and re.search(r"\bfrom\b", command, re.IGNORECASE):
        return SqlVerdict(SqlKind.WRITE, command.strip()[:200])
    return SqlVerdict(SqlKind.READ)


def _pieces(script: str) -> list[tuple[str, str]]:
    """The script as ("sql", text with quotes and comments blanked) and ("meta", line) pieces.

    A backslash outside quotes starts a psql meta-command that runs to the end of its line.
    """
    pieces: list[tuple[str, str]] = []
    out: list[str] = []
    i, n = 0, len(script)
    while i < n:
        char = script[i]
        if char == "-" and script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end
        elif char == "/" and script.startswith("/*", i):
            i = _block_comment_end(script, i)
            out.append(" ")
        elif char == "'":
            escapes = i > 0 and script[i - 1] in "eE" and (i < 2 or not script[i - 2].isalnum())
            i = _quoted_end(script, i, "'", backslash=escapes)
            out.append(" '' ")
        elif char == '"':
            i = _quoted_end(script, i, '"', backslash=False)
            out.append(' "" ')
        elif char == "$" and (tag := _DOLLAR_TAG.match(script, i)) and not _in_word(out):
            end = script.find(tag.group(0), tag.end())
            i = n if end < 0 else end + len(tag.group(0))
            out.append(" '' ")
        elif char == "\\":
            end = script.find("\n", i)
            end = n if end < 0 else end
            pieces.append(("sql", "".join(out)))
            out = []
            pieces.append(("meta", script[i:end]))
            i = end
        else:
            out.append(char)
            i += 1
    pieces.append(("sql", "".join(out)))
    return pieces


def _in_word(out: list[str]) -> bool:
    """A ``$`` right after an identifier character is part of it (``a$b``), not a quote."""
    return bool(out) and bool(out[-1]) and (out[-1][-1].isalnum() or out[-1][-1] == "_")


def _quoted_end(script: str, start: int, quote: str, *, backslash: bool) -> int:
    i = start + 1
    while i < len(script):
        if backslash and script[i] == "\\":
            i += 2
            continue
        if script[i] == quote:
            if script.startswith(quote * 2, i):
                i += 2
                continue
            return i + 1
        i += 1
    return len(script)


def _block_comment_end(script: str, start: int) -> int:
    depth, i = 0, start
    while i < len(script):
        if script.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif script.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(script)
