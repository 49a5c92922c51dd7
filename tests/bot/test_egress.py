"""The gateway as a worker runs it: from the settings, bound before each command, audited
in the database under the command's ``tool_use`` id; and what ``doctor`` says of it."""

from __future__ import annotations

import doctest
import io
import json
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot import egress as egress_module
from bot.cli.doctor import Status, check_egress
from bot.cli.terminal import TerminalReporter
from bot.durable.wiring import Runtime, make_provider
from bot.egress import WorkerEgress
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.metrics import Metrics
from bot.settings import Settings
from harness import (
    ApprovalStatus,
    Checkpoint,
    Message,
    PendingApproval,
    Requester,
    SandboxWorkspaces,
    ToolUseBlock,
    input_sha256,
)
from harness.loop.prompt import SYSTEM_PROMPT
from memory_store import (
    Database,
    EgressLog,
    EgressTokens,
    SessionKey,
    SessionStore,
    TokenOwner,
)
from sandbox_client import SandboxHandle, SandboxManager
from tests.conftest import require_bwrap
from tests.memory_store.test_egress import live_session
from tests.sandbox_client.gateway.prometheus import PASSWORD, USER, Prometheus, real_prometheus


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A short directory: jail socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="wr-eg-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _settings(data_dir: Path, rules: Path, upstream_ca: Path | None = None) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
        data_dir=data_dir,
        egress_rules=rules,
        egress_upstream_ca=upstream_ca,
        anthropic_api_key=SecretStr("sk-ant-test"),
    )


def _rules_file(directory: Path, prom: Prometheus) -> Path:
    path = directory / "egress.yml"
    path.write_text(
        "rules:\n"
        "  - name: prometheus\n"
        f"    hosts: [{prom.host}]\n"
        f"    ports: [{prom.port}]\n"
        "    paths: [/api/v1/]\n"
        f"    inject: {{type: basic, username: {USER}, password: {{env: PROM_PASSWORD}}}}\n"
        f"    base_url: {prom.base_url}\n"
    )
    return path


@pytest.fixture
async def prometheus() -> AsyncIterator[Prometheus]:
    async with real_prometheus() as running:
        yield running


async def test_a_bash_command_reaches_prometheus_and_is_audited_under_its_tool_use(
    data_dir: Path, prometheus: Prometheus, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    # Given a worker configured with egress rules whose secret is in its environment
    monkeypatch.setenv("PROM_PASSWORD", PASSWORD)
    internal_ca = data_dir / "internal-ca.pem"  # Prometheus's certificate is from an internal CA
    internal_ca.write_bytes(prometheus.ca_pem)
    settings = _settings(data_dir, _rules_file(data_dir, prometheus), internal_ca)
    db = Database.from_url(None, data_dir=data_dir)
    await db.migrate()
    egress = await WorkerEgress.open(settings, db, Metrics())
    assert egress is not None
    provider = make_provider(settings)
    manager = SandboxManager(provider)
    workspaces = SandboxWorkspaces(manager, (), egress)
    cp = Checkpoint(
        session_id="s-egress", org_id="T1", channel_id="C-INC", requester=Requester("U1")
    )
    try:
        # When the agent's Bash command curls Prometheus
        workspace = workspaces.open(cp)
        url = f"{prometheus.base_url}/api/v1/query?query=up"
        result = await workspace.exec("toolu_q1", f"curl -sS {shlex.quote(url)}", timeout_s=30)
    finally:
        await manager.aclose()
        await provider.destroy_all()  # type: ignore[attr-defined]  # the local provider
        await egress.aclose()
    # Then it got data, and the request is on the session's record under its tool_use id
    assert result.exit_code == 0, result.stderr
    assert '"status":"success"' in result.stdout
    (entry,) = await EgressLog(db).recent("s-egress")
    assert (entry.tool_use_id, entry.outcome, entry.rule) == ("toolu_q1", "injected", "prometheus")
    assert entry.path == "/api/v1/query?query"
    await db.dispose()


async def test_doctor_lists_the_rules_and_where_each_secret_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "egress.yml"
    rules.write_text(
        "rules:\n  - name: grafana\n    hosts: [grafana.internal]\n    ports: [443]\n"
        "    inject: {type: bearer, token: {env: GRAFANA_TOKEN}}\n"
    )
    monkeypatch.setenv("GRAFANA_TOKEN", "glsa_secret_value")
    result = await check_egress(_settings(tmp_path, rules))
    assert result.status is Status.OK
    assert "grafana: grafana.internal:443 / GET,HEAD (injects bearer from env GRAFANA_TOKEN)" in (
        result.detail
    )
    assert "glsa_secret_value" not in result.detail


async def test_doctor_warns_about_a_rule_that_sends_its_secret_in_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "egress.yml"
    rules.write_text(
        "rules:\n  - name: grafana\n    hosts: [grafana.internal]\n    ports: [3000]\n"
        "    inject: {type: bearer, token: {env: GRAFANA_TOKEN}}\n    allow_plaintext: true\n"
    )
    monkeypatch.setenv("GRAFANA_TOKEN", "glsa_secret_value")
    result = await check_egress(_settings(tmp_path, rules))
    assert result.status is Status.WARNING
    assert "grafana send their secret over plain http (allow_plaintext)" in result.detail
    assert "injects bearer from env GRAFANA_TOKEN, also over plain http" in result.detail
    assert "drop allow_plaintext" in result.fix


async def test_doctor_names_a_missing_secret_and_a_bad_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "egress.yml"
    rules.write_text(
        "rules:\n  - name: grafana\n    hosts: [grafana.internal]\n"
        "    inject: {type: bearer, token: {env: GRAFANA_TOKEN}}\n"
        "  - name: pagerduty\n    hosts: [api.pagerduty.com]\n"
        "    inject: {type: header, name: Authorization, value: {env: PD_TOKEN}}\n"
    )
    monkeypatch.delenv("GRAFANA_TOKEN", raising=False)
    monkeypatch.delenv("PD_TOKEN", raising=False)
    missing = await check_egress(_settings(tmp_path, rules))
    assert missing.status is Status.PROBLEM
    assert "env GRAFANA_TOKEN" in missing.detail
    assert "env PD_TOKEN" in missing.detail  # every missing secret, in one run
    rules.write_text("rules:\n  - name: grafana\n    hosts: []\n")
    bad = await check_egress(_settings(tmp_path, rules))
    assert bad.status is Status.PROBLEM
    assert "line 3" in bad.detail


async def test_doctor_warns_loudly_about_the_host_network(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        data_dir=tmp_path,
        sandbox_network="host",
    )
    result = await check_egress(settings)
    assert result.status is Status.WARNING
    assert "can reach the database" in result.detail


async def test_a_remote_sandbox_gets_its_sessions_token_in_the_proxy_url(tmp_path: Path) -> None:
    # Given a worker whose sandboxes are remote and reach the gateway over the network
    rules = tmp_path / "egress.yml"
    rules.write_text("rules:\n  - name: status\n    hosts: [status.internal]\n")
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        data_dir=tmp_path,
        egress_rules=rules,
        gateway_url="http://gateway.internal:3128",
    )
    db = Database.from_url(None, data_dir=tmp_path)
    await db.migrate()
    egress = await WorkerEgress.open(settings, db, Metrics())
    assert egress is not None
    await live_session(db, "s-r")
    handle = SandboxHandle(provider="blaxel", sandbox_id="sbx-1", url="https://sbx-1.example")
    # When two commands of one session run there
    first = await egress(handle, session_id="s-r", channel_id="C-1", tool_use_id="toolu_1")
    second = await egress(handle, session_id="s-r", channel_id="C-1", tool_use_id="toolu_2")
    await egress.aclose()
    # Then both carry the session's one token, each under its own call with that call's
    # own credential (which the gateway checks: a call id alone proves nothing)
    token = first["HTTPS_PROXY"].split(":")[2].split(".")[0]
    one, two = (egress.calls.issue("s-r", call) for call in ("toolu_1", "toolu_2"))
    assert first["HTTPS_PROXY"] == f"http://toolu_1:{token}.{one}@gateway.internal:3128"
    assert second["HTTPS_PROXY"] == f"http://toolu_2:{token}.{two}@gateway.internal:3128"
    assert one != two
    assert first["SSL_CERT_FILE"] == "/workspace/.warroom/ca-bundle.pem"
    # and the token carries the deployment's tag, and is the one the database knows
    assert egress.calls.token_is_ours(token)
    assert await EgressTokens(db).owner(token) == TokenOwner("s-r", "C-1")
    await db.dispose()


async def test_the_binders_variables_reach_the_command(data_dir: Path) -> None:
    require_bwrap()
    # Given a binder that gives each command a proxy variable (as for a remote sandbox)
    seen: list[str] = []

    async def binder(
        handle: SandboxHandle, *, session_id: str, channel_id: str, tool_use_id: str
    ) -> dict[str, str]:
        seen.append(tool_use_id)
        return {"HTTPS_PROXY": f"http://{tool_use_id}:tok@gw.internal:3128"}

    settings = Settings(_env_file=None, data_dir=data_dir)  # type: ignore[call-arg]
    provider = make_provider(settings)
    manager = SandboxManager(provider)
    cp = Checkpoint(session_id="s-env", org_id="T1", channel_id="C1", requester=Requester("U1"))
    try:
        workspace = SandboxWorkspaces(manager, (), binder).open(cp)
        result = await workspace.exec("toolu_e1", "echo $HTTPS_PROXY", timeout_s=30)
    finally:
        await manager.aclose()
        await provider.destroy_all()  # type: ignore[attr-defined]
    # Then the command saw it, and the binder was asked for that tool_use
    assert result.stdout.strip() == "http://toolu_e1:tok@gw.internal:3128"
    assert seen == ["toolu_e1"]


SERVICES_RULES = (
    "rules:\n"
    "  - name: prometheus\n    hosts: [prometheus.internal]\n    ports: [443]\n"
    "    inject: {type: basic, username: warroom, password: {env: PROM_PASSWORD}}\n"
    "    base_url: https://prometheus.internal\n"
    "    description: metrics of every production service\n"
    "  - name: pagerduty\n    hosts: [api.pagerduty.com]\n    channels: [C-PAYMENTS]\n"
    "    base_url: https://api.pagerduty.com\n"
    "  - name: status-page\n    hosts: [status.example.com]\n    tunnel: true\n"
)


async def _system_prompts(data_dir: Path, rules: str | None) -> list[RecordedRequest]:
    """Drive one session (a TodoWrite, then an answer) through the runtime the composition
    root builds; return the requests the fake Messages API received."""
    todos = [{"content": "Check", "status": "in_progress", "activeForm": "Checking"}]
    script = [Reply.tool("TodoWrite", {"todos": todos}), Reply.text("Done.")]
    path = None
    if rules is not None:
        path = data_dir / "egress.yml"
        path.write_text(rules)
    async with FakeAnthropicAPI(script) as fake:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            anthropic_api_key=SecretStr("fake-key"),
            anthropic_base_url=fake.base_url,
            data_dir=data_dir,
            egress_rules=path,
        )
        woken: list[tuple[str, str]] = []

        async def enqueue(session_id: str, token: str) -> None:
            woken.append((session_id, token))

        runtime = await Runtime.open(
            settings, enqueue=enqueue, reporter=TerminalReporter(io.StringIO())
        )
        try:
            opened = await runtime.sessions.open_or_join(
                SessionKey("T1", "C-INC", "1.0"),
                requester_id="U1",
                initial_checkpoint=Checkpoint("s-sys", "T1", "C-INC", Requester("U1")).to_json(),
                text="checkout is down",
                source_ts="1.0",
                session_id="s-sys",
            )
            assert opened.token is not None
            woken.append((opened.session_id, opened.token))
            while woken:
                await runtime.driver.run(*woken.pop(0))
        finally:
            await runtime.close()
        return list(fake.requests)


async def test_the_model_is_told_the_systems_it_can_reach_in_the_same_bytes_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given egress rules, one with a secret in the worker's environment
    monkeypatch.setenv("PROM_PASSWORD", "prom-secret-91ac")
    # When a session takes two model steps
    first, second = await _system_prompts(tmp_path, SERVICES_RULES)
    # Then the system prompt lists the rules the session's channel may use, with their URLs
    system = json.dumps(first.body["system"])
    assert "# Systems you can reach" in system
    assert (
        "- prometheus: https://prometheus.internal (GET, HEAD; credential added by the "
        "gateway): metrics of every production service"
    ) in first.body["system"][0]["text"]
    assert "pagerduty" not in system  # another channel's rule
    assert "status-page" not in system  # no base_url: nothing to tell
    # And it holds no secret, in the same bytes on every request (the cached prefix holds)
    assert all(b"prom-secret-91ac" not in r.raw for r in (first, second))
    assert json.dumps(second.body["system"]) == system
    assert first.body["system"][0]["text"].startswith(SYSTEM_PROMPT)


async def test_without_rules_the_system_prompt_names_no_systems(tmp_path: Path) -> None:
    requests = await _system_prompts(tmp_path, None)
    assert [r.body["system"][0]["text"] for r in requests] == [SYSTEM_PROMPT] * 2


def test_the_egress_wirings_examples_hold() -> None:
    result = doctest.testmod(egress_module)
    assert result.attempted > 0
    assert result.failed == 0


async def test_doctor_shows_what_applies_to_a_tunnel_rule(tmp_path: Path) -> None:
    rules = tmp_path / "egress.yml"
    rules.write_text(
        "rules:\n  - name: status-page\n    hosts: [status.example.com]\n    ports: [443]\n"
        "    tunnel: true\n    channels: [C0INC]\n"
    )
    result = await check_egress(_settings(tmp_path, rules))
    assert result.detail == (
        "status-page: status.example.com:443 in C0INC (tunnel: HTTPS passes untouched, any "
        "method and path; http:// / GET,HEAD)"
    )


async def test_a_hidden_post_through_a_credential_rule_passes_only_within_an_approved_call(
    data_dir: Path, prometheus: Prometheus, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    # Given a credential rule that lists POST, and approvals on (the default)
    monkeypatch.setenv("PROM_PASSWORD", PASSWORD)
    internal_ca = data_dir / "internal-ca.pem"
    internal_ca.write_bytes(prometheus.ca_pem)
    rules = _rules_file(data_dir, prometheus)
    rules.write_text(rules.read_text() + "    methods: [GET, POST]\n")
    settings = _settings(data_dir, rules, internal_ca)
    db = Database.from_url(None, data_dir=data_dir)
    await db.migrate()
    sessions = SessionStore(db)
    egress = await WorkerEgress.open(settings, db, Metrics())
    assert egress is not None
    provider = make_provider(settings)
    manager = SandboxManager(provider)
    workspaces = SandboxWorkspaces(manager, (), egress)
    call = ToolUseBlock("toolu_ok", "Bash", {"command": "sh ./query.sh"})
    cp = Checkpoint(session_id="s-post", org_id="T1", channel_id="C-INC", requester=Requester("U1"))
    url = f"{prometheus.base_url}/api/v1/query"
    script = f"curl -sS -o /dev/null -w '%{{http_code}}' -X POST -d query=up {shlex.quote(url)}\n"
    try:
        workspace = workspaces.open(cp)
        # A script the policy cannot read (written in one call, run in another)
        write = f"printf %s {shlex.quote(script)} > query.sh"
        assert (await workspace.exec("toolu_w", write, timeout_s=30)).exit_code == 0
        # When it runs outside any approved call
        refused = await workspace.exec("toolu_plain", "sh ./query.sh", timeout_s=30)
        # And inside the approved call, in flight (as the driver commits it)
        now = datetime.now(UTC)
        sha = input_sha256("Bash", call.input)
        approval = PendingApproval(
            "toolu_ok", "Bash", sha, "sh ./query.sh", "r", now, now + timedelta(minutes=30)
        ).decided(ApprovalStatus.APPROVED, "U2", now)
        running = replace(
            cp,
            messages=(Message("assistant", (call,)),),
            approval=approval,
            in_flight="toolu_ok",
        )
        await sessions.open_or_join(
            SessionKey("T1", "C-INC", "1.0"),
            requester_id="U1",
            initial_checkpoint=running.state_json(),
            text="query",
            source_ts="1.0",
            session_id="s-post",
        )
        passed = await workspace.exec("toolu_ok", "sh ./query.sh", timeout_s=30)
    finally:
        await manager.aclose()
        await provider.destroy_all()  # type: ignore[attr-defined]  # the local provider
        await egress.aclose()
    # Then the gateway refused the first with a 403 and let the approved one through
    assert refused.stdout.strip() == "403", refused
    assert passed.stdout.strip() == "200", passed
    entries = await EgressLog(db).recent("s-post")
    outcomes = {e.tool_use_id: (e.method, e.outcome) for e in entries}
    assert outcomes == {"toolu_plain": ("POST", "blocked"), "toolu_ok": ("POST", "injected")}
    await db.dispose()
