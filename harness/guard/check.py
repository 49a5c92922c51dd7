"""The bash guard: refuse Bash commands that reach the virtual namespaces.

``/memory``, ``/skills`` and ``/incident`` live in Warroom's database and are served by
the Read/Write/Edit/Glob/Grep tools; they are not on the sandbox filesystem (each
sandbox holds only read-only stub directories there). Every Bash command the model
sends is parsed with tree-sitter-bash and walked as bash would run it (``bash_analysis``)
from working directory ``/workspace`` with ``HOME=/root``. A command that would read,
write, list, execute or ``cd`` into one of the three namespaces is refused with a
message naming the tool to use instead. docs/architecture.md §7 has the rationale.

What counts as a touch, and what does not:

- a path whose first component resolves to ``memory``, ``skills`` or ``incident``
  (whole component, case-sensitive) after quote removal, escapes, ``$'…'``, variables
  assigned earlier in the command (and ``read``, ``for``, ``set --``, functions),
  tilde, brace expansion, ``IFS`` splitting, ``cd``/``pushd``/``CDPATH`` tracking
  (subshells scoped), ``..``, ``//`` and ``/proc/self/root``; glob patterns that can
  match those names (``/mem?ry``, ``/[ms]kills``, ``/*/notes.md``), except a bare sweep
  of everything (``du -sh /*``, ``find /``, ``find / -name '[a-j]*'``: a ``find`` name
  or path test singles out a namespace only when it spells at least half of its name);
  a ``PATH`` entry searched for a program; lists, pipes and redirections grouped as
  bash groups them (``shape``: in ``cd / && echo hi > memory/x`` the redirection sees
  the ``cd``);
- a value naming a virtual path in the environment of a script, an interpreter or an
  unknown program, or in a variable the loader and common tools open (``environment``:
  ``CONFIG=/skills/x ./deploy.sh``, ``LD_PRELOAD=/memory/x.so ls``); names that
  ``xargs``, ``parallel``, ``tar -T``, ``rsync --files-from`` or ``cpio`` read from
  their input;
- through nested code: ``bash -c``, ``eval``, ``| sh``, ``bash <<EOF``, a script this
  same command wrote, wrappers (``sudo``, ``env``, ``timeout``, ``xargs``,
  ``find -exec``, ``watch`` …), literal paths and shell strings in interpreter code
  (``python -c``, ``perl -e``, heredocs fed to ``python3 -``), sed ``w``/``r``/``e``,
  awk file names (a string an awk/python/perl program only compares is a mention),
  psql ``\\i``; output the guard can compute (``echo``, ``printf``,
  ``base64 -d`` of a literal, ``rev``, ``tr``, ``dirname``) is followed into
  ``$(…)``, ``| xargs`` and ``| sh``;
- *not* a touch: mentions. Arguments a program treats as text or patterns (``echo``,
  ``grep``/``sed``/``awk``/``jq`` patterns, ``git commit -m``, ``curl -d`` bodies,
  heredoc text written to a workspace file), names on other systems (URLs, ``ssh host
  cmd``, ``kubectl exec … --``, container paths, AWS parameter names), and lookalikes
  (``/proc/meminfo``, ``/sys/fs/cgroup/memory``, ``./memory``, ``~/skills``,
  ``/memory-dumps``).

Policy for undecidable commands (the text alone cannot tell what they will touch):

- **refused**: running downloaded or decoded text as code: ``curl … | sh``,
  ``eval "$(curl …)"``, ``bash <(wget -O- …)``, ``base64 -d | bash``, a file this same
  command downloaded. The guard cannot see that code, and fetch-then-run is exactly how
  an injected instruction would hide a path. The refusal says to download to a file,
  read it, and run it in a later command.
- **allowed**: everything else it cannot see into: a local script (``bash ./x.sh``,
  ``make``), an environment variable it does not know (``cat "$LOG_FILE"``), a command
  substitution whose output it cannot compute. The sandbox's read-only stub directories
  make such a command fail loudly instead of reading stale data (defence in depth).
- **parse errors** fail closed only when the unparsed region mentions a namespace name
  or could build a path (a ``/`` followed by glob, brace, ``$`` or ``\\``); otherwise
  the parsed rest is checked as usual. A refusal costs little: the model is told to use
  Read/Write and to fix the quoting.
- **bounds**: commands longer than ``MAX_COMMAND_CHARS`` are refused (``too-long``);
  nesting deeper than ``walker.MAX_DEPTH`` is refused (``too-deep``).
- **giving up fails closed.** The analysis gives up when it runs out of budget
  (``budget.MAX_STEPS`` steps or ``budget.MAX_ANALYSIS_S`` seconds, parsing included),
  when a word has more values than it follows (``words.MAX_FIELDS`` fields,
  ``words.MAX_ALTERNATIVES`` alternatives), when Python's stack overflows on deep
  nesting, or when the analysis itself fails. A give-up that found no touch first is
  refused (``too-complex``) with a message asking for simpler commands, unless the
  command is *inert*: nothing in it can expand to a path into a namespace. A command
  is inert when all three hold:

  1. its text, with quotes removed, does not contain ``memory``, ``skills`` or
     ``incident`` in any letter case (so no literal or split-quoted name:
     ``"mem"'ory'``, ``MEMORY`` lowered by ``${x,,}``);
  2. it has none of the characters with which bash builds a word at run time: ``$``
     (parameters, ``$(…)``, ``$((…))``, ``$'…'``), a backquote, a backslash, glob
     characters ``*``, ``?``, ``[``, a brace ``{`` and a tilde ``~``;
  3. it names no program that turns data into paths or commands or rewrites text into
     new words (``INERT_BREAKERS``: shells, ``eval``, ``source``, ``xargs``,
     ``parallel``, interpreters, ``printf``, ``tr``, ``rev``, ``sed``, decoders …).

  So ``echo {1..300}; cat /mem*/x`` and 300 nested ``sudo env`` wrappers are refused,
  while 10,000 copies of ``kubectl get pods -n prod;`` are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.guard.analysis import analyse
from harness.guard.invocation import Access, Finding
from harness.guard.options import names
from harness.guard.paths import VIRTUAL_ROOTS
from harness.guard.techniques import Technique

MAX_COMMAND_CHARS = 65_536
"""Longest command the guard analyses (characters); longer ones are refused."""

INERT_BREAKERS = names(
    "sh bash dash zsh ksh mksh ash busybox eval source exec xargs parallel env sudo "
    "python python2 python3 perl ruby node nodejs php lua awk gawk mawk nawk jq yq "
    "printf tr rev sed cut paste tac fold column base64 base32 basenc xxd od uudecode "
    "openssl gzip gunzip zcat bzcat bzip2 xzcat xz zstd zstdcat tar cpio rsync"
)
"""Programs that can turn data into a path or a command; a command naming one is not
inert (see the policy above)."""

_RUN_TIME_CHARS = re.compile(r"[$`\\*?\[{~]")
_WORD = re.compile(r"[A-Za-z0-9_.+-]+")

_DEFAULT_TOOLS = "Read, Write, Edit, Glob and Grep"
_TOOL_FOR: dict[Access, tuple[str, str]] = {
    Access.READ: ("read", "Use the Read tool to read it"),
    Access.WRITE: ("write", "Use the Write tool to create or replace it, or Edit to change part"),
    Access.EDIT: ("edit", "Use the Edit tool to change it"),
    Access.LIST: ("list", "Use the Glob tool to list files there"),
    Access.SEARCH: ("search", "Use the Grep tool to search it"),
    Access.EXECUTE: ("run", "Use the Read tool to read it, then run its commands yourself"),
    Access.CHDIR: ("cd into", "Use the Glob tool to list it and the Read tool to open files"),
}
_VIRTUAL_NOTE = (
    "/memory, /skills, /incident and /incidents are virtual: they live in Warroom's database, "
    "not on the sandbox filesystem, so shell commands cannot reach them"
)
_PAST = "/incidents"
_PAST_TOOLS = "Read, Glob and Grep"
_PAST_WRITE = (
    "it is also read-only (the org's past incidents): write this incident's notes under "
    "/incident/ with the Write tool"
)


@dataclass(frozen=True)
class Allow:
    """The command may run in the sandbox."""


@dataclass(frozen=True)
class Deny:
    """The command must not run.

    Attributes:
        reason: text for the model: what the command would reach, that these paths are
            not on the sandbox filesystem, and which tool (Read/Write/Edit/Glob/Grep) to
            use instead.
        path: the virtual path found (``/memory/notes.md``), when known.
        technique: how the path was reached, or why the command was refused (``Technique``).
    """

    reason: str
    path: str | None
    technique: Technique


GuardDecision = Allow | Deny
"""What ``check_bash`` decides."""


def check_bash(command: str, *, cwd: str = "/workspace", home: str = "/root") -> Allow | Deny:
    """Decide whether Bash ``command`` may run in the sandbox.

    Args:
        command: the exact text of the Bash tool's ``command`` (newlines included).
        cwd: the working directory the command starts in (absolute).
        home: the value of ``HOME`` in the sandbox.

    Returns:
        ``Allow()``, or ``Deny`` with a reason for the model. Never raises.
    """
    if len(command) > MAX_COMMAND_CHARS:
        return _deny(Finding("too-long", detail=f"{len(command):,} characters"))
    try:
        finding = analyse(command, cwd=cwd, home=home)
    except RecursionError:
        finding = Finding("too-complex", detail="nests too deeply to follow")
    except Exception:  # a bug in the analysis must not crash the harness (see policy)
        finding = Finding("too-complex", detail="the guard could not analyse it")
    if finding is None or (finding.technique == "too-complex" and is_inert(command)):
        return Allow()
    return _deny(finding)


def is_inert(command: str) -> bool:
    """Tell whether nothing in ``command`` can expand to a path into a namespace.

    The three conditions are in this module's docstring (policy, "giving up").

    >>> is_inert("kubectl get pods -n prod; uptime")
    True
    >>> [is_inert(c) for c in ("cat /mem*/x", "cat '/mem'ory/x", "echo x | xargs cat")]
    [False, False, False]
    """
    unquoted = command.replace("'", "").replace('"', "").lower()
    if any(root in unquoted for root in VIRTUAL_ROOTS):
        return False
    if _RUN_TIME_CHARS.search(command):
        return False
    return not set(_WORD.findall(command)) & INERT_BREAKERS


def _deny(finding: Finding) -> Deny:
    return Deny(_reason(finding), finding.path, finding.technique)


def _reason(finding: Finding) -> str:
    if finding.path is not None:
        verb, advice = _TOOL_FOR.get(finding.access or Access.READ, _TOOL_FOR[Access.READ])
        if finding.path == _PAST or finding.path.startswith(_PAST + "/"):
            if finding.access in (Access.WRITE, Access.EDIT):
                advice = _PAST_WRITE
            return (
                f"Refused: this command would {verb} {finding.path}. {_VIRTUAL_NOTE}. "
                f"{advice}; only {_PAST_TOOLS} work on {_PAST}."
            )
        return (
            f"Refused: this command would {verb} {finding.path}. {_VIRTUAL_NOTE}. "
            f"{advice}; {_DEFAULT_TOOLS} all work on these paths."
        )
    technique = finding.technique
    if technique in ("download-exec", "decode-exec"):
        return (
            f"Refused: this command {finding.detail or 'runs fetched text as code'}, which the "
            "guard cannot check. Save it to a file in /workspace, read it, then run it in a "
            f"separate command. To use /memory, /skills or /incident, use {_DEFAULT_TOOLS}: "
            f"{_VIRTUAL_NOTE}."
        )
    if technique in ("too-complex", "too-deep"):
        return (
            f"Refused: this command is too complex for the guard to check ({finding.detail}), "
            "and part of it could expand to a path. Run a simpler command: split it into "
            "several shorter commands, with fewer nested wrappers, substitutions and "
            f"expansions. {_VIRTUAL_NOTE}; use {_DEFAULT_TOOLS} for them."
        )
    if technique == "too-long":
        return (
            f"Refused: this command is {finding.detail} long; the limit is "
            f"{MAX_COMMAND_CHARS:,}. Split it, or write long files with the Write tool."
        )
    return (
        f"Refused: the guard could not analyse this command safely ({technique}: "
        f"{finding.detail}). Simplify it (fix quoting, avoid deep nesting). {_VIRTUAL_NOTE}; "
        f"use {_DEFAULT_TOOLS} for them."
    )
