"""Egress rules: which requests a sandbox may make, and what the gateway injects (§11).

Rules are data, in a YAML file named by a setting. A request is matched against them in order;
the first rule whose host, port, path prefix, method and channel all match decides it:

- a rule with ``inject`` is a *credential rule*: the gateway terminates TLS, adds the secret,
  and scrubs it from the response; it matches ``https://`` requests only (the secret goes over
  a verified TLS connection), unless it says ``allow_plaintext: true``;
- a rule without ``inject`` is an *allow rule*: the request passes untouched (HTTPS tunnels);
- no rule matches: the request is *blocked* with a 403 naming the host.

Secrets are given by reference (``env: NAME`` or ``file: PATH`` on the gateway's host), never
inline, so the rules file can be committed and shown by ``doctor``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from sandbox_client.gateway.paths import AmbiguousPath, normalise

READ_ONLY_METHODS = ("GET", "HEAD")


class Outcome(StrEnum):
    """What the gateway did with one request."""

    INJECTED = "injected"
    ALLOWED = "allowed"
    BLOCKED = "blocked"


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
"""The methods a rule may allow (RFC 9110 and RFC 5789; CONNECT is the tunnel itself)."""


class SecretRef(BaseModel):
    """Where a secret lives on the gateway's host: exactly one of ``env`` and ``file``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    env: str | None = None
    file: str | None = None

    @field_validator("file")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("a secret file must be an absolute path")
        return value

    @model_validator(mode="before")
    @classmethod
    def _by_reference(cls, value: Any) -> Any:
        if isinstance(value, str | int | float):
            raise ValueError(
                "a secret is given by reference, {env: NAME} or {file: /path}, never its value"
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> SecretRef:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of env: or file:")
        return self

    def describe(self) -> str:
        """Where the secret comes from, without its value: ``env PROM_TOKEN``."""
        return f"env {self.env}" if self.env is not None else f"file {self.file}"


class Bearer(BaseModel):
    """``Authorization: Bearer <secret>``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["bearer"]
    token: SecretRef


class Basic(BaseModel):
    """``Authorization: Basic base64(username:password)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["basic"]
    username: str
    password: SecretRef


class Header(BaseModel):
    """A header of the rule's choosing set to the secret (``X-API-Key: <secret>``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["header"]
    name: str = Field(pattern=r"^[A-Za-z0-9-]{1,64}$")
    value: SecretRef


class Query(BaseModel):
    """A query parameter set to the secret (``?api_key=<secret>``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["query"]
    name: str = Field(min_length=1, max_length=64)
    value: SecretRef


Injection = Annotated[Bearer | Basic | Header | Query, Field(discriminator="type")]


class Rule(BaseModel):
    """One egress rule.

    ``hosts`` are exact names or ``*.suffix`` patterns (case-insensitive); ``ports`` default to
    80 and 443; ``paths`` are path prefixes (default: every path); ``methods`` default to
    read-only ``GET``/``HEAD``; ``channels`` are Slack channel ids allowed to use the rule
    (default: every channel). ``base_url`` and ``description`` are what the model is told.
    ``tunnel: true`` (allow rules only) passes HTTPS through untouched: the gateway then sees
    only the host and port, so methods and paths cannot be checked; by default the gateway
    terminates TLS for every rule so that they are. ``allow_plaintext: true`` (credential rules
    only) lets the rule match ``http://`` requests too, sending its secret unencrypted to a
    server nobody verified: by default a credential rule matches ``https://`` only.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    hosts: tuple[str, ...] = Field(min_length=1)
    ports: tuple[int, ...] = (80, 443)
    paths: tuple[str, ...] = ("/",)
    methods: tuple[str, ...] = READ_ONLY_METHODS
    channels: tuple[str, ...] = ()
    inject: Injection | None = None
    tunnel: bool = False
    allow_plaintext: bool = False
    description: str = ""
    base_url: str | None = None

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for host in value:
            bare = host.removeprefix("*.")
            if not bare or "*" in bare or "/" in bare or ":" in bare:
                raise ValueError(f"{host!r}: a host is a name or *.suffix, without port or path")
        return tuple(h.lower() for h in value)

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(not 0 < p < 65536 for p in value):
            raise ValueError("ports are 1 to 65535")
        return value

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not p.startswith("/") for p in value):
            raise ValueError("a path prefix starts with /")
        try:  # requests are matched in their normal form: so are prefixes
            return tuple(normalise(p) for p in value)
        except AmbiguousPath as exc:
            raise ValueError(f"path prefix {exc.path!r}: {exc.reason}") from None

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        upper = tuple(m.upper() for m in value)
        unknown = [m for m in upper if m not in HTTP_METHODS]
        if unknown:
            known = ", ".join(HTTP_METHODS)
            raise ValueError(f"unknown HTTP method {', '.join(unknown)} (methods are {known})")
        return upper

    @model_validator(mode="after")
    def _tunnel_without_secret(self) -> Rule:
        if self.tunnel and self.inject is not None:
            raise ValueError("a credential rule cannot tunnel: the gateway must see the request")
        return self

    @model_validator(mode="after")
    def _plaintext_with_secret(self) -> Rule:
        if self.allow_plaintext and self.inject is None:
            raise ValueError(
                "allow_plaintext is for credential rules (an allow rule passes http:// already)"
            )
        return self

    def matches_scheme(self, scheme: str) -> bool:
        """Whether this rule covers a request over ``scheme`` (``http`` or ``https``): a
        credential goes over ``http`` only where the rule says ``allow_plaintext``."""
        return scheme == "https" or self.inject is None or self.allow_plaintext

    def matches_host(self, host: str, port: int) -> bool:
        """Whether this rule covers ``host:port`` (before the request line is known)."""
        host = host.lower().rstrip(".")
        return port in self.ports and any(_host_match(p, host) for p in self.hosts)

    def matches(self, request: RequestLine) -> bool:
        """Whether this rule covers the whole request."""
        return (
            self.matches_host(request.host, request.port)
            and self.matches_scheme(request.scheme)
            and request.method in self.methods
            and any(request.path.startswith(p) for p in self.paths)
            and (not self.channels or request.channel_id in self.channels)
        )


def _host_match(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and fnmatch.fnmatchcase(host, pattern)
    return host == pattern


@dataclass(frozen=True)
class RequestLine:
    """What a rule is matched against: one request from one session's sandbox."""

    method: str
    host: str
    port: int
    path: str  # without the query, normalised (``paths.normalise``)
    channel_id: str | None
    scheme: str = "http"  # how the request reached the gateway: http, or https (CONNECT)


@dataclass(frozen=True)
class Decision:
    """The outcome for one request, and the rule that decided it (None when blocked)."""

    outcome: Outcome
    rule: Rule | None
    reason: str


def decide_override(rules: Rules, line: RequestLine, verb: str, effective: str) -> Decision:
    """The decision on a request whose verb ``verb`` may ask for ``effective`` by a method
    override (``methods.effective_method``): a server may act on either, so a rule must
    allow both. ``line.method`` is the method judged for approval (``methods.judged_method``).
    """
    if verb == effective:
        return rules.decide(line)
    decisions = [rules.decide(replace(line, method=m)) for m in (effective, verb)]
    blocked = next((d for d in decisions if d.outcome is Outcome.BLOCKED), None)
    if blocked is None:
        return decisions[0]
    override = f"a {verb} asking for {effective} by a method override: both must be allowed"
    why = f"{blocked.reason} ({override})"
    return Decision(Outcome.BLOCKED, blocked.rule, why)


class RulesError(ValueError):
    """The rules file is not valid; ``problems`` are ``line N: where: what`` strings."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        super().__init__(f"{source}: " + "; ".join(problems))
        self.source = source
        self.problems = tuple(problems)


class RulesFile(BaseModel):
    """The whole file: ``rules: [ … ]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class Rules:
    """The rules in force, in file order."""

    rules: tuple[Rule, ...] = ()

    @classmethod
    def parse(cls, text: str, *, source: str = "rules") -> Rules:
        """Parse and validate a rules file.

        Raises:
            RulesError: YAML that does not parse, or rules that do not validate; each problem
                names its line.
        """
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise RulesError(source, [_yaml_problem(exc)]) from exc
        try:
            parsed = RulesFile.model_validate(data)
        except ValidationError as exc:
            lines = _lines_of(text)
            problems = [
                f"line {_line(lines, e['loc'])}: {_loc(e['loc']) or 'file'}: {e['msg']}"
                for e in exc.errors()
            ]
            raise RulesError(source, problems) from exc
        names = [r.name for r in parsed.rules]
        if len(set(names)) != len(names):
            raise RulesError(source, ["rule names must be unique"])
        return cls(parsed.rules)

    def decide(self, request: RequestLine) -> Decision:
        """The first matching rule's outcome, or blocked."""
        for rule in self.rules:
            if rule.matches(request):
                outcome = Outcome.INJECTED if rule.inject is not None else Outcome.ALLOWED
                return Decision(outcome, rule, f"rule {rule.name}")
        return Decision(Outcome.BLOCKED, None, _why_blocked(self.rules, request))

    def for_host(self, host: str, port: int) -> tuple[Rule, ...]:
        """The rules that could apply to a tunnel to ``host:port``."""
        return tuple(r for r in self.rules if r.matches_host(host, port))


def _why_blocked(rules: Sequence[Rule], request: RequestLine) -> str:
    hosted = [r for r in rules if r.matches_host(request.host, request.port)]
    if not hosted:
        return f"no rule allows {request.host}:{request.port}"
    secured = [r for r in hosted if not r.matches_scheme(request.scheme)]
    hosted = [r for r in hosted if r.matches_scheme(request.scheme)]
    if secured and not hosted:
        names = ", ".join(r.name for r in secured)
        return (
            f"the credential rule {names} sends its secret over https only: "
            f"use https://{request.host}:{request.port}{request.path}"
        )
    if not any(request.method in r.methods for r in hosted):
        allowed = sorted({m for r in hosted for m in r.methods})
        return f"{request.method} is not allowed to {request.host} (only {', '.join(allowed)})"
    return f"no rule allows {request.method} {request.path} on {request.host} from this channel"


def _line(lines: dict[str, int], loc: tuple[int | str, ...]) -> int | str:
    """The line of the longest prefix of ``loc`` that the file has (tags are not in it)."""
    for end in range(len(loc), -1, -1):
        if (line := lines.get(_loc(loc[:end]))) is not None:
            return line
    return "?"


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _lines_of(text: str) -> dict[str, int]:
    """Map each dotted location (``rules.0.hosts``) to its 1-based line in ``text``."""
    found: dict[str, int] = {}
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return found

    def walk(node: yaml.Node, path: str) -> None:
        found.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                child = f"{path}.{key.value}" if path else str(key.value)
                found.setdefault(child, key.start_mark.line + 1)
                walk(value, child)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, f"{path}.{index}" if path else str(index))

    if root is not None:
        walk(root, "")
    return found


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a YAML syntax error: where (line and column, 1-based) and what
    PyYAML found, without its multi-line excerpt of the file."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
        where = f"character {exc.position + 1}: "
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
    problem = " ".join(str(problem).split())
    context = getattr(exc, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return f"{where}not valid YAML: {detail}"
