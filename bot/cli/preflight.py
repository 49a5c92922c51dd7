"""The configuration files a step depends on, read before a service starts.

A wrong egress rules file, a secret it names that is not on this host, a malformed MCP
configuration or approval policy, a broken price table: each makes every step fail, not one.
``serve``, ``worker``, ``chat`` and ``gateway`` call ``problems`` first and stop with exit
code 2 naming each, as they do for an invalid setting, instead of starting and leaving every
thread silent. ``warroom doctor`` reports the same findings among its checks.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bot.settings import Settings

__all__ = ["ConfigProblem", "Role", "price_problems", "problems"]


@dataclass(frozen=True)
class ConfigProblem:
    """What is wrong (``detail``, one line) with the file a setting names (``variable``)."""

    variable: str
    detail: str

    def __str__(self) -> str:
        return f"{self.variable}: {self.detail}"


Role = Literal["steps", "bot", "gateway"]
"""What the process does: runs steps (``chat``, ``worker``, ``serve`` without
``REDIS_URL``), only the Slack app (``serve`` with ``REDIS_URL``: the secrets and MCP
servers live on the worker hosts), or the egress ``gateway``."""


def problems(settings: Settings, role: Role = "steps") -> list[ConfigProblem]:
    """Every problem of the files ``settings`` name that a process of ``role`` would meet
    at each step (or each request), in the order to fix them; empty when they all load.
    Blocking file I/O: call it at start-up.
    """
    return [found for check in _CHECKS[role] for found in check(settings)]


def _egress_rules(settings: Settings) -> list[ConfigProblem]:
    """The rules parse, every secret they name is on this host (all of them at once), and
    the upstream CA file loads."""
    from bot.egress import load_rules, upstream_trust
    from sandbox_client.gateway import MissingSecret, RulesError, prepare

    found: list[ConfigProblem] = []
    try:
        rules = load_rules(settings)
    except (OSError, UnicodeDecodeError, RulesError) as exc:
        return [ConfigProblem("WARROOM_EGRESS_RULES", _one_line(exc))]
    for rule in rules.rules if rules is not None else ():
        try:
            prepare([rule], dict(os.environ))
        except MissingSecret as exc:
            env = exc.where.removeprefix("env ")
            fix = "create it" if env == exc.where else f"set {env} in this host's environment"
            where = f"{settings.egress_rules}: {exc} ({fix})"
            found.append(ConfigProblem("WARROOM_EGRESS_RULES", where))
    if settings.egress_upstream_ca is not None:
        try:
            upstream_trust(settings.egress_upstream_ca)
        except (OSError, ssl.SSLError) as exc:
            detail = f"{settings.egress_upstream_ca}: not a PEM file of CA certificates ({exc})"
            found.append(ConfigProblem("WARROOM_EGRESS_UPSTREAM_CA", _one_line(detail)))
    return found


def _approval_policy(settings: Settings) -> list[ConfigProblem]:
    from bot.durable.wiring import approval_policies
    from harness import PolicyError

    if not settings.approvals or settings.approval_policy is None:
        return []
    try:
        approval_policies(settings)
    except (OSError, UnicodeDecodeError, PolicyError) as exc:
        return [ConfigProblem("WARROOM_APPROVAL_POLICY", _one_line(exc))]
    return []


def _mcp_config(settings: Settings) -> list[ConfigProblem]:
    from bot.mcp_servers import load_mcp_config
    from harness import McpConfigError

    try:
        load_mcp_config(settings)
    except (OSError, UnicodeDecodeError, McpConfigError) as exc:
        return [ConfigProblem("WARROOM_MCP_CONFIG", f"{settings.mcp_config}: {_one_line(exc)}")]
    return []


def alert_route_problems(settings: Settings) -> list[ConfigProblem]:
    """The alert routing rules load, and an alert has somewhere to go."""
    from bot.alerts.routes import RoutesError
    from bot.alerts.wiring import alerts_enabled, load_routes

    if not alerts_enabled(settings):
        return []
    try:
        routes = load_routes(settings)
    except (OSError, UnicodeDecodeError, RoutesError) as exc:
        return [ConfigProblem("WARROOM_ALERT_ROUTES", _one_line(exc))]
    if routes.default_channel is None:
        detail = (
            "alerts are on but no channel takes an alert no rule matches: set "
            "WARROOM_ALERT_CHANNEL or default_channel in the routes file"
        )
        return [ConfigProblem("WARROOM_ALERT_CHANNEL", detail)]
    return []


def price_problems(settings: Settings) -> list[ConfigProblem]:
    """The shipped price table loads, and a spending cap has a price to count with."""
    from harness import Usage, default_prices

    try:
        table = default_prices()
    except (OSError, ValueError) as exc:  # a broken install: every priced call would fail
        return [ConfigProblem("harness/cost/prices.toml", _one_line(exc))]
    if table.cost(settings.model, Usage(input_tokens=1)).priced:
        return []
    return [
        ConfigProblem(
            variable,
            f"a cap is set, but WARROOM_MODEL={settings.model} has no price in "
            "harness/cost/prices.toml, so no call would count toward it: add the model's "
            "price there, or unset the cap",
        )
        for variable, cap in (
            ("WARROOM_MAX_SESSION_COST_USD", settings.max_session_cost_usd),
            ("WARROOM_MAX_ORG_DAY_COST_USD", settings.max_org_day_cost_usd),
        )
        if cap is not None
    ]


_CHECKS: dict[Role, tuple[Callable[[Settings], list[ConfigProblem]], ...]] = {
    "steps": (_egress_rules, _approval_policy, _mcp_config, price_problems, alert_route_problems),
    "bot": (_approval_policy, alert_route_problems),
    "gateway": (_egress_rules,),
}


def _one_line(problem: object) -> str:
    """``problem``'s text on one line (a library's multi-line message joined)."""
    return " ".join(line.strip() for line in str(problem).splitlines() if line.strip())
