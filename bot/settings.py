"""Warroom's configuration: one ``Settings`` read once, from the environment and ``.env``.

Only this module reads the environment. Every name below is also an environment
variable (upper case). Secrets are ``SecretStr`` so they never print.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    DirectoryPath,
    Field,
    FilePath,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL = "claude-sonnet-5-5"
"""``harness.DEFAULT_MODEL``, spelled here so that reading the settings does not import the
harness (3 CPU-s: the container health check, ``warroom doctor --quick``, reads them every
30 s); a test keeps the two equal."""
DEFAULT_MAX_TOKENS = 32_000
"""``harness.DEFAULT_MAX_TOKENS``, for the same reason."""
DEFAULT_SMALL_MODEL = "claude-haiku-5-5"
"""``harness.DEFAULT_SMALL_MODEL``, for the same reason."""

REDIS_SCHEMES = ("redis", "rediss", "unix")
MIN_ALERT_TOKEN_CHARS = 16
"""Shortest ``WARROOM_ALERT_TOKEN``: the webhook's one secret must not be guessable."""


class MissingSetting(RuntimeError):
    """A required setting is absent; the message names the variable to set."""

    def __init__(self, variable: str, why: str) -> None:
        super().__init__(f"{variable} is not set: {why}. Set it in the environment or in .env.")
        self.variable = variable


class Settings(BaseSettings):
    """All settings, with their defaults.

    Slack: ``SLACK_BOT_TOKEN`` (xoxb-), ``SLACK_APP_TOKEN`` (xapp-, Socket Mode),
    ``SLACK_SIGNING_SECRET`` (HTTP mode). Anthropic: ``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_BASE_URL`` (a gateway), ``WARROOM_MODEL`` (``harness.DEFAULT_MODEL``),
    ``WARROOM_MAX_TOKENS`` (thinking plus output), ``WARROOM_MODEL_EFFORT`` (None: the
    model's default effort), ``WARROOM_SMALL_MODEL`` (``harness.DEFAULT_SMALL_MODEL``: reads
    WebFetch's pages). Storage: ``DATABASE_URL``
    (default: SQLite under ``WARROOM_DATA_DIR``), ``REDIS_URL`` (default: none → an
    in-process broker and worker). Sandboxes: ``WARROOM_WORKSPACE_SEED``, a directory
    whose files are placed at the same relative paths in ``/workspace`` of every new
    sandbox (and again in a replacement), e.g. runbooks' scripts or a service's configs.
    MCP: ``WARROOM_MCP_CONFIG``, a ``.mcp.json`` file in Claude Code's format (its servers
    run on the worker host, with the worker's environment for ``${VAR}``);
    ``WARROOM_MCP_TIMEOUT_S``, the time limit of one MCP tool call;
    ``WARROOM_MCP_TOOL_SEARCH`` (Claude Code's ``ENABLE_TOOL_SEARCH`` values): ``auto``
    defers MCP tool definitions behind ToolSearch when they would take over 10% of the
    model's context window, ``auto:N`` over N%, ``true`` always, ``false`` never.
    """

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_mode: Literal["socket", "http"] = Field(
        default="socket", validation_alias=AliasChoices("WARROOM_SLACK_MODE", "SLACK_MODE")
    )
    slack_http_port: int = Field(default=3000, ge=1, le=65535)
    slack_api_url: str = "https://slack.com/api/"

    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    model: str = Field(default=DEFAULT_MODEL, validation_alias="WARROOM_MODEL")
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1, validation_alias="WARROOM_MAX_TOKENS")
    small_model: str = Field(default=DEFAULT_SMALL_MODEL, validation_alias="WARROOM_SMALL_MODEL")
    model_effort: Literal["low", "medium", "high", "xhigh", "max"] | None = Field(
        default=None, validation_alias="WARROOM_MODEL_EFFORT"
    )

    database_url: str | None = None
    redis_url: str | None = None
    data_dir: Path = Field(default=Path("./data"), validation_alias="WARROOM_DATA_DIR")

    sandbox_provider: Literal["local", "blaxel"] = Field(
        default="local", validation_alias="WARROOM_SANDBOX_PROVIDER"
    )
    sandbox_network: Literal["none", "host"] = Field(
        default="none", validation_alias="WARROOM_SANDBOX_NETWORK"
    )
    sandbox_idle_suspend_s: float = Field(
        default=30.0, gt=0, validation_alias="WARROOM_SANDBOX_IDLE_S"
    )
    # per-sandbox limits (0: none) and jail lifecycle, see sandbox_client's JailLimits
    sandbox_memory_mb: int = Field(default=1024, ge=0, validation_alias="WARROOM_SANDBOX_MEMORY_MB")
    sandbox_pids_max: int = Field(default=256, ge=0, validation_alias="WARROOM_SANDBOX_PIDS_MAX")
    sandbox_cpus: float = Field(default=1.0, ge=0, validation_alias="WARROOM_SANDBOX_CPUS")
    sandbox_workspace_mb: int = Field(
        default=1024, ge=0, validation_alias="WARROOM_SANDBOX_WORKSPACE_MB"
    )
    sandbox_tmp_mb: int = Field(default=256, ge=0, validation_alias="WARROOM_SANDBOX_TMP_MB")
    sandbox_shm_mb: int = Field(default=64, ge=0, validation_alias="WARROOM_SANDBOX_SHM_MB")
    sandbox_idle_destroy_s: float = Field(
        default=900.0, gt=0, validation_alias="WARROOM_SANDBOX_IDLE_DESTROY_S"
    )
    # fresh local jails each worker process keeps ready for new sessions (0: none)
    sandbox_warm_pool: int = Field(
        default=2, ge=0, le=32, validation_alias="WARROOM_SANDBOX_WARM_POOL"
    )
    workspace_seed: DirectoryPath | None = Field(
        default=None, validation_alias="WARROOM_WORKSPACE_SEED"
    )
    shared_update_budget: bool = Field(default=True, validation_alias="WARROOM_SLACK_SHARED_BUDGET")
    egress_rules: FilePath | None = Field(default=None, validation_alias="WARROOM_EGRESS_RULES")
    egress_upstream_ca: FilePath | None = Field(
        default=None, validation_alias="WARROOM_EGRESS_UPSTREAM_CA"
    )
    gateway_url: str | None = Field(default=None, validation_alias="WARROOM_GATEWAY_URL")
    gateway_listen: str = Field(default="127.0.0.1:3128", validation_alias="WARROOM_GATEWAY_LISTEN")
    egress_port: int = Field(
        default=3128, ge=1024, le=65535, validation_alias="WARROOM_EGRESS_PORT"
    )
    bl_api_key: SecretStr | None = None
    bl_workspace: str | None = None

    max_steps: int = Field(default=200, ge=1, validation_alias="WARROOM_MAX_STEPS")
    # spending caps in USD (§14); None: no cap
    max_session_cost_usd: float | None = Field(
        default=None, gt=0, validation_alias="WARROOM_MAX_SESSION_COST_USD"
    )
    max_org_day_cost_usd: float | None = Field(
        default=None, gt=0, validation_alias="WARROOM_MAX_ORG_DAY_COST_USD"
    )
    # Slack's agent surface (issue #28): agent sessions and streamed steps, the default;
    # where the workspace refuses them, each process falls back once to the status
    # message; false: always the status message
    agent_surface: bool = Field(default=True, validation_alias="WARROOM_AGENT_SURFACE")
    # approvals (§13): the policy in force, how long a request waits, who may decide
    approvals: bool = Field(default=True, validation_alias="WARROOM_APPROVALS")
    approval_policy: Path | None = Field(default=None, validation_alias="WARROOM_APPROVAL_POLICY")
    approval_timeout_s: float = Field(
        default=1800.0, gt=0, validation_alias="WARROOM_APPROVAL_TIMEOUT_S"
    )
    approvers: str = Field(default="", validation_alias="WARROOM_APPROVERS")
    approval_not_requester: bool = Field(
        default=False, validation_alias="WARROOM_APPROVAL_NOT_REQUESTER"
    )
    skill_editors: str = Field(default="", validation_alias="WARROOM_SKILL_EDITORS")
    external_users_start: bool = Field(
        default=False, validation_alias="WARROOM_EXTERNAL_USERS_START"
    )
    agent_may_write_skills: bool = Field(
        default=False, validation_alias="WARROOM_AGENT_WRITES_SKILLS"
    )
    recall_private: Literal["channel", "org"] = Field(  # issue 29: who sees a private
        default="channel",
        validation_alias="WARROOM_RECALL_PRIVATE",  # channel's incidents
    )
    lease_s: float = Field(default=5.0, gt=0, validation_alias="WARROOM_LEASE_S")
    sweep_interval_s: float = Field(default=0.5, gt=0, validation_alias="WARROOM_SWEEP_INTERVAL_S")
    carry_on_s: float = Field(default=1.0, ge=0, validation_alias="WARROOM_CARRY_ON_S")
    stale_after_s: float = Field(default=30.0, gt=0, validation_alias="WARROOM_STALE_AFTER_S")
    # steps go where the sandbox is (issue #30): this worker host's identity (default: the
    # machine's host name; hosts sharing a machine need their own, and their own data dir)
    host_id: str = Field(
        default_factory=socket.gethostname,
        min_length=1,
        max_length=200,
        pattern=r"^\S+$",
        validation_alias="WARROOM_HOST_ID",
    )
    host_beat_s: float = Field(default=2.0, gt=0, validation_alias="WARROOM_HOST_BEAT_S")
    host_dead_after_s: float = Field(
        default=15.0, gt=0, validation_alias="WARROOM_HOST_DEAD_AFTER_S"
    )
    host_routing: bool = Field(default=True, validation_alias="WARROOM_HOST_ROUTING")
    background_poll_s: float = Field(
        default=0.5, gt=0, validation_alias="WARROOM_BACKGROUND_POLL_S"
    )
    monitor_batch_s: float = Field(default=3.0, gt=0, validation_alias="WARROOM_MONITOR_BATCH_S")
    min_wakeup_s: float = Field(  # at most the longest delay (harness MAX_DELAY_S)
        default=60.0, ge=0, le=3600, validation_alias="WARROOM_MIN_WAKEUP_S"
    )
    cron_seconds: bool = Field(  # test-only: CronCreate takes a 6th field, seconds (last)
        default=False, validation_alias="WARROOM_CRON_SECONDS"
    )
    max_crashes: int = Field(default=3, ge=1, validation_alias="WARROOM_MAX_CRASHES")
    wait_s: float = Field(default=7 * 24 * 3600.0, gt=0, validation_alias="WARROOM_WAIT_S")
    worker_threads: int = Field(default=8, ge=1, validation_alias="WARROOM_WORKER_THREADS")
    crash_at: str | None = Field(default=None, validation_alias="WARROOM_CRASH_AT")
    metrics_port: int | None = Field(
        default=None, ge=1, le=65535, validation_alias="WARROOM_METRICS_PORT"
    )
    mcp_config: FilePath | None = Field(default=None, validation_alias="WARROOM_MCP_CONFIG")
    mcp_timeout_s: float = Field(default=120.0, gt=0, validation_alias="WARROOM_MCP_TIMEOUT_S")
    mcp_tool_search: str = Field(
        default="auto",
        pattern=r"^(auto(:(100|[1-9]?[0-9]))?|true|false)$",
        validation_alias="WARROOM_MCP_TOOL_SEARCH",
    )

    # alerts (issue #27): POST /alerts/<source>; off unless a token or a secret is set
    alert_token: SecretStr | None = Field(default=None, validation_alias="WARROOM_ALERT_TOKEN")
    alert_pagerduty_secret: SecretStr | None = Field(
        default=None, validation_alias="WARROOM_ALERT_PAGERDUTY_SECRET"
    )
    alert_routes: FilePath | None = Field(default=None, validation_alias="WARROOM_ALERT_ROUTES")
    alert_channel: str | None = Field(
        default=None, pattern=r"^[CGD][A-Z0-9]{2,}$", validation_alias="WARROOM_ALERT_CHANNEL"
    )
    alert_summary_channel: str | None = Field(
        default=None,
        pattern=r"^[CGD][A-Z0-9]{2,}$",
        validation_alias="WARROOM_ALERT_SUMMARY_CHANNEL",
    )
    alert_max_open: int = Field(default=5, ge=0, validation_alias="WARROOM_ALERT_MAX_OPEN")
    alert_burst_window_s: float = Field(
        default=60.0, ge=0, validation_alias="WARROOM_ALERT_BURST_WINDOW_S"
    )
    alert_retry_window_s: float = Field(
        default=300.0, gt=0, validation_alias="WARROOM_ALERT_RETRY_WINDOW_S"
    )
    alert_port: int | None = Field(
        default=None, ge=0, le=65535, validation_alias="WARROOM_ALERT_PORT"
    )
    alert_host: str = Field(default="0.0.0.0", min_length=1, validation_alias="WARROOM_ALERT_HOST")

    # watched channels (issue #27): alerting apps' posts start sessions, no mention
    watch_channels: str = Field(
        default="",
        pattern=r"^\s*([CG][A-Z0-9]+\s*(,\s*[CG][A-Z0-9]+\s*)*)?$",
        validation_alias="WARROOM_WATCH_CHANNELS",
    )
    watch_senders: str = Field(
        default="",
        pattern=r"^\s*([AB][A-Z0-9]+\s*(,\s*[AB][A-Z0-9]+\s*)*)?$",
        validation_alias="WARROOM_WATCH_SENDERS",
    )

    @field_validator("alert_token")
    @classmethod
    def _alert_token(cls, value: SecretStr | None) -> SecretStr | None:
        """A bearer token long enough not to be guessed (every alert source holds it)."""
        if value is not None and len(value.get_secret_value().strip()) < MIN_ALERT_TOKEN_CHARS:
            raise ValueError(
                f"must be at least {MIN_ALERT_TOKEN_CHARS} characters, not blank "
                "(make one with: openssl rand -hex 32)"
            )
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        """A URL redis-py can use (``redis.connection.parse_url``); empty means unset."""
        if not value:
            return None
        if urlsplit(value).scheme not in REDIS_SCHEMES:
            raise ValueError("must start with redis://, rediss:// or unix:// (redis://host:6379/0)")
        from redis.connection import parse_url  # only for a URL given: not free to import

        parse_url(value)  # type: ignore[no-untyped-call]  # ValueError: a bad port, …
        return value

    @field_validator("approval_policy")
    @classmethod
    def _existing_policy(cls, value: Path | None) -> Path | None:
        """A file, or a directory of ``<org id>.toml`` files; it must exist."""
        if value is not None and not (value.is_file() or value.is_dir()):
            raise ValueError(f"{value} does not exist: give a policy file or a directory of them")
        return value

    @field_validator("data_dir")
    @classmethod
    def _not_a_file(cls, value: Path) -> Path:
        """The data directory may not exist yet, but it (or its nearest existing parent)
        must be a directory."""
        existing = next((p for p in (value, *value.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            raise ValueError(f"{existing} is not a directory")
        return value

    @field_validator("sandbox_memory_mb", "sandbox_pids_max")
    @classmethod
    def _sandbox_can_start(cls, value: int, info: ValidationInfo) -> int:
        """0 (no limit) or enough for a sandbox's own server to start."""
        least = {"sandbox_memory_mb": 16, "sandbox_pids_max": 8}[str(info.field_name)]
        if 0 < value < least:
            raise ValueError(f"must be 0 (no limit) or at least {least}")
        return value

    def require(self, name: str, why: str) -> str:
        """The value of a secret/optional setting, or MissingSetting naming its variable."""
        value = getattr(self, name)
        if value is None or value == "":
            raise MissingSetting(name.upper(), why)
        return value.get_secret_value() if isinstance(value, SecretStr) else str(value)


@dataclass(frozen=True)
class InvalidSetting:
    """A setting given a value ``Settings`` refuses: ``name`` the field, ``variable`` the
    environment variable, ``why`` the reason (with the fix when the rule knows it), and
    ``shown`` the value as given (None for a secret, or a value that is not text)."""

    name: str
    variable: str
    why: str
    shown: str | None = None

    def __str__(self) -> str:
        """``NAME=value: why`` (``NAME: why`` for a secret)."""
        shown = "" if self.shown is None else f"={self.shown}"
        return f"{self.variable}{shown}: {self.why}"


def invalid_settings(error: ValidationError) -> list[InvalidSetting]:
    """One ``InvalidSetting`` per invalid variable of ``error`` (raised by ``Settings()``);
    ``name`` is "" for an error no field owns."""
    fields = {v.upper(): n for n in Settings.model_fields for v in (*variables_of(n), n)}
    found = []
    for e in error.errors():
        variable = ".".join(str(p) for p in e["loc"]).upper()
        secret = variable.endswith(("_TOKEN", "_SECRET", "_KEY"))
        shown = None if secret or not isinstance(e["input"], str) else e["input"]
        why = e["msg"].removeprefix("Value error, ")
        found.append(InvalidSetting(fields.get(variable, ""), variable, why, shown))
    return found


def settings_despite_errors() -> tuple[Settings, list[InvalidSetting]]:
    """The settings with each invalid one at its default, and those that were invalid
    (``warroom doctor`` checks the rest and reports them, rather than stopping at them).

    Raises:
        ValidationError: an error no single setting owns (none today).
    """
    invalid: list[InvalidSetting] = []
    defaults: dict[str, Any] = {}
    while True:
        try:
            return Settings(**defaults), invalid
        except ValidationError as exc:
            found = [f for f in invalid_settings(exc) if f.name and f.name not in defaults]
            if not found:
                raise
            for setting in found:
                field = Settings.model_fields[setting.name]
                defaults[setting.name] = field.get_default(call_default_factory=True)
            invalid += found


def variables_of(name: str) -> tuple[str, ...]:
    """The environment variables a setting is read from, the preferred one first.

    >>> variables_of("lease_s"), variables_of("slack_mode"), variables_of("redis_url")
    (('WARROOM_LEASE_S',), ('WARROOM_SLACK_MODE', 'SLACK_MODE'), ('REDIS_URL',))
    """
    alias = Settings.model_fields[name].validation_alias
    if isinstance(alias, str):
        return (alias,)
    if isinstance(alias, AliasChoices):
        return tuple(str(choice) for choice in alias.choices)
    return (name.upper(),)


def child_environment(settings: Settings, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process that must run with exactly ``settings``
    (``warroom drill`` starts its workers so): this process's environment without any
    variable a setting is read from, then every setting that has a value, then ``extra``.

    Secrets are written in clear: the child needs them.
    """
    ours = {v.upper() for name in Settings.model_fields for v in variables_of(name)}
    env = {k: v for k, v in os.environ.items() if k.upper() not in ours}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if value is not None:
            env[variables_of(name)[0]] = _env_text(value)
    return env | dict(extra or {})


def _env_text(value: object) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
