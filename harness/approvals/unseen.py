"""What the approval policy cannot see through in a command (docs/architecture.md §13).

The guard's walk shows every program a command runs, but some programs run more than the
walk can show: a script file, code whose text is only known when it runs, an alias, a
program copied to ``/tmp``, git's aliases and hooks, a program told by its environment to
load or run something else. ``unseen`` names such a call, ``unseen_text`` such a command
(a configuration file that makes a later command run or send something else); the policy
asks approval for them whenever the session can reach a change (``reach.Reach.change``).
The programs that always run code the policy cannot read (interpreters, build tools,
remote shells) are data: rules with ``reach = "change"`` in ``default_policy.toml``.

>>> from harness.guard.calls import ProgramCall
>>> unseen(ProgramCall("k", ("delete", "pod", "x"), "", path="/tmp/k"))
'runs /tmp/k, a program of unknown origin'
>>> unseen(ProgramCall("git", ("-c", "alias.x=!sh", "x"), "")) is not None
True
>>> unseen(ProgramCall("git", ("log", "-5"), "")) is None
True
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence

from harness.guard.calls import UNKNOWN, ProgramCall
from harness.guard.options import names

HOMES = frozenset({".", "/workspace", "/root", "~"})
"""The sandbox's home and working directory, as a walk spells them (its ``HOME`` is
``/workspace``; the walk assumes ``/root``)."""
PLACEHOLDER = "{}"
"""What ``find -exec`` and ``xargs -I{}`` replace with their input (the walk keeps it as typed)."""
SYSTEM_DIRS = ("/usr/local/sbin/", "/usr/local/bin/", "/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/")
"""Where the sandbox's programs live (the jail's ``PATH``; read-only binds of the host)."""

LOADING_VARIABLES = names(
    """PATH BASH_ENV ENV SHELLOPTS BASHOPTS PROMPT_COMMAND LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT
    GCONV_PATH PYTHONPATH PYTHONSTARTUP PYTHONHOME PYTHONUSERBASE PYTHONINSPECT NODE_OPTIONS
    NODE_PATH PERL5OPT PERL5LIB PERLLIB RUBYOPT RUBYLIB HOME XDG_CONFIG_HOME CURL_HOME WGETRC
    PAGER GIT_PAGER EDITOR VISUAL LESSOPEN LESSCLOSE SHELL BROWSER SSH_ASKPASS KUBECONFIG
    DOCKER_HOST DOCKER_CONFIG NPM_CONFIG_USERCONFIG PIP_CONFIG_FILE"""
)
"""Variables that make a program load or run something other than what the command shows
(bash(1), ld.so(8), python(1), node(1), perlrun(1), ruby(1), git(1), curl(1), wget(1),
less(1)); so do those starting with ``_LOADING_PREFIXES``."""
_LOADING_PREFIXES = ("GIT_", "BASH_FUNC_")
"""git(1) ENVIRONMENT VARIABLES; the functions bash imports from its environment."""

GIT_READS = names(
    """log show diff status blame grep ls-files ls-tree rev-parse rev-list describe cat-file
    shortlog reflog whatchanged name-rev for-each-ref show-ref merge-base cherry range-diff
    version count-objects verify-commit verify-tag check-ignore check-attr var format-patch"""
)
"""git subcommands that read and run no hook (githooks(5)); ``git config`` only reading."""
_GIT_RUNS = ("--upload-pack", "--receive-pack", "--exec", "-O", "--open-files-in-pager", "--output")
"""Options with which a reading git subcommand runs a program (git-grep(1), git-fetch(1)) or
writes a file the policy does not follow (git-diff(1) ``--output``)."""

_GIT_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--list", "-l", "get"})
_GIT_CONFIG_OPTIONS = frozenset({"-c", "--config-env", "--exec-path"})
_GIT_VALUE_OPTIONS = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "ash", "mksh", "rbash", "fish", "yash"})
_AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_AWK_RUNS = re.compile(r"system|(?<![|])[|](?![|])|@load|ENVIRON|\bprintf?\b[^;{}]*>")
"""An awk program that starts a command (``system``, a pipe), loads an extension, or
writes a file (``print > f``: a configuration for later commands, perhaps)."""

CONFIG_TEXT = re.compile(
    r"curlrc|wgetrc|gitconfig|\.git/(config|hooks|info)|\.git\b.*\bhooks\b|hooksPath|"
    r"\.gitattributes|customize\.py|site-packages|\.pth\b|\.npmrc|\.yarnrc|\.bashrc|"
    r"\.bash_profile|\.profile\b|\.kube\b|\.aws\b|\.azure\b|\.config/|/httpie|\.netrc|"
    r"\.ssh\b|pip\.conf|\.pypirc|\.gemrc|psqlrc|my\.cnf|mylogin\.cnf|sqliterc|lesskey|"
    r"terraformrc|\.terraform\b|\.local/|\.docker\b|\.krew\b|command_not_found_handle|"
    r"/dev/(tcp|udp)/|\bBASH_(CMDS|ALIASES)\b"
)
"""Names, in a command's text or among the paths it writes, of files that make a later
command run or send something else (an HTTP client's defaults, git's aliases, hooks and
filters, Python's start-up code, a kubeconfig's exec plugin, an AWS ``credential_process``,
``~/.psqlrc``'s ``\\!``, ssh's ProxyCommand, Terraform's providers, Helm's, Docker's and
krew's plugins under ``~/.local``, ``~/.docker``, ``~/.krew``), bash's hook for unknown
commands and its tables of what a name runs (``BASH_CMDS``, ``BASH_ALIASES``), and bash's raw
network redirections."""


def unseen(call: ProgramCall) -> str | None:
    """Why ``call`` may do more than the policy sees, or None (see the module docstring)."""
    if not call.name or PLACEHOLDER in call.name:
        return "runs a program whose name is only known when it runs"
    if call.path and not posixpath.normpath(call.path).startswith(SYSTEM_DIRS):
        return f"runs {call.path}, a program of unknown origin"
    if call.name in call.environment:
        return (
            f"runs {call.name}, a shell function exported to it, which the policy does not follow"
        )
    loading = sorted(
        n for n in call.environment if n in LOADING_VARIABLES or n.startswith(_LOADING_PREFIXES)
    )
    if loading:
        return f"is given {', '.join(loading)}, which change what it loads or runs"
    check = _BY_PROGRAM.get(call.name)
    return check(call) if check is not None else None


def unseen_text(command: str, written: Sequence[str] = ()) -> str | None:
    """Why ``command`` (its text, and the paths ``written`` that its walk saw written) may
    set up what a later command runs or sends, or None. Writing into the home directory
    itself (``cp -r x/. ~``) puts there files the policy cannot name."""
    found = CONFIG_TEXT.search(command) or CONFIG_TEXT.search("\n".join(written))
    if found is not None:
        return f"names {found.group(0)}, which can make later commands run or send something else"
    home = next((p for p in written if posixpath.normpath(p or ".") in HOMES), None)
    if home is not None:
        return f"writes into {home}, the home directory, files that later commands may load"
    return None


def _shell(call: ProgramCall) -> str | None:
    args, index = list(call.args), 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if arg in ("-", "+") or not arg.startswith(("-", "+")):
            break
        if arg in ("--rcfile", "--init-file"):
            return f"changes what the shell runs ({arg})"
        if arg[0] == "-" and not arg.startswith("--") and "c" in arg:
            return _unknown_code(args[index + 1] if index + 1 < len(args) else "")
        index += 2 if arg in ("-o", "+o", "-O", "+O") else 1
    rest = args[index:]
    if rest and rest[0] != "-":
        return f"runs the script {rest[0]}, which the policy cannot read"
    if call.stdin is None or UNKNOWN in call.stdin:
        return "runs shell code read from an input the policy cannot read"
    return None


def _unknown_code(code: str) -> str | None:
    """Code with unknown parts, none, or ``find``/``xargs``'s placeholder for its input."""
    if UNKNOWN in code or PLACEHOLDER in code or not code.strip():
        return "runs shell code only known when it runs"
    return None


def _eval(call: ProgramCall) -> str | None:
    return _unknown_code(" ".join(call.args))


def _source(call: ProgramCall) -> str | None:
    script = next((a for a in call.args if a != "--"), "")
    return f"runs the script {script or '(none)'}, which the policy cannot read"


def _enable(call: ProgramCall) -> str | None:
    if any(arg.startswith("-") and "f" in arg for arg in call.args):
        return "loads a builtin from a shared object the policy cannot read"
    return None


def _hash(call: ProgramCall) -> str | None:
    if any(arg.startswith("-") and "p" in arg for arg in call.args):
        return "binds a command name to a program the policy cannot see"
    return None


def _declare(call: ProgramCall) -> str | None:
    if any(arg.startswith("-") and "f" in arg for arg in call.args):
        return (
            "exports a shell function to the programs it starts, which the policy does not follow"
        )
    return None


def _alias(call: ProgramCall) -> str | None:
    if any("=" in arg for arg in call.args):
        return "defines an alias, which the policy does not expand"
    return None


def _awk(call: ProgramCall) -> str | None:
    args = list(call.args)
    index = 0
    while index < len(args) and args[index].startswith("-") and args[index] != "--":
        option = args[index]
        if option in ("-f", "--file", "-i", "--include", "-l", "--load") or option.startswith(
            ("-f", "--file=", "-i", "--include=", "-l", "--load=", "-E", "--exec")
        ):
            return f"runs an awk program ({option}) the policy cannot read"
        index += 2 if option in ("-v", "-F", "--assign", "--field-separator") else 1
    index += index < len(args) and args[index] == "--"
    program = args[index] if index < len(args) else ""
    if UNKNOWN in program or _AWK_RUNS.search(program):
        return "runs an awk program that can start commands or write files (system, pipes, >)"
    return None


def _git(call: ProgramCall) -> str | None:
    args = list(call.args)
    index = 0
    while index < len(args) and args[index].startswith("-"):
        option = args[index].split("=", 1)[0]
        if option in _GIT_CONFIG_OPTIONS:
            return f"sets git configuration ({option}) that can run commands (aliases, hooks)"
        index += 2 if option in _GIT_VALUE_OPTIONS and "=" not in args[index] else 1
    if index >= len(args):
        return None
    subcommand, rest = args[index], args[index + 1 :]
    if subcommand == "config":
        if any(a in _GIT_CONFIG_READS for a in rest) or len(_operands(rest)) <= 1:
            return None
        return "sets git configuration that can run commands later (aliases, hooks)"
    if subcommand in GIT_READS:
        runs = next((a for a in rest if a.startswith(_GIT_RUNS)), None)
        return None if runs is None else f"runs a program or writes a file ({runs})"
    if subcommand == "push":  # the shipped rules ask for it; its hooks are part of it
        return None
    return f"may run a git alias or hook ({subcommand}) the policy cannot read"


def _operands(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


_BY_PROGRAM: dict[str, Callable[[ProgramCall], str | None]] = {
    **{name: _shell for name in _SHELLS},
    **{name: _awk for name in _AWKS},
    "eval": _eval,
    "source": _source,
    ".": _source,
    "alias": _alias,
    "enable": _enable,
    "hash": _hash,
    **{name: _declare for name in ("export", "declare", "typeset", "readonly")},
    "git": _git,
}
