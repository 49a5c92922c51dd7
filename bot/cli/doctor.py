"""``warroom doctor``: checks the configuration and every service, and says what to fix.

Each check is a small ``async`` function of ``Settings`` returning a ``CheckResult``
(ok, warning, problem or skipped, with a line of detail and, for a problem, what
to do). ``run_checks`` runs them in order, each bounded by ``timeout_s``:
settings, the data directory (writable), database (connect + Alembic head), Redis
(``PING``, when ``REDIS_URL``), the sandbox provider (provision one, run ``true``,
destroy it), its limits, the egress rules, Slack (``auth.test`` with the bot token;
whether the workspace takes Slack's agent sessions, unless ``WARROOM_AGENT_SURFACE=false``;
in Socket Mode a connection opened with the app token), Anthropic (``GET /v1/models/{id}``
of ``WARROOM_MODEL``, when a key is set) and the MCP servers (started and listed, with
``WARROOM_MCP_CONFIG``). A setting given a value ``Settings`` refuses does not stop
``doctor``: it is a problem of the ``settings`` line (saying what it takes), the checks
that read it say they were not run (``READS``), and the others run.
``quick`` runs only the data directory, database and Redis checks: cheap enough for
a container health check, and as true of a worker's container as of the bot's. So this
module imports at its top only what those need; the other checks import theirs (the
harness, the sandbox client, Slack, MCP) when they run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli.credentials import missing_for_serve
from bot.settings import InvalidSetting, MissingSetting, Settings
from memory_store import DatabaseUnavailable, probe_schema

if TYPE_CHECKING:
    import httpx

    from bot.errors import SlackCallFailed

__all__ = ["Check", "CheckResult", "Status", "failed", "render", "run_checks"]

ANTHROPIC_VERSION = "2023-06-01"  # Anthropic API reference: the ``anthropic-version`` header
CHECK_TIMEOUT_S = 30.0


class Status(StrEnum):
    """A check's verdict; only ``PROBLEM`` makes ``doctor`` exit non-zero."""

    OK = "ok"
    WARNING = "warning"
    PROBLEM = "problem"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """One check: ``detail`` says what was found, ``fix`` what to do about a problem."""

    name: str
    status: Status
    detail: str
    fix: str = ""


Check = Callable[[Settings], Awaitable[CheckResult]]


async def check_settings(settings: Settings) -> CheckResult:
    """The credentials ``serve`` needs are set and look like the right kind of token."""
    problems = [f"{m.variable} is not set" for m in missing_for_serve(settings)]
    problems += _token_shape(settings)
    if problems:
        return CheckResult(
            "settings",
            Status.PROBLEM,
            "; ".join(problems),
            "set them in the environment or in .env (README: 'Create the Slack app', "
            "'Configuration'); `warroom chat` needs only ANTHROPIC_API_KEY",
        )
    return CheckResult("settings", Status.OK, f"{settings.slack_mode} mode; credentials set")


async def check_data_dir(settings: Settings) -> CheckResult:
    """``WARROOM_DATA_DIR`` exists (it is created) and a file can be written in it."""
    where = settings.data_dir
    try:
        await asyncio.to_thread(_write_probe, where)
    except OSError as exc:
        detail = f"{where} is not writable: {exc.strerror or exc}"
        fix = "set WARROOM_DATA_DIR to a directory this user can write (SQLite, sandboxes, logs)"
        return CheckResult("data_dir", Status.PROBLEM, detail, fix)
    return CheckResult("data_dir", Status.OK, f"{where.resolve()} is writable")


def _write_probe(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".doctor-{uuid.uuid4().hex[:8]}"
    probe.write_bytes(b"")
    probe.unlink()


async def check_database(settings: Settings) -> CheckResult:
    """The database answers and its schema is at the newest migration.

    Read with the database's driver alone (``memory_store.probe_schema``): the health
    check imports neither SQLAlchemy nor Alembic."""
    try:
        probed = await probe_schema(settings.database_url, data_dir=settings.data_dir)
    except (ValueError, OSError) as exc:
        return CheckResult("database", Status.PROBLEM, str(exc), _DATABASE_FIX)
    except DatabaseUnavailable as exc:
        return CheckResult("database", Status.PROBLEM, f"cannot connect: {exc}", _DATABASE_FIX)
    version = probed.version
    where = f"{probed.backend} at {probed.where}"
    if not version.at_head:
        return CheckResult(
            "database",
            Status.WARNING,
            f"{where}: {_schema(version.current)}, newest is {version.head}",
            "run `warroom migrate` (serve and workers also migrate when they start)",
        )
    return CheckResult("database", Status.OK, f"{where}, schema at {version.head}")


async def check_redis(settings: Settings) -> CheckResult:
    """Redis answers ``PING`` (skipped without ``REDIS_URL``: the in-process broker)."""
    if not settings.redis_url:
        return CheckResult("redis", Status.SKIPPED, "REDIS_URL not set: in-process broker")
    import redis.asyncio as aioredis  # only with REDIS_URL: it is not free to import
    from redis.exceptions import RedisError

    try:
        client = aioredis.from_url(settings.redis_url, socket_connect_timeout=5.0)
    except ValueError as exc:
        return CheckResult("redis", Status.PROBLEM, f"REDIS_URL: {exc}", _REDIS_FIX)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        return CheckResult("redis", Status.PROBLEM, f"no answer to PING: {exc}", _REDIS_FIX)
    finally:
        await client.aclose()
    return CheckResult("redis", Status.OK, "PING answered")


async def check_sandbox(settings: Settings) -> CheckResult:
    """A sandbox can be provisioned, runs ``true``, and is destroyed."""
    from sandbox_client import SandboxError

    kind = settings.sandbox_provider
    if kind == "local" and shutil.which("bwrap") is None:
        return CheckResult(
            "sandbox",
            Status.PROBLEM,
            "local sandboxes need bubblewrap, which is not installed",
            "install it (Debian/Ubuntu: apt-get install bubblewrap) or set "
            "WARROOM_SANDBOX_PROVIDER=blaxel",
        )
    from sandbox_client.gateway import MissingSecret, RulesError

    try:
        exit_code = await _run_true(settings)
    except MissingSetting as exc:
        return CheckResult("sandbox", Status.PROBLEM, str(exc), f"set {exc.variable}")
    except (RulesError, MissingSecret) as exc:  # a jail gets the rules' trust and proxy
        detail = f"not tried: the egress rules do not load ({exc})".splitlines()[0]
        return CheckResult("sandbox", Status.PROBLEM, detail, "correct WARROOM_EGRESS_RULES")
    except (SandboxError, OSError) as exc:
        return CheckResult("sandbox", Status.PROBLEM, f"{kind}: {exc}", _SANDBOX_FIX[kind])
    if exit_code != 0:
        detail = f"{kind}: `true` exited with {exit_code}"
        return CheckResult("sandbox", Status.PROBLEM, detail, _SANDBOX_FIX[kind])
    return CheckResult("sandbox", Status.OK, f"{kind}: provisioned, ran `true`, destroyed")


async def check_sandbox_limits(settings: Settings) -> CheckResult:
    """Which sandbox limits this host can enforce (local sandboxes), and how."""
    from bot.durable.wiring import jail_limits
    from sandbox_client import LocalConfig, LocalProvider, SandboxError

    if settings.sandbox_provider != "local":
        return CheckResult("limits", Status.SKIPPED, "Blaxel sets its sandboxes' limits")
    try:
        limits = jail_limits(settings)
        provider = LocalProvider(LocalConfig(settings.data_dir / "sbx", limits=limits))
        found = await asyncio.to_thread(provider.enforcement)
    except (ValueError, SandboxError) as exc:
        return CheckResult("limits", Status.PROBLEM, str(exc), _LIMITS_FIX)
    mib = 1024 * 1024
    detail = (
        f"memory {limits.memory_max_bytes // mib} MiB ({found['memory']}), "
        f"processes {limits.pids_max} ({found['pids']}), cpu {limits.cpus:g} ({found['cpu']}), "
        f"/workspace {limits.workspace_max_bytes // mib} MiB, /tmp {limits.tmp_max_bytes // mib}"
        f" MiB, /dev/shm {limits.shm_max_bytes // mib} MiB ({found['workspace']})"
    )
    weak = [name for name in ("memory", "pids", "cpu") if not found[name].startswith("cgroup")]
    if weak:
        detail += f"; not enforced by a cgroup here: {', '.join(weak)}"
        return CheckResult("limits", Status.WARNING, detail, _LIMITS_FIX)
    return CheckResult("limits", Status.OK, detail)


_LIMITS_FIX = (
    "run where Warroom can create cgroups (cgroup v2 with the memory, pids and cpu "
    "controllers delegated, or writable v1 hierarchies); without them memory and processes "
    "fall back to per-process resource limits and cpu is not bounded"
)


async def check_slack(settings: Settings) -> CheckResult:
    """The bot token works (``auth.test``); skipped when it is not set."""
    from bot.durable.wiring import make_slack_client
    from bot.errors import SlackCallFailed, slack_call

    if settings.slack_bot_token is None:
        return CheckResult("slack", Status.SKIPPED, "SLACK_BOT_TOKEN not set")
    client = make_slack_client(settings)
    try:
        answer = await slack_call("auth.test", client.auth_test())
    except SlackCallFailed as exc:
        return CheckResult(
            "slack",
            Status.PROBLEM,
            f"auth.test failed: {_slack_failure(exc)}",
            "copy the Bot User OAuth Token (xoxb-…) from the app's 'Install App' page into "
            "SLACK_BOT_TOKEN, and check that this host reaches SLACK_API_URL",
        )
    team = f"{answer.get('team')} ({answer.get('enterprise_id') or answer.get('team_id')})"
    return CheckResult("slack", Status.OK, f"auth.test: {team}, bot user {answer.get('user_id')}")


async def check_agent_surface(settings: Settings) -> CheckResult:
    """Whether the workspace takes Slack's agent surface (on unless
    ``WARROOM_AGENT_SURFACE=false``): ``agents.sessions.setStatus`` asked with a status
    no session has, so nothing is created (``invalid_status`` or an argument error: the
    method is allowed); a refusal (``feature_disabled``, ``missing_scope``, …) is a
    warning, not a problem: each process falls back, once, to the status message."""
    from bot.durable.wiring import make_slack_client
    from bot.errors import SlackCallFailed, slack_call
    from bot.slack.agent_surface import REFUSALS

    if not settings.agent_surface:
        detail = "turned off (WARROOM_AGENT_SURFACE=false): progress is a status message"
        return CheckResult("agents", Status.SKIPPED, detail)
    if settings.slack_bot_token is None:
        return CheckResult("agents", Status.SKIPPED, "SLACK_BOT_TOKEN not set")
    client = make_slack_client(settings)
    probe = {"status": "doctor-probe"}  # not a status: Slack creates no session
    try:
        await slack_call(
            "agents.sessions.setStatus", client.api_call("agents.sessions.setStatus", json=probe)
        )
    except SlackCallFailed as exc:
        if exc.error in REFUSALS:
            detail = (
                f"this workspace refuses agents.sessions.setStatus ({exc.error}): "
                "sessions fall back to the status message"
            )
            fix = (
                "reinstall the app with the chat:write scope and turn on 'Agents & AI Apps' "
                "in its settings, or ask the org's admin to allow agent apps (or set "
                "WARROOM_AGENT_SURFACE=false to keep the status message without asking)"
            )
            return CheckResult("agents", Status.WARNING, detail, fix)
        if exc.error not in ("invalid_status", "channel_not_found", "thread_ts_required"):
            return CheckResult("agents", Status.WARNING, f"probe failed: {_slack_failure(exc)}")
    detail = "agent sessions and streamed steps (agent_session_stopped must be subscribed)"
    return CheckResult("agents", Status.OK, detail)


async def check_socket_mode(settings: Settings) -> CheckResult:
    """In Socket Mode, the app token opens a connection: ``apps.connections.open``, then
    the WebSocket until Slack's ``hello``; skipped in HTTP mode or without the token."""
    if settings.slack_mode != "socket" or settings.slack_app_token is None:
        return CheckResult("socket", Status.SKIPPED, "not in Socket Mode, or no SLACK_APP_TOKEN")
    import aiohttp
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.errors import SlackCallFailed
    from bot.slack.modes import AppTokenRefused, open_connection

    client = AsyncWebClient(base_url=settings.slack_api_url)
    try:
        url = await open_connection(client, settings.slack_app_token.get_secret_value())
        await _await_hello(url)
    except AppTokenRefused as exc:
        detail = f"apps.connections.open refused SLACK_APP_TOKEN: {exc.error}"
        return CheckResult("socket", Status.PROBLEM, detail, _APP_TOKEN_FIX)
    except SlackCallFailed as exc:
        detail = f"apps.connections.open failed: {_slack_failure(exc)}"
        return CheckResult("socket", Status.PROBLEM, detail, _SLACK_REACH_FIX)
    except (aiohttp.ClientError, ValueError) as exc:
        detail = f"the Socket Mode WebSocket did not open: {exc}"
        return CheckResult("socket", Status.PROBLEM, detail, _SLACK_REACH_FIX)
    return CheckResult("socket", Status.OK, "connection opened with SLACK_APP_TOKEN (hello)")


async def _await_hello(url: str) -> None:
    """Connect to a Socket Mode URL and read Slack's first message, ``hello``.

    Raises:
        aiohttp.ClientError: no connection; ValueError: the first message was not hello.
    """
    import aiohttp

    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        message = await ws.receive_json()
        if message.get("type") != "hello":
            raise ValueError(f"expected hello, got {message.get('type')!r}")


def _slack_failure(exc: SlackCallFailed) -> str:
    from bot.errors import SlackUnreachable

    if isinstance(exc, SlackUnreachable):
        return "Slack could not be reached"
    return exc.error


async def check_anthropic(settings: Settings) -> CheckResult:
    """The key works and the API serves ``WARROOM_MODEL`` (``GET /v1/models/{id}``, SDK
    ``ModelInfo``): a problem when the model is absent, deprecated or retired. Skipped
    without a key."""
    import httpx

    from harness import DEFAULT_BASE_URL

    if settings.anthropic_api_key is None:
        return CheckResult("anthropic", Status.SKIPPED, "ANTHROPIC_API_KEY not set")
    base = (settings.anthropic_base_url or DEFAULT_BASE_URL).rstrip("/")
    headers = {
        "x-api-key": settings.anthropic_api_key.get_secret_value(),
        "anthropic-version": ANTHROPIC_VERSION,
    }
    try:
        async with httpx.AsyncClient(timeout=15.0) as http:
            response = await http.get(f"{base}/v1/models/{settings.model}", headers=headers)
    except httpx.HTTPError as exc:
        detail = f"cannot reach {base}: {exc!r}"
        return CheckResult("anthropic", Status.PROBLEM, detail, _ANTHROPIC_FIX)
    if response.status_code == 404:
        detail = f"{base} does not serve WARROOM_MODEL={settings.model}"
        return CheckResult("anthropic", Status.PROBLEM, detail, _model_fix())
    if response.status_code != 200:
        return _anthropic_refusal(base, response)
    info = response.json()
    lifecycle = str(info.get("lifecycle") or "active")
    if lifecycle != "active":
        when = f", retires {info['retires_at']}" if info.get("retires_at") else ""
        detail = f"WARROOM_MODEL={settings.model} is {lifecycle}{when}"
        return CheckResult("anthropic", Status.PROBLEM, detail, _model_fix())
    return CheckResult("anthropic", Status.OK, f"{base}: WARROOM_MODEL={settings.model} is active")


def _model_fix() -> str:
    from harness import DEFAULT_MODEL, current_models

    current = ", ".join(current_models()[:3])
    return f"set WARROOM_MODEL to a current model, e.g. {DEFAULT_MODEL} (current: {current}, …)"


async def _run_true(settings: Settings) -> int | None:
    from bot.durable.wiring import make_provider

    provider = make_provider(settings)
    try:
        handle = await provider.provision(f"doctor-{uuid.uuid4().hex[:12]}")
        try:
            async with provider.connect(handle) as client:
                record = await client.exec("doctor-true", "true", timeout_s=30.0)
        finally:
            await provider.destroy(handle)
    finally:
        await provider.aclose()
    return record.exit_code


def _anthropic_refusal(base: str, response: httpx.Response) -> CheckResult:
    try:
        error = response.json().get("error", {})
        kind, message = error.get("type", "?"), error.get("message", "")
    except ValueError:
        kind, message = "?", response.text[:200]
    detail = f"{base}/v1/models answered {response.status_code} {kind}: {message}"
    fix = _ANTHROPIC_FIX
    if response.status_code in (401, 403):
        fix = "ANTHROPIC_API_KEY was refused: create a key at console.anthropic.com"
    return CheckResult("anthropic", Status.PROBLEM, detail, fix)


async def check_egress(settings: Settings) -> CheckResult:
    """The egress rules parse, every secret they name exists (never shown), no rule sends its
    secret over plain http (a warning), and the network policy is not the host's."""
    from bot.egress import describe_rule, load_rules
    from sandbox_client import landlock_abi
    from sandbox_client.gateway import MissingSecret, RulesError, prepare

    if settings.sandbox_network == "host":
        return CheckResult(
            "egress",
            Status.WARNING,
            "WARROOM_SANDBOX_NETWORK=host: sandboxes share this host's network and can reach "
            "the database, Redis and anything this host can",
            "set WARROOM_SANDBOX_NETWORK=none and give WARROOM_EGRESS_RULES instead",
        )
    try:
        rules = await asyncio.to_thread(load_rules, settings)
    except (OSError, RulesError) as exc:
        return CheckResult("egress", Status.PROBLEM, str(exc), "correct WARROOM_EGRESS_RULES")
    if rules is None:
        return CheckResult(
            "egress", Status.SKIPPED, "WARROOM_EGRESS_RULES not set: sandboxes reach nothing"
        )
    missing: list[MissingSecret] = []
    for rule in rules.rules:  # every missing secret at once, not one per run
        try:
            prepare([rule], dict(os.environ))
        except MissingSecret as exc:
            missing.append(exc)
    if missing:
        fix = "set on this host: " + ", ".join(m.where for m in missing)
        return CheckResult("egress", Status.PROBLEM, "; ".join(str(m) for m in missing), fix)
    described = "; ".join(describe_rule(r) for r in rules.rules)
    plaintext = [r.name for r in rules.rules if r.allow_plaintext]
    if plaintext:
        names = ", ".join(plaintext)
        detail = f"{names} send their secret over plain http (allow_plaintext); {described}"
        fix = f"serve {names} over https and drop allow_plaintext, unless the network is yours"
        return CheckResult("egress", Status.WARNING, detail, fix)
    if settings.sandbox_provider == "local" and landlock_abi() == 0:
        return CheckResult(
            "egress",
            Status.WARNING,
            f"{described}; this kernel has no Landlock, so a sandbox's commands are not "
            "isolated from each other: while an approved call runs, another process in its "
            "sandbox can read its proxy credential and make changes with it",
            "run workers on Linux ≥ 5.13 with Landlock enabled (lsm=…,landlock)",
        )
    return CheckResult("egress", Status.OK, described)


async def check_mcp(settings: Settings) -> CheckResult:
    """Every MCP server starts and lists its tools; a down one is named with its reason
    (a warning: the others serve on); skipped without ``WARROOM_MCP_CONFIG``."""
    from bot.cli.mcp import describe_states
    from bot.mcp_servers import open_mcp_servers
    from harness import McpConfigError, ServerState

    try:
        servers = await open_mcp_servers(settings, start_timeout_s=CHECK_TIMEOUT_S / 2)
    except (OSError, McpConfigError) as exc:
        return CheckResult("mcp", Status.PROBLEM, str(exc), "correct WARROOM_MCP_CONFIG")
    if servers is None:
        return CheckResult("mcp", Status.SKIPPED, "WARROOM_MCP_CONFIG not set: no MCP servers")
    try:
        detail = "; ".join(describe_states(servers))
        down = [n for n, (s, _) in servers.states().items() if s is not ServerState.UP]
        unknown = servers.unknown_in_policy()
    finally:
        await servers.aclose()
    if down:
        fix = f"check {', '.join(down)}: the command or URL, and the variables it needs"
        return CheckResult("mcp", Status.WARNING, detail, fix)
    if unknown:
        named = "; ".join(f"{s} has no {', '.join(map(repr, t))}" for s, t in unknown.items())
        detail += f"; warroom.tools names tools a server does not have ({named})"
        fix = "correct those names in WARROOM_MCP_CONFIG (`warroom mcp list` shows each tool)"
        return CheckResult("mcp", Status.WARNING, detail, fix)
    return CheckResult("mcp", Status.OK, detail)


async def check_approvals(settings: Settings) -> CheckResult:
    """The approval policy in force (§13): on or off, how many rules (shipped and the org's),
    who may approve and how long a request waits; a malformed org file is a problem."""
    from bot.durable.wiring import approval_policies
    from bot.slack.approvals import Approvers
    from harness import PolicyError

    if not settings.approvals:
        detail = "off (WARROOM_APPROVALS=false): changes run without asking anyone"
        return CheckResult("approvals", Status.WARNING, detail, "unset WARROOM_APPROVALS")
    try:
        policy, by_org = await asyncio.to_thread(approval_policies, settings)
    except (OSError, PolicyError) as exc:
        return CheckResult("approvals", Status.PROBLEM, str(exc), "correct WARROOM_APPROVAL_POLICY")
    shipped = sum(r.shipped for r in policy.rules)
    org = len(policy.rules) - shipped
    approvers = Approvers.parse(settings.approvers, not_requester=settings.approval_not_requester)
    who = (
        ", ".join(sorted(approvers.user_ids | approvers.group_ids))
        if approvers.user_ids or approvers.group_ids
        else "any member of the installing org"
    )
    if approvers.not_requester:
        who += ", never the session's requester"
    own = f"; own policies for {len(by_org)} orgs ({', '.join(sorted(by_org))})" if by_org else ""
    detail = (
        f"{shipped} shipped rules, {org} of the org's{own}; approvers: {who}; "
        f"unanswered requests expire after {settings.approval_timeout_s / 60:g} min"
    )
    return CheckResult("approvals", Status.OK, detail)


async def check_alerts(settings: Settings) -> CheckResult:
    """The alert webhook's routing (``WARROOM_ALERT_ROUTES``, ``WARROOM_ALERT_CHANNEL``):
    the rules load and an alert always has a channel; skipped when the webhook is off (no
    ``WARROOM_ALERT_TOKEN`` nor PagerDuty secret). The same check ``serve`` runs at start."""
    from bot.alerts.wiring import alerts_enabled, load_routes
    from bot.cli.preflight import alert_route_problems

    if not alerts_enabled(settings):
        return CheckResult("alerts", Status.SKIPPED, "the alert webhook is off (no token set)")
    problems = await asyncio.to_thread(alert_route_problems, settings)
    if problems:
        detail = "; ".join(f"{p.variable}: {p.detail}" for p in problems)
        return CheckResult("alerts", Status.PROBLEM, detail, "correct the routes file")
    routes = await asyncio.to_thread(load_routes, settings)
    count = len(routes.routes)
    detail = f"{count} routing rule{'s' if count != 1 else ''}; "
    return CheckResult("alerts", Status.OK, detail + f"default channel {routes.default_channel}")


async def check_prices(settings: Settings) -> CheckResult:
    """``WARROOM_MODEL`` has a price in the shipped table (else its calls count as $0: a
    spending cap is then a problem, since it could never be reached)."""
    from bot.cli.preflight import price_problems
    from harness import Usage, default_prices

    if found := price_problems(settings):
        return CheckResult(
            "prices",
            Status.PROBLEM,
            "; ".join(str(p) for p in found),
            "add the price, or unset the cap",
        )
    if not default_prices().cost(settings.model, Usage(input_tokens=1)).priced:
        detail = f"{settings.model} has no price in harness/cost/prices.toml: its calls count $0"
        return CheckResult("prices", Status.WARNING, detail, "add its price to prices.toml")
    return CheckResult("prices", Status.OK, f"{settings.model} is priced")


QUICK: tuple[Check, ...] = (check_data_dir, check_database, check_redis)
FULL: tuple[Check, ...] = (
    check_settings,
    *QUICK,
    check_sandbox,
    check_sandbox_limits,
    check_egress,
    check_approvals,
    check_prices,
    check_alerts,
    check_slack,
    check_agent_surface,
    check_socket_mode,
    check_anthropic,
    check_mcp,
)


READS: dict[str, tuple[str, ...]] = {
    "settings": ("slack_", "anthropic_api_key"),
    "data_dir": ("data_dir",),
    "database": ("database_url", "data_dir"),
    "redis": ("redis_url",),
    "sandbox": ("sandbox_", "data_dir", "egress_", "gateway_", "bl_", "workspace_seed"),
    "limits": ("sandbox_", "data_dir"),
    "egress": ("egress_", "sandbox_", "gateway_"),
    "approvals": ("approval", "approvers"),
    "prices": ("model", "max_session_cost_usd", "max_org_day_cost_usd"),
    "alerts": ("alert_",),
    "slack": ("slack_",),
    "agents": ("slack_", "agent_surface"),
    "socket": ("slack_",),
    "anthropic": ("anthropic_", "model"),
    "mcp": ("mcp_",),
}
"""The settings (``Settings`` field names, or their prefixes) each check reads: a check
that reads an invalid one is not run (it would check the default instead)."""


async def run_checks(
    settings: Settings,
    *,
    quick: bool = False,
    timeout_s: float = CHECK_TIMEOUT_S,
    invalid: Sequence[InvalidSetting] = (),
) -> list[CheckResult]:
    """Run every check (the quick ones with ``quick``) in order, each within ``timeout_s``.

    ``invalid``: the settings given values ``Settings`` refuses (``settings`` holds their
    defaults): the ``settings`` line is a problem naming each (first, with ``quick``), and a
    check that reads one says it was not run."""
    checks = QUICK if quick else FULL
    results = [_invalid_result(invalid)] if quick and invalid else []
    for check in checks:
        name = _name(check)
        if name == "settings" and invalid:
            results.append(_invalid_result(invalid, await _bounded(check, settings, timeout_s)))
        elif read := [s.variable for s in invalid if _reads(name, s.name)]:
            detail = f"not checked: {', '.join(read)} is invalid (see settings)"
            results.append(CheckResult(name, Status.SKIPPED, detail))
        else:
            results.append(await _bounded(check, settings, timeout_s))
    return results


def _name(check: Check) -> str:
    """The name a check's line carries (``check_sandbox_limits`` → ``limits``)."""
    name = check.__name__.removeprefix("check_")
    return _LINE_NAMES.get(name, name)


_LINE_NAMES = {"sandbox_limits": "limits", "agent_surface": "agents", "socket_mode": "socket"}


def _reads(check: str, setting: str) -> bool:
    return any(setting.startswith(prefix) for prefix in READS.get(check, ()))


def _invalid_result(
    invalid: Sequence[InvalidSetting], found: CheckResult | None = None
) -> CheckResult:
    """The ``settings`` line when some are invalid: each, with what ``check_settings``
    ``found`` wrong besides."""
    problems = [f"invalid: {s}" for s in invalid]
    if found is not None and found.status is Status.PROBLEM:
        problems.append(found.detail)
    names = ", ".join(s.variable for s in invalid)
    fix = f"correct {names} in the environment or in .env (each line says what it takes)"
    if found is not None and found.fix:
        fix += f"; {found.fix}"
    return CheckResult("settings", Status.PROBLEM, "; ".join(problems), fix)


def failed(results: Sequence[CheckResult]) -> bool:
    """True when a check found a problem."""
    return any(r.status is Status.PROBLEM for r in results)


def render(results: Sequence[CheckResult]) -> str:
    """One line per check (``status  name  detail``), a ``fix:`` line under each problem."""
    lines = []
    for r in results:
        lines.append(f"{r.status.value:<8} {r.name:<10} {r.detail}")
        if r.fix and r.status in (Status.PROBLEM, Status.WARNING):
            lines.append(f"{'':<8} {'':<10} fix: {r.fix}")
    return "\n".join(lines)


async def _bounded(check: Check, settings: Settings, timeout_s: float) -> CheckResult:
    name = _name(check)
    try:
        async with asyncio.timeout(timeout_s):
            return await check(settings)
    except TimeoutError:
        detail = f"no answer within {timeout_s:g} s"
        return CheckResult(
            name, Status.PROBLEM, detail, "check that the service is up and reachable"
        )
    except Exception as exc:  # a check that breaks is a problem line, never a traceback
        detail = f"the check could not run: {type(exc).__name__}: {exc}".splitlines()[0]
        return CheckResult(name, Status.PROBLEM, detail, "correct what it names, then re-run")


def _schema(current: str | None) -> str:
    return f"schema at {current}" if current else "no schema yet (empty database)"


def _token_shape(settings: Settings) -> list[str]:
    shapes = (("slack_bot_token", "xoxb-"), ("slack_app_token", "xapp-"))
    problems = []
    for name, prefix in shapes:
        value = getattr(settings, name)
        if value is not None and not value.get_secret_value().startswith(prefix):
            problems.append(f"{name.upper()} should start with {prefix}")
    return problems


_DATABASE_FIX = (
    "check DATABASE_URL (postgresql://user:pass@host:5432/db, or unset for SQLite under "
    "WARROOM_DATA_DIR) and that the server is up"
)
_REDIS_FIX = (
    "start Redis or correct REDIS_URL (redis://host:6379/0); unset it to run "
    "bot and worker in one process"
)
_SANDBOX_FIX = {
    "local": "check that bubblewrap can create namespaces here (containers need "
    "--security-opt seccomp=unconfined --security-opt systempaths=unconfined, or "
    "--privileged) and that WARROOM_DATA_DIR is writable",
    "blaxel": "check BL_API_KEY and BL_WORKSPACE, and that this host reaches api.blaxel.ai",
}
_APP_TOKEN_FIX = (
    "copy an app-level token (xapp-…, scope connections:write) from the app's 'Basic "
    "Information' page into SLACK_APP_TOKEN, and enable Socket Mode for the app"
)
_SLACK_REACH_FIX = "check that this host reaches SLACK_API_URL (and wss-primary.slack.com)"
_ANTHROPIC_FIX = "check ANTHROPIC_BASE_URL and that this host reaches it"
