"""The approval policy: is a tool call allowed, does it need a human's approval, or is it blocked?

(docs/architecture.md §13.) Three kinds of action are classified, each with a reason a person
and the model can read:

- **a Bash command**, from the guard's own walk (``harness.guard.calls.program_calls``): each
  program it would run, seen through ``bash -c``, ``eval``, ``sudo``, ``env``, ``xargs``,
  shell functions and variables, is matched against the rules (``Rule``); the most
  restrictive decision of any program decides the command. HTTP clients (``curl``, ``wget``,
  httpie) are read for their effective method (override headers and ``_method`` included)
  and URL (``http_calls``) and routed through the session's egress (``reach.Reach``): a
  changing request that some rule lets out needs approval, one that every rule refuses is
  blocked (nobody can approve what the gateway refuses). What the walk cannot see through
  (``unseen``: code an interpreter, a script or a build tool runs, a program of unknown
  origin, an alias, git's aliases and hooks, a walk that gave up) needs approval whenever
  the session can reach a change (``Reach.change``); with nothing changeable in reach it is
  allowed, so reading and computing stay free;
- **a gateway request** (method and the egress rule that matched): a method other than GET
  or HEAD to a credential rule needs approval;
- **an MCP tool**, from the org's MCP policy (``harness.mcp.policy``): ``allow`` is allowed,
  ``ask`` needs approval, ``deny`` is blocked.

The rules are data: ``default_policy.toml`` is shipped, and an organisation's file in the same
format (``WARROOM_APPROVAL_POLICY``) extends or tightens it. The format is in this package's
README: ``[program.NAME]`` tables say how a program reads its options, ``[[rule]]`` entries say
which calls need approval or are blocked. An org rule that matches a call decides over the
shipped ones, except that it cannot loosen a shipped ``blocked``; ``defaults = false`` in the
org file drops the shipped rules altogether.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cache
from importlib import resources
from typing import Any

from harness.approvals.http_clients import HttpCall, http_calls
from harness.approvals.reach import NoNetwork, Reach
from harness.approvals.sql import SqlKind, classify_sql
from harness.approvals.unseen import unseen, unseen_text
from harness.guard.calls import UNKNOWN, ProgramCall, ProgramCalls, program_calls
from harness.guard.options import Arg, parse_args, spec
from harness.mcp.policy import Approval

READ_ONLY_METHODS = frozenset({"GET", "HEAD"})
CHANGING_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_MAX_NAMES = 4096
"""Program names whose rules a policy remembers (then it starts again)."""


class Verdict(IntEnum):
    """What happens to an action; a larger value is more restrictive."""

    ALLOWED = 0
    APPROVAL = 1  # needs a human's approval in the thread first
    BLOCKED = 2

    @property
    def label(self) -> str:
        """``allowed``, ``approval`` or ``blocked`` (the policy file's words)."""
        return self.name.lower()


@dataclass(frozen=True)
class Decision:
    """The policy's answer for one action.

    Attributes:
        verdict: allowed, needs approval, or blocked.
        reason: why, in one line naming the part that decided (empty when allowed).
    """

    verdict: Verdict
    reason: str = ""


ALLOWED = Decision(Verdict.ALLOWED)


class PolicyError(ValueError):
    """An approval policy file is malformed (the message names the entry and the problem)."""


@dataclass(frozen=True)
class ProgramSpec:
    """How one program reads its options and SQL.

    Attributes:
        value_options: options that take a value, so the words after them are not operands.
        sql_options: options whose value is SQL (``psql -c``).
        sql_file_options: options naming an SQL file (its content is unknown to the policy).
        sql_stdin: the program reads SQL on standard input when no SQL option is given.
    """

    value_options: frozenset[str] = frozenset()
    sql_options: frozenset[str] = frozenset()
    sql_file_options: frozenset[str] = frozenset()
    sql_stdin: bool = False


@dataclass(frozen=True)
class Rule:
    """One rule: which program calls it matches, and its decision.

    Every condition given must hold. ``programs`` are ``fnmatch`` patterns of the base name.
    ``words`` are alternatives, each a sequence of word patterns that must start the
    call's operands (``rollout restart``; ``*`` is any one word). ``options``: any of these
    options is given. ``operands``: any operand matches one of these patterns. ``sql``: the
    call's SQL changes something or cannot be read. ``reach``: the rule applies only when
    the session can reach a change (``reach = "change"``: code the policy cannot read).

    A word the guard cannot know (an unset variable) matches any word pattern; an operand
    with unknown parts matches when the rest does (the unknown part may be empty, as in
    ``rm -rf $DIR/``).
    """

    programs: tuple[str, ...]
    decision: Verdict
    reason: str
    words: tuple[tuple[str, ...], ...] = ()
    options: frozenset[str] = frozenset()
    operands: tuple[str, ...] = ()
    sql: bool = False
    shipped: bool = True
    reach: bool = False

    def names(self, program: str) -> bool:
        """Whether the rule is about ``program`` ("" — unknown — only for rules with words)."""
        if not program:
            return bool(self.words)
        return _any_of(self.programs).fullmatch(program) is not None


@dataclass(frozen=True)
class Policy:
    """The rules in force, shipped and the org's.

    Attributes:
        programs: how each program reads its options (by base name).
        rules: shipped rules first, then the org's (``Rule.shipped`` tells them apart).
    """

    programs: Mapping[str, ProgramSpec] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    _naming: dict[str, tuple[Rule, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def bash(self, command: str, *, reach: Reach | None = None) -> Decision:
        """Classify a Bash ``command`` (the tool's exact ``command`` text).

        CPU-bound (the guard's walk): run it off the event loop.

        Args:
            command: the command as the model sent it.
            reach: what the session's sandbox can reach (``reach.EgressReach`` over the
                gateway's rules); None: nothing (``reach.NoNetwork``), so only the rules
                decide and requests are left to the gateway.
        """
        seen = program_calls(command)
        return self.calls(seen, command, reach=reach)

    def calls(self, seen: ProgramCalls, command: str, *, reach: Reach | None = None) -> Decision:
        """Classify the program calls ``seen`` of ``command`` (see ``bash``)."""
        reach = reach or NoNetwork()
        change = reach.change
        worst = ALLOWED
        for call in seen.calls:
            decision = self.call(call, change=change)
            decision = _worse(decision, _http_decision(call, reach))
            if change is not None and decision.verdict is Verdict.ALLOWED:
                why = unseen(call)
                if why is not None:
                    decision = _unseen(f"`{_shown(call)}` {why}", change)
            worst = _worse(worst, decision)
            if worst.verdict is Verdict.BLOCKED:
                return worst
        if change is not None and worst.verdict is Verdict.ALLOWED:
            if not seen.complete:
                return _unseen("the policy could not follow the whole command", change)
            why = unseen_text(command, seen.written)
            if why is not None:
                return _unseen(f"the command {why}", change)
        if not seen.complete and worst.verdict is Verdict.ALLOWED:
            named = self._named_programs(command)
            if named:
                return Decision(
                    Verdict.APPROVAL,
                    f"the policy could not follow the whole command, and it names {named}",
                )
        return worst

    def call(self, call: ProgramCall, *, change: str | None = None) -> Decision:
        """Classify one program call by the rules (``change``: why the session can reach a
        change, so ``reach = "change"`` rules apply; None: they do not)."""
        program = self.programs.get(call.name, ProgramSpec())
        parsed = parse_args(call.args, spec(*program.value_options))
        shipped = ALLOWED
        org: Decision | None = None
        naming = self._naming.get(call.name)
        if naming is None:  # the rules about a program, in order, found once per name
            if len(self._naming) >= _MAX_NAMES:
                self._naming.clear()
            naming = self._naming[call.name] = tuple(r for r in self.rules if r.names(call.name))
        for rule in naming:
            if rule.reach and change is None:
                continue
            match = _matches(rule, call, parsed, program)
            if match is _Match.NO:
                continue
            decision = Decision(rule.decision, f"`{_shown(call)}` {rule.reason}")
            if rule.reach:
                decision = _unseen(f"`{_shown(call)}` {rule.reason}", change or "")
            if match is _Match.UNSURE or not call.name:  # it may be; a human can tell
                decision = Decision(
                    min(rule.decision, Verdict.APPROVAL),
                    f"`{_shown(call)}` has parts only known when it runs; it may be a call "
                    f"that {rule.reason}",
                )
            if rule.shipped:
                shipped = _worse(shipped, decision)
            else:
                org = decision if org is None else _worse(org, decision)
        if org is None:
            return shipped
        return shipped if shipped.verdict is Verdict.BLOCKED else org

    def _named_programs(self, command: str) -> str:
        """The programs some rule asks approval for or blocks that ``command``'s text names."""
        words = set(re.findall(r"[A-Za-z0-9_.+-]+", command))
        named = sorted(
            {
                word
                for word in words
                for rule in self.rules
                if rule.decision is not Verdict.ALLOWED and rule.names(word)
            }
        )
        return ", ".join(named)


def request_decision(method: str, *, credential_rule: str | None) -> Decision:
    """Classify one gateway request: a changing method to a credential rule needs approval.

    >>> request_decision("POST", credential_rule="pagerduty").verdict.label
    'approval'
    >>> request_decision("GET", credential_rule="pagerduty").verdict.label
    'allowed'
    """
    if credential_rule is None or method.upper() in READ_ONLY_METHODS:
        return ALLOWED
    return Decision(
        Verdict.APPROVAL,
        f"a {method.upper()} request through the credential rule {credential_rule!r} changes "
        "what that service holds",
    )


def mcp_decision(approval: Approval, tool: str) -> Decision:
    """The approval policy's view of an MCP tool's org decision (``harness.mcp.policy``).

    >>> mcp_decision(Approval.ASK, "mcp__pd__resolve_incident").verdict.label
    'approval'
    """
    if approval is Approval.ALLOW:
        return ALLOWED
    if approval is Approval.DENY:
        return Decision(Verdict.BLOCKED, f"the organisation does not allow {tool}")
    return Decision(Verdict.APPROVAL, f"the organisation asks a human to approve {tool} calls")


# -- reading policy files ----------------------------------------------------------------------


@cache
def default_policy() -> Policy:
    """The shipped policy (``default_policy.toml``), read once."""
    text = resources.files("harness.approvals").joinpath("default_policy.toml").read_text("utf-8")
    return parse_policy(text, source="default_policy.toml")


def parse_policy(text: str, *, source: str = "policy", shipped: bool = True) -> Policy:
    """A ``Policy`` from TOML ``text`` in ``default_policy.toml``'s format.

    Raises:
        PolicyError: not TOML, or an entry with an unknown key, decision or shape.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{source}: not valid TOML: {exc}") from exc
    unknown = set(data) - {"program", "rule", "defaults"}
    if unknown:
        raise PolicyError(f"{source}: unknown top-level keys {sorted(unknown)}")
    programs = {
        name: _program(table, f"{source}: [program.{name}]")
        for name, table in _table(data.get("program", {}), f"{source}: program").items()
    }
    entries = data.get("rule", [])
    if not isinstance(entries, list):
        raise PolicyError(f"{source}: rule must be an array of tables ([[rule]])")
    rules = tuple(
        _rule(entry, f"{source}: rule {n}", shipped) for n, entry in enumerate(entries, start=1)
    )
    return Policy(programs, rules)


def with_org_policy(text: str, *, source: str, base: Policy | None = None) -> Policy:
    """``base`` (default: the shipped policy) extended by an org's policy file ``text``.

    The org's program tables replace the shipped ones of the same name; its rules are added
    (they decide where they match, but never loosen a shipped ``blocked``). ``defaults =
    false`` in the file drops the shipped rules.

    Raises:
        PolicyError: the file is malformed.
    """
    base = default_policy() if base is None else base
    org = parse_policy(text, source=source, shipped=False)
    keep = tomllib.loads(text).get("defaults", True)
    if not isinstance(keep, bool):
        raise PolicyError(f"{source}: defaults must be true or false")
    rules = (*(base.rules if keep else ()), *org.rules)
    return Policy({**base.programs, **org.programs}, rules)


_PROGRAM_KEYS = {"value_options", "sql_options", "sql_file_options", "sql_stdin"}
_RULE_KEYS = {"programs", "words", "options", "operands", "sql", "reach", "decision", "reason"}


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PolicyError(f"{where} must be a table")
    return value


def _program(table: Any, where: str) -> ProgramSpec:
    table = _table(table, where)
    unknown = set(table) - _PROGRAM_KEYS
    if unknown:
        raise PolicyError(f"{where}: unknown keys {sorted(unknown)}")
    sql_stdin = table.get("sql_stdin", False)
    if not isinstance(sql_stdin, bool):
        raise PolicyError(f"{where}: sql_stdin must be true or false")
    return ProgramSpec(
        value_options=frozenset(_words(table.get("value_options", ""), where)),
        sql_options=frozenset(_words(table.get("sql_options", ""), where)),
        sql_file_options=frozenset(_words(table.get("sql_file_options", ""), where)),
        sql_stdin=sql_stdin,
    )


def _rule(entry: Any, where: str, shipped: bool) -> Rule:
    entry = _table(entry, where)
    unknown = set(entry) - _RULE_KEYS
    if unknown:
        raise PolicyError(f"{where}: unknown keys {sorted(unknown)}")
    try:
        decision = Verdict[str(entry.get("decision", "")).upper()]
    except KeyError:
        raise PolicyError(f"{where}: decision must be allowed, approval or blocked") from None
    programs = entry.get("programs")
    if (
        not isinstance(programs, list)
        or not programs
        or not all(isinstance(p, str) and p for p in programs)
    ):
        raise PolicyError(f"{where}: programs must be a non-empty list of program names")
    reason = entry.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise PolicyError(f"{where}: reason must say why, in a few words")
    sql = entry.get("sql")
    if sql not in (None, "write"):
        raise PolicyError(f'{where}: sql may only be "write"')
    reach = entry.get("reach")
    if reach not in (None, "change"):
        raise PolicyError(f'{where}: reach may only be "change"')
    words_text = entry.get("words", "")
    if not isinstance(words_text, str):
        raise PolicyError(f'{where}: words must be a string of alternatives ("a b | c")')
    words = tuple(
        tuple(alternative.split()) for alternative in words_text.split("|") if alternative.strip()
    )
    return Rule(
        programs=tuple(programs),
        decision=decision,
        reason=" ".join(reason.split()),
        words=words,
        options=frozenset(_words(entry.get("options", ""), where)),
        operands=tuple(_words(entry.get("operands", ""), where)),
        sql=sql == "write",
        shipped=shipped,
        reach=reach == "change",
    )


def _words(value: Any, where: str) -> list[str]:
    if not isinstance(value, str):
        raise PolicyError(f"{where}: expected a string of space-separated words, got {value!r}")
    return value.split()


# -- matching ------------------------------------------------------------------------------------


class _Match(IntEnum):
    NO = 0
    UNSURE = 1  # only through a part the guard cannot know
    YES = 2


def _matches(rule: Rule, call: ProgramCall, parsed: Sequence[Arg], program: ProgramSpec) -> _Match:
    operands = [arg.value for arg in parsed if arg.option is None and arg.value is not None]
    found = _Match.YES
    if rule.words:
        found = min(found, max((_starts(p, operands) for p in rule.words), default=_Match.NO))
    if rule.options and not any(arg.option in rule.options for arg in parsed):
        if not any(a.startswith(UNKNOWN) for a in call.args):
            return _Match.NO
        found = min(found, _Match.UNSURE)  # a word only known when it runs may be one
    if rule.operands:
        found = min(found, max((_operand(o, rule.operands) for o in operands), default=_Match.NO))
    if found is not _Match.NO and rule.sql and not _sql_changes(call, parsed, program):
        return _Match.NO
    return found


@cache
def _any_of(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for ``fnmatch`` patterns (case-sensitive, as ``fnmatchcase``)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def _starts(pattern: Sequence[str], operands: Sequence[str]) -> _Match:
    if len(operands) < len(pattern):
        return _Match.NO
    found = _Match.YES
    for want, word in zip(pattern, operands, strict=False):
        if UNKNOWN in word:
            found = _Match.UNSURE
        elif not fnmatch.fnmatchcase(word, want):
            return _Match.NO
    return found


def _operand(operand: str, patterns: Iterable[str]) -> _Match:
    text = operand.replace(UNKNOWN, "")
    spellings = {text, _normal_path(text)}
    if not any(_path_pattern(p).fullmatch(t) for p in patterns for t in spellings):
        return _Match.NO
    return _Match.UNSURE if UNKNOWN in operand else _Match.YES


def _normal_path(text: str) -> str:
    """An absolute path without repeated slashes, ``.``, ``..`` or a trailing slash, so that
    ``/etc/``, ``//`` and ``/usr/../etc`` meet the patterns written for ``/etc`` and ``/``;
    any other word is returned as it is."""
    if not text.startswith("/"):
        return text
    return posixpath.normpath(re.sub("/+", "/", text))


@cache
def _path_pattern(pattern: str) -> re.Pattern[str]:
    """An operand pattern as a regex: ``*`` and ``?`` stay within one path component,
    ``**`` crosses them, ``[*]`` is a literal star (``rm -rf /*`` as typed)."""
    parts = re.split(r"(\[\*\]|\*\*|\*|\?)", pattern)
    table = {"[*]": re.escape("*"), "**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(table.get(part, re.escape(part)) for part in parts), re.DOTALL)


def _sql_changes(call: ProgramCall, parsed: Sequence[Arg], program: ProgramSpec) -> bool:
    """Whether the call's SQL changes something, or cannot be read (an SQL file, an unknown
    input, a value the guard cannot know)."""
    scripts = [a.value or "" for a in parsed if a.option in program.sql_options]
    if any(a.option in program.sql_file_options for a in parsed):
        return True
    if not scripts and program.sql_stdin:
        if call.stdin is None:
            return True
        scripts.append(call.stdin)
    for script in scripts:
        if UNKNOWN in script or classify_sql(script).kind is not SqlKind.READ:
            return True
    return False


def _http_decision(call: ProgramCall, reach: Reach) -> Decision:
    worst = ALLOWED
    for request in http_calls(call):
        worst = _worse(worst, _request(request, reach))
    return worst


def _request(request: HttpCall, reach: Reach) -> Decision:
    """A request's decision by its route: a change that leaves needs approval, one the
    gateway refuses is blocked; a read, or nothing to leave through, is allowed."""
    shown = f"`{request.method} {request.url}`"
    if request.method in READ_ONLY_METHODS:
        return ALLOWED
    if request.method == "?" or "…" in request.url:
        methods = CHANGING_METHODS if request.method == "?" else (request.method,)
        if "…" in request.url and reach.change is not None:
            return _unseen(f"{shown} goes to a URL only known when it runs", reach.change)
        routes = [reach.route(m, request.url) for m in methods]
        route = next((r for r in routes if r.passes), None)
        if route is None:
            return ALLOWED  # a read, or a change the gateway refuses
        return Decision(
            Verdict.APPROVAL,
            f"{shown} has a method only known when it runs; through {route.via} it may "
            "change what that service holds",
        )
    route = reach.route(request.method, request.url)
    if route.passes:
        return Decision(
            Verdict.APPROVAL, f"{shown} changes what that service holds (through {route.via})"
        )
    if route.refused:
        return Decision(
            Verdict.BLOCKED,
            f"{shown} would be refused by the egress gateway ({route.refused}), so nobody "
            "can approve it",
        )
    return ALLOWED


def _unseen(what: str, change: str) -> Decision:
    """Approval for what the policy cannot see through, while a change is in reach."""
    return Decision(
        Verdict.APPROVAL,
        f"{what}; the policy cannot tell what that does, and this session can reach a "
        f"change ({change})",
    )


def _worse(a: Decision, b: Decision) -> Decision:
    return b if b.verdict > a.verdict else a


def _shown(call: ProgramCall, max_chars: int = 160) -> str:
    """The call as a shell line (quoted where needed; ``…`` for what cannot be known)."""
    words = [call.path or call.name or "$…", *call.args]
    text = " ".join(_quoted(w.replace(UNKNOWN, "…")) for w in words).replace("\n", " ")
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _quoted(word: str) -> str:
    return word if re.fullmatch(r"[\w@%+=:,./…$-]+", word) else shlex.quote(word)
