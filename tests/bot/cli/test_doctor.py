"""``warroom doctor``: each check finds what is wrong with real services and says what to fix."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli.app import app
from bot.cli.doctor import (
    CheckResult,
    Status,
    check_agent_surface,
    check_anthropic,
    check_approvals,
    check_database,
    check_redis,
    check_sandbox,
    check_sandbox_limits,
    check_settings,
    check_slack,
    failed,
    render,
    run_checks,
)
from bot.fakes.anthropic_api import FakeAnthropicAPI
from bot.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlackApi
from bot.settings import Settings
from memory_store import Database
from sandbox_client import LocalConfig, LocalProvider
from tests.bot.cli_support import start, warroom_env
from tests.conftest import require_bwrap

CLOSED_PORT_URL = "127.0.0.1:9"  # discard port: nothing listens here


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A short data directory (sandbox sockets live under it: paths < 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="wr-doc-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def settings(data_dir: Path, **values: Any) -> Settings:
    """Settings from ``values`` only (no environment defaults for what matters here)."""
    base: dict[str, Any] = {
        "slack_bot_token": None,
        "slack_app_token": None,
        "slack_signing_secret": None,
        "anthropic_api_key": None,
        "anthropic_base_url": None,
        "database_url": None,
        "redis_url": None,
        "sandbox_provider": "local",
        "data_dir": data_dir,
    }
    return Settings(_env_file=None, **{**base, **values})  # type: ignore[call-arg]


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlackApi]:
    fake = FakeSlackApi()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def migrated(data_dir: Path) -> None:
    db = Database.from_url(None, data_dir=data_dir)
    try:
        await db.migrate()
    finally:
        await db.dispose()


# ----- settings ----------------------------------------------------------------------------


async def test_settings_check_names_every_missing_credential(data_dir: Path) -> None:
    result = await check_settings(settings(data_dir, slack_bot_token="xoxb-1"))

    assert result.status is Status.PROBLEM
    assert result.detail == "SLACK_APP_TOKEN is not set; ANTHROPIC_API_KEY is not set"
    assert "warroom chat" in result.fix


async def test_settings_check_with_blaxel_still_names_the_missing_slack_and_anthropic_keys(
    data_dir: Path,
) -> None:
    result = await check_settings(settings(data_dir, sandbox_provider="blaxel"))

    assert result.status is Status.PROBLEM
    for variable in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "ANTHROPIC_API_KEY", "BL_API_KEY"):
        assert f"{variable} is not set" in result.detail


async def test_settings_check_catches_tokens_swapped_between_variables(data_dir: Path) -> None:
    result = await check_settings(
        settings(
            data_dir, slack_bot_token="xapp-1", slack_app_token="xoxb-1", anthropic_api_key="k"
        )
    )

    assert result.status is Status.PROBLEM
    assert "SLACK_BOT_TOKEN should start with xoxb-" in result.detail
    assert "SLACK_APP_TOKEN should start with xapp-" in result.detail


async def test_settings_check_passes_http_mode_with_a_signing_secret(data_dir: Path) -> None:
    result = await check_settings(
        settings(
            data_dir,
            slack_mode="http",
            slack_bot_token="xoxb-1",
            slack_signing_secret="s",
            anthropic_api_key="k",
        )
    )

    assert result == CheckResult("settings", Status.OK, "http mode; credentials set")


# ----- database ----------------------------------------------------------------------------


async def test_database_check_warns_until_the_schema_is_migrated(data_dir: Path) -> None:
    before = await check_database(settings(data_dir))
    await migrated(data_dir)
    after = await check_database(settings(data_dir))

    assert before.status is Status.WARNING
    assert "no schema yet (empty database)" in before.detail
    assert "warroom migrate" in before.fix
    assert after.status is Status.OK
    assert after.detail.startswith("sqlite at ")


async def test_database_check_reports_an_unreachable_server(data_dir: Path) -> None:
    url = f"postgresql://postgres@{CLOSED_PORT_URL}/warroom"

    result = await check_database(settings(data_dir, database_url=url))

    assert result.status is Status.PROBLEM
    assert result.detail.startswith("cannot connect")
    assert "DATABASE_URL" in result.fix


@pytest.mark.postgres
async def test_database_check_sees_postgres_at_head_after_migrating(
    data_dir: Path, postgres_url: str
) -> None:
    db = Database.from_url(postgres_url, data_dir=data_dir)
    try:
        await db.migrate()
    finally:
        await db.dispose()

    result = await check_database(settings(data_dir, database_url=postgres_url))

    assert result.status is Status.OK
    assert result.detail.startswith("postgresql at ")
    assert "***" in result.detail or "@" in result.detail


# ----- redis -------------------------------------------------------------------------------


async def test_redis_check_is_skipped_without_redis_url(data_dir: Path) -> None:
    assert (await check_redis(settings(data_dir))).status is Status.SKIPPED


@pytest.mark.redis
async def test_redis_check_pings_the_server(data_dir: Path, redis_url: str) -> None:
    assert (await check_redis(settings(data_dir, redis_url=redis_url))).status is Status.OK


async def test_redis_check_reports_a_server_that_does_not_answer(data_dir: Path) -> None:
    result = await check_redis(settings(data_dir, redis_url=f"redis://{CLOSED_PORT_URL}/0"))

    assert result.status is Status.PROBLEM
    assert "REDIS_URL" in result.fix


# ----- sandbox -----------------------------------------------------------------------------


async def test_sandbox_check_provisions_runs_true_and_destroys(data_dir: Path) -> None:
    require_bwrap()

    result = await check_sandbox(settings(data_dir))

    assert result == CheckResult("sandbox", Status.OK, "local: provisioned, ran `true`, destroyed")
    assert [p.name for p in (data_dir / "sbx").iterdir() if "doctor" in p.name] == []


async def test_sandbox_check_says_to_install_bubblewrap_when_it_is_missing(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(data_dir))  # a PATH without bwrap

    result = await check_sandbox(settings(data_dir))

    assert result.status is Status.PROBLEM
    assert "apt-get install bubblewrap" in result.fix


async def test_sandbox_check_names_missing_blaxel_credentials(data_dir: Path) -> None:
    result = await check_sandbox(settings(data_dir, sandbox_provider="blaxel", bl_api_key=None))

    assert result.status is Status.PROBLEM
    assert result.fix == "set BL_API_KEY"


# ----- slack -------------------------------------------------------------------------------


async def test_slack_check_runs_auth_test_with_the_bot_token(
    data_dir: Path, slack: FakeSlackApi
) -> None:
    config = settings(data_dir, slack_bot_token=slack.token, slack_api_url=slack.base_url)

    result = await check_slack(config)

    assert result.status is Status.OK
    assert TEAM_ID in result.detail
    assert BOT_USER_ID in result.detail


async def test_slack_check_reports_a_refused_token(data_dir: Path, slack: FakeSlackApi) -> None:
    config = settings(data_dir, slack_bot_token="xoxb-revoked", slack_api_url=slack.base_url)

    result = await check_slack(config)

    assert result.status is Status.PROBLEM
    assert result.detail == "auth.test failed: invalid_auth"
    assert "Bot User OAuth Token" in result.fix


async def test_slack_check_is_skipped_without_a_bot_token(data_dir: Path) -> None:
    assert (await check_slack(settings(data_dir))).status is Status.SKIPPED


async def test_agents_check_says_the_workspace_takes_the_agent_surface_creating_nothing(
    data_dir: Path, slack: FakeSlackApi
) -> None:
    config = settings(data_dir, slack_bot_token=slack.token, slack_api_url=slack.base_url)

    result = await check_agent_surface(config)

    assert result.status is Status.OK
    assert slack.agents.sessions == {}


async def test_agents_check_says_a_refusing_workspace_falls_back_to_the_status_message(
    data_dir: Path, slack: FakeSlackApi
) -> None:
    slack.agents.refuse("feature_disabled")
    config = settings(data_dir, slack_bot_token=slack.token, slack_api_url=slack.base_url)

    result = await check_agent_surface(config)

    assert result.status is Status.WARNING
    assert "feature_disabled" in result.detail
    assert "status message" in result.detail


async def test_agents_check_is_skipped_when_the_surface_is_turned_off(
    data_dir: Path, slack: FakeSlackApi
) -> None:
    config = settings(
        data_dir, slack_bot_token=slack.token, slack_api_url=slack.base_url, agent_surface=False
    )
    result = await check_agent_surface(config)
    assert result.status is Status.SKIPPED
    assert "WARROOM_AGENT_SURFACE=false" in result.detail
    assert not slack.calls_to("agents.sessions.setStatus")


# ----- anthropic ---------------------------------------------------------------------------


async def test_anthropic_check_finds_the_configured_model_active(data_dir: Path) -> None:
    async with FakeAnthropicAPI(api_key="sk-good") as fake:
        config = settings(data_dir, anthropic_api_key="sk-good", anthropic_base_url=fake.base_url)

        result = await check_anthropic(config)

    assert result.status is Status.OK
    assert f"WARROOM_MODEL={config.model} is active" in result.detail


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("claude-nonesuch-9", "does not serve WARROOM_MODEL=claude-nonesuch-9"),
        ("claude-sonnet-4-5", "WARROOM_MODEL=claude-sonnet-4-5 is retired, retires 2026-11-30"),
        ("claude-opus-4-5", "WARROOM_MODEL=claude-opus-4-5 is deprecated, retires 2027-01-22"),
    ],
)
async def test_anthropic_check_reports_a_model_absent_deprecated_or_retired(
    data_dir: Path, model: str, said: str
) -> None:
    async with FakeAnthropicAPI(api_key="sk-good") as fake:
        config = settings(
            data_dir, anthropic_api_key="sk-good", anthropic_base_url=fake.base_url, model=model
        )

        result = await check_anthropic(config)

    assert result.status is Status.PROBLEM
    assert said in result.detail
    assert "set WARROOM_MODEL to a current model, e.g. claude-sonnet-5-5" in result.fix


async def test_anthropic_check_reports_a_refused_key(data_dir: Path) -> None:
    async with FakeAnthropicAPI(api_key="sk-good") as fake:
        config = settings(data_dir, anthropic_api_key="sk-bad", anthropic_base_url=fake.base_url)

        result = await check_anthropic(config)

    assert result.status is Status.PROBLEM
    assert "401 authentication_error: invalid x-api-key" in result.detail
    assert "ANTHROPIC_API_KEY was refused" in result.fix


async def test_anthropic_check_reports_an_unreachable_endpoint(data_dir: Path) -> None:
    config = settings(
        data_dir, anthropic_api_key="k", anthropic_base_url=f"http://{CLOSED_PORT_URL}"
    )

    result = await check_anthropic(config)

    assert result.status is Status.PROBLEM
    assert "ANTHROPIC_BASE_URL" in result.fix


# ----- the whole run -----------------------------------------------------------------------


async def test_a_check_that_hangs_is_a_problem_after_the_timeout(data_dir: Path) -> None:
    # Given an "Anthropic" endpoint that accepts connections and never answers
    accepted: list[asyncio.StreamWriter] = []

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = settings(
        data_dir, anthropic_api_key="k", anthropic_base_url=f"http://127.0.0.1:{port}"
    )
    try:
        results = await run_checks(config, timeout_s=0.5)
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()

    anthropic = next(r for r in results if r.name == "anthropic")
    assert anthropic.status is Status.PROBLEM
    assert anthropic.detail == "no answer within 0.5 s"


async def test_quick_runs_only_the_data_dir_database_and_redis_checks(data_dir: Path) -> None:
    results = await run_checks(settings(data_dir), quick=True)

    assert [r.name for r in results] == ["data_dir", "database", "redis"]
    assert not failed(results)


def test_render_puts_the_fix_under_each_problem() -> None:
    text = render(
        [
            CheckResult("redis", Status.OK, "PING answered"),
            CheckResult("slack", Status.PROBLEM, "auth.test failed: invalid_auth", "copy it"),
        ]
    )

    assert text.splitlines() == [
        "ok       redis      PING answered",
        "problem  slack      auth.test failed: invalid_auth",
        "                    fix: copy it",
    ]


def test_doctor_exits_1_when_a_check_fails_and_0_when_quick_checks_pass(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(data_dir)  # no .env
    env: dict[str, str | None] = {
        "WARROOM_DATA_DIR": str(data_dir),
        "REDIS_URL": None,
        "DATABASE_URL": None,
        "SLACK_BOT_TOKEN": None,
        "SLACK_APP_TOKEN": None,
        "ANTHROPIC_API_KEY": None,
    }
    asyncio.run(migrated(data_dir))

    full = CliRunner().invoke(app, ["doctor"], env=env)
    quick = CliRunner().invoke(app, ["doctor", "--quick"], env=env)

    assert full.exit_code == 1
    assert full.output.startswith("problem  settings")
    assert quick.exit_code == 0
    assert quick.output.startswith("ok       data_dir")
    assert "ok       database" in quick.output


# ----- settings out of range (issue #12, item 9) -------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("WARROOM_LEASE_S", "-1", "greater than 0"),
        ("WARROOM_MAX_TOKENS", "0", "greater than or equal to 1"),
        ("SLACK_HTTP_PORT", "99999", "less than or equal to 65535"),
        ("WARROOM_WORKER_THREADS", "0", "greater than or equal to 1"),
        ("WARROOM_METRICS_PORT", "0", "greater than or equal to 1"),
        ("REDIS_URL", "localhost:6379", "must start with redis://"),
        ("REDIS_URL", "redis://localhost:port/0", "Port could not be cast to integer"),
    ],
)
@pytest.mark.parametrize("command", [["doctor", "--quick"], ["chat"], ["serve"]])
def test_an_out_of_range_setting_exits_2_with_one_line_naming_it(
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    variable: str,
    value: str,
    why: str,
) -> None:
    monkeypatch.chdir(data_dir)  # no .env
    env = {"WARROOM_DATA_DIR": str(data_dir), "ANTHROPIC_API_KEY": "k", variable: value}

    result = CliRunner().invoke(app, command, env=env)

    assert result.exit_code == 2
    assert f"{variable}={value}: " in result.output
    assert why in result.output
    assert "Traceback" not in result.output


def test_a_data_dir_under_a_file_exits_2_naming_it(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(data_dir)  # no .env
    (data_dir / "a-file").write_text("not a directory")
    env = {"WARROOM_DATA_DIR": str(data_dir / "a-file" / "data"), "REDIS_URL": None}

    result = CliRunner().invoke(app, ["doctor", "--quick"], env=env)

    assert result.exit_code == 2
    assert "WARROOM_DATA_DIR=" in result.output
    assert "a-file is not a directory" in result.output


async def test_data_dir_check_reports_a_directory_it_cannot_write(data_dir: Path) -> None:
    # Given a data directory whose path runs through /proc (no file can be created there)
    result = (await run_checks(settings(Path("/proc/self/warroom-data")), quick=True))[0]

    assert result.name == "data_dir"
    assert result.status is Status.PROBLEM
    assert "is not writable" in result.detail
    assert "WARROOM_DATA_DIR" in result.fix


async def test_the_limits_check_says_each_limit_and_how_this_host_enforces_it(
    data_dir: Path,
) -> None:
    # Given sandboxes limited to 64 MiB and 32 processes
    chosen = settings(data_dir, sandbox_memory_mb=64, sandbox_pids_max=32)
    found = LocalProvider(LocalConfig(data_dir / "sbx")).enforcement()
    # When doctor checks the limits
    result = await check_sandbox_limits(chosen)
    # Then it names each value with the way this host enforces it
    assert f"memory 64 MiB ({found['memory']})" in result.detail
    assert f"processes 32 ({found['pids']})" in result.detail
    assert "/workspace" in result.detail
    assert "(tmpfs)" in result.detail
    weak = [name for name in ("memory", "pids", "cpu") if not found[name].startswith("cgroup")]
    if weak:  # the host decides which branch runs; each says what it must
        assert result.status is Status.WARNING
        assert f"not enforced by a cgroup here: {', '.join(weak)}" in result.detail
        assert "cgroup" in result.fix
    else:
        assert result.status is Status.OK
    # And a Blaxel deployment is skipped: Blaxel sets its own
    blaxel = await check_sandbox_limits(settings(data_dir, sandbox_provider="blaxel"))
    assert blaxel.status is Status.SKIPPED


# ----- approvals --------------------------------------------------------------------------


async def test_approvals_check_says_what_is_in_force_and_names_a_malformed_org_file(
    data_dir: Path,
) -> None:
    default = await check_approvals(settings(data_dir))
    org_file = data_dir / "approvals.toml"
    org_file.write_text(
        '[[rule]]\nprograms = ["deployctl"]\nwords = "promote"\n'
        'decision = "approval"\nreason = "changes what runs"\n'
    )
    with_org = await check_approvals(
        settings(data_dir, approval_policy=org_file, approvers="U1 S2", approval_timeout_s=600)
    )
    org_file.write_text('[[rule]]\nprograms = ["x"]\ndecision = "maybe"\nreason = "r"\n')
    broken = await check_approvals(settings(data_dir, approval_policy=org_file))
    off = await check_approvals(settings(data_dir, approvals=False))

    assert default.status is Status.OK
    assert "0 of the org's; approvers: any member of the installing org" in default.detail
    assert "expire after 30 min" in default.detail
    assert with_org.status is Status.OK
    assert "1 of the org's; approvers: S2, U1; unanswered requests expire after 10 min" in (
        with_org.detail
    )
    assert broken.status is Status.PROBLEM
    assert "decision must be allowed, approval or blocked" in broken.detail
    assert off.status is Status.WARNING


# ----- what the second new-user trial found (issue #26) ------------------------------------


async def test_the_sandbox_check_names_egress_rules_that_do_not_load(data_dir: Path) -> None:
    require_bwrap()
    rules = data_dir / "bad.yml"
    rules.write_text("rules:\n  - name: prom\n    hosts: [prom.internal\n    ports: [443]\n")

    result = await check_sandbox(settings(data_dir, egress_rules=rules))

    assert result.status is Status.PROBLEM
    assert result.detail.startswith("not tried: the egress rules do not load")
    assert result.fix == "correct WARROOM_EGRESS_RULES"


async def test_a_check_that_breaks_is_a_problem_line_not_a_traceback(data_dir: Path) -> None:
    async def check_broken(_: Settings) -> CheckResult:
        raise ValueError("something unforeseen\nsecond line")

    [result] = [r async for r in _one(check_broken, settings(data_dir))]

    assert result.name == "broken"
    assert result.status is Status.PROBLEM
    assert result.detail == "the check could not run: ValueError: something unforeseen"


async def _one(check: Any, s: Settings) -> AsyncIterator[CheckResult]:
    from bot.cli.doctor import _bounded

    yield await _bounded(check, s, 5.0)


async def test_the_alerts_check_names_bad_routing_rules_and_passes_good_ones(
    data_dir: Path,
) -> None:
    from bot.cli.doctor import check_alerts

    bad = data_dir / "routes.yml"
    bad.write_text("routes:\n  - {name: db, channel: C0DB, match_re: {a: '('}}\n")
    good = data_dir / "good.yml"
    good.write_text("default_channel: C0ALERTS\nroutes:\n  - {name: db, channel: C0DB}\n")

    off = await check_alerts(settings(data_dir))
    token = "alert-token-0123456789"
    broken = await check_alerts(settings(data_dir, alert_token=token, alert_routes=bad))
    fine = await check_alerts(settings(data_dir, alert_token=token, alert_routes=good))

    assert off.status is Status.SKIPPED
    assert broken.status is Status.PROBLEM
    assert "WARROOM_ALERT_ROUTES" in broken.detail
    assert "'db'" in broken.detail
    assert fine.status is Status.OK, fine.detail
    assert fine.detail == "1 routing rule; default channel C0ALERTS"


# ----- an invalid setting is a line of the checklist (issue #26) --------------------------

CHECKLIST = (
    "settings",
    "data_dir",
    "database",
    "redis",
    "sandbox",
    "limits",
    "egress",
    "approvals",
    "prices",
    "alerts",
    "slack",
    "agents",
    "socket",
    "anthropic",
    "mcp",
)


@pytest.mark.parametrize(
    ("variable", "value", "why", "not_checked"),
    [
        (
            "WARROOM_ALERT_TOKEN",
            "short",
            "must be at least 16 characters, not blank (make one with: openssl rand -hex 32)",
            ("alerts",),
        ),
        ("REDIS_URL", "localhost:6379", "must start with redis://", ("redis",)),
        ("WARROOM_DATA_DIR", "{file}/data", "is not a directory", ("data_dir", "database")),
        ("WARROOM_MCP_TOOL_SEARCH", "sometimes", "should match pattern", ("mcp",)),
        ("WARROOM_SANDBOX_MEMORY_MB", "4", "at least 16", ("sandbox", "limits", "egress")),
    ],
)
@pytest.mark.slow
async def test_doctor_prints_its_whole_checklist_with_an_invalid_setting_failed_and_exits_2(
    data_dir: Path, variable: str, value: str, why: str, not_checked: tuple[str, ...]
) -> None:
    # Given one setting with a value Warroom refuses (the others fine or unset)
    (data_dir / "a-file").write_text("not a directory")
    value = value.format(file=data_dir / "a-file")
    env = warroom_env(data_dir, **{variable: value})

    # When `warroom doctor` runs
    doctor = await start("doctor", env=env, cwd=data_dir)
    out, err = await asyncio.wait_for(doctor.communicate(), 120)
    printed = out.decode()

    # Then it prints every check, the settings line a problem naming the variable, why and
    # how to fix it, and the checks that read it as not run; and exits 2 (a setting error)
    assert doctor.returncode == 2, printed + err.decode()
    names = [line.split()[1] for line in printed.splitlines() if not line.startswith(" ")]
    assert names == list(CHECKLIST), printed
    settings_line = printed.splitlines()[0]
    assert settings_line.startswith("problem  settings"), printed
    assert variable in settings_line
    assert why in settings_line
    assert f"fix: correct {variable}" in printed
    if variable.endswith("_TOKEN"):
        assert value not in printed  # a secret is never shown
    for name in not_checked:
        assert f"skipped  {name:<10} not checked: {variable} is invalid" in printed, printed
    assert "Traceback" not in printed + err.decode()
    assert not (data_dir / "data").exists()  # nothing checked in the default's place
