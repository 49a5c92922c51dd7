"""Alert routing rules: which channel a new alert's thread goes to (``WARROOM_ALERT_ROUTES``).

A YAML file, read and checked at start-up (``bot.cli.preflight``: a bad rule stops the
service with exit code 2 naming it)::

    default_channel: C0ALERTS          # where an alert no rule matches goes
    routes:
      - name: payments-critical        # first match wins
        channel: C0PAYMENTS
        match: {service: payments, severity: critical}
      - name: databases
        channel: C0DB
        match_re: {alertname: "Postgres.*|Redis.*"}
        sources: [alertmanager, grafana]

``match`` compares exactly, ``match_re`` with a full regular-expression match, each
against the alert's labels, plus ``service``, ``severity``, ``source`` and ``title``
(which override a label of the same name). A rule matches when all its conditions do.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.alerts.model import Alert

CHANNEL_ID = r"^[CGD][A-Z0-9]{2,}$"


class RoutesError(ValueError):
    """The routes file is wrong; ``problems`` name each rule and what is wrong with it."""

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: " + "; ".join(problems))
        self.problems = problems


class Route(BaseModel):
    """One rule: ``channel`` for alerts matching every condition."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=64)]
    channel: Annotated[str, Field(pattern=CHANNEL_ID)]
    match: dict[str, str] = Field(default_factory=dict)
    match_re: dict[str, str] = Field(default_factory=dict)
    sources: tuple[str, ...] = ()

    @field_validator("match_re")
    @classmethod
    def _compiles(cls, patterns: dict[str, str]) -> dict[str, str]:
        for name, pattern in patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"match_re.{name}: {pattern!r} is not a regular expression: {exc}"
                ) from exc
        return patterns

    def matches(self, alert: Alert) -> bool:
        """Whether every condition holds for ``alert``."""
        if self.sources and alert.source not in self.sources:
            return False
        seen = _attributes(alert)
        if any(seen.get(k) != v for k, v in self.match.items()):
            return False
        return all(re.fullmatch(p, seen.get(k, "")) for k, p in self.match_re.items())


class Routes(BaseModel):
    """The whole file: rules in order, and the default channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_channel: Annotated[str, Field(pattern=CHANNEL_ID)] | None = None
    routes: tuple[Route, ...] = ()

    @classmethod
    def parse(cls, text: str, *, source: str = "routes") -> Routes:
        """Parse and check the YAML ``text``.

        >>> Routes.parse("routes: [{name: db, channel: C0DB, match: {service: db}}]").routes[0].name
        'db'

        Raises:
            RoutesError: not YAML, or a rule is wrong (each problem names its rule).
        """
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise RoutesError(source, [f"not YAML: {' '.join(str(exc).split())}"]) from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise RoutesError(source, [_problem(data, e) for e in exc.errors()]) from exc

    @classmethod
    def load(cls, path: Path | None, *, default_channel: str | None = None) -> Routes:
        """The file at ``path`` (None: no rules); ``default_channel`` (a setting) is used
        when the file names none. Blocking I/O: call at start-up.

        Raises:
            RoutesError, OSError.
        """
        routes = (
            cls() if path is None else cls.parse(path.read_text(encoding="utf-8"), source=str(path))
        )
        if routes.default_channel is None and default_channel:
            return cls(default_channel=default_channel, routes=routes.routes)
        return routes

    def channel_for(self, alert: Alert) -> str | None:
        """The first matching rule's channel, else the default (None: nowhere to go)."""
        for route in self.routes:
            if route.matches(alert):
                return route.channel
        return self.default_channel


def _attributes(alert: Alert) -> dict[str, str]:
    seen = dict(alert.labels)
    for name, value in (
        ("service", alert.service),
        ("severity", alert.severity),
        ("source", alert.source),
        ("title", alert.title),
    ):
        if value:
            seen[name] = value
    return seen


def _problem(data: object, error: object) -> str:
    loc = tuple(error["loc"])  # type: ignore[index]
    where = "file"
    if len(loc) >= 2 and loc[0] == "routes" and isinstance(loc[1], int):
        rules = data.get("routes") if isinstance(data, dict) else None
        name = None
        if isinstance(rules, list) and loc[1] < len(rules) and isinstance(rules[loc[1]], dict):
            name = rules[loc[1]].get("name")
        where = f"rule {name!r}" if name else f"rule #{loc[1] + 1}"
        loc = loc[2:]
    field = ".".join(str(x) for x in loc)
    message = str(error["msg"]).removeprefix("Value error, ")  # type: ignore[index]
    return f"{where}: {field + ': ' if field else ''}{message}"
