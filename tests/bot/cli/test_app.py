"""The ``warroom`` command line: configuration errors name the variable, commands do their job.

Configuration errors run the typer app in this process (they exit before doing any
work); the commands that run servers and workers run as real subprocesses.
"""

from __future__ import annotations

import asyncio
import doctest
import json
import os
import signal
import socket
import time
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from pydantic import AliasChoices
from typer.testing import CliRunner

from bot.cli import terminal
from bot.cli import worker as worker_process
from bot.cli.app import app
from bot.fakes import anthropic_script
from bot.fakes.anthropic_api import FakeAnthropicAPI, Reply
from bot.fakes.slack_api import TEAM_ID, FakeSlackApi
from bot.settings import Settings
from memory_store import Database, FileStore, Namespace, Scope
from tests.bot.cli_support import Output, finish, start, warroom_env
from tests.bot.slack_edge import CHANNEL, SIGNING_SECRET, event, sign
from tests.ports import free_port

ROOT_TS = "1767225600.000100"  # the top-level mention's ts in the payloads


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean configuration: no Warroom variable set, data under tmp_path, no .env."""
    for name in warroom_env(tmp_path).keys() ^ os.environ.keys():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WARROOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str, **env: str) -> tuple[int, str]:
    """Run the CLI in this process; returns the exit code and everything it printed."""
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


# ----- configuration errors ----------------------------------------------------------------


@pytest.mark.usefixtures("home")
def test_serve_without_credentials_exits_2_saying_what_to_set_and_how_to_try_it() -> None:
    code, output = invoke("serve")

    assert code == 2
    assert "SLACK_BOT_TOKEN is not set" in output
    assert "SLACK_APP_TOKEN is not set" in output
    assert "ANTHROPIC_API_KEY is not set" in output
    assert "manifest.yml" in output
    assert "warroom chat" in output


@pytest.mark.usefixtures("home")
def test_serve_in_socket_mode_names_the_missing_app_token() -> None:
    code, output = invoke("serve", SLACK_BOT_TOKEN="xoxb-1", ANTHROPIC_API_KEY="sk-1")

    assert code == 2
    assert "SLACK_APP_TOKEN is not set: Socket Mode connects with an app-level token" in output
    assert "SLACK_BOT_TOKEN" not in output


@pytest.mark.usefixtures("home")
def test_serve_in_http_mode_names_the_missing_signing_secret() -> None:
    code, output = invoke(
        "serve", WARROOM_SLACK_MODE="http", SLACK_BOT_TOKEN="xoxb-1", ANTHROPIC_API_KEY="sk-1"
    )

    assert code == 2
    assert "SLACK_SIGNING_SECRET is not set" in output
    assert "SLACK_APP_TOKEN" not in output


@pytest.mark.usefixtures("home")
def test_serve_without_the_anthropic_key_names_it() -> None:
    code, output = invoke("serve", SLACK_BOT_TOKEN="xoxb-1", SLACK_APP_TOKEN="xapp-1")

    assert code == 2
    assert "ANTHROPIC_API_KEY is not set: the agent calls Claude with this key" in output


@pytest.mark.usefixtures("home")
def test_an_invalid_setting_exits_2_naming_the_variable() -> None:
    code, output = invoke("doctor", WARROOM_WORKER_THREADS="many")

    assert code == 2
    assert "WARROOM_WORKER_THREADS" in output


@pytest.mark.usefixtures("home")
def test_worker_without_redis_exits_2_pointing_at_serve() -> None:
    code, output = invoke("worker", SLACK_BOT_TOKEN="xoxb-1", ANTHROPIC_API_KEY="sk-1")

    assert code == 2
    assert "REDIS_URL is not set" in output
    assert "warroom serve" in output


@pytest.mark.usefixtures("home")
def test_worker_names_the_credentials_its_steps_need() -> None:
    code, output = invoke("worker", REDIS_URL="redis://127.0.0.1:1/0")

    assert code == 2
    assert "SLACK_BOT_TOKEN is not set" in output
    assert "ANTHROPIC_API_KEY is not set" in output


# ----- migrate, skills ---------------------------------------------------------------------


@pytest.mark.usefixtures("home")
@pytest.mark.parametrize("command", [["migrate"], ["chat"], ["skills", "export", "out"]])
def test_an_unsupported_database_url_exits_2_naming_database_url(command: list[str]) -> None:
    code, output = invoke(*command, DATABASE_URL="mysql://u@h/db", ANTHROPIC_API_KEY="k")

    assert code == 2
    assert "DATABASE_URL is not supported" in output
    assert "postgresql://" in output
    assert "sqlite:///" in output


def test_migrate_brings_the_schema_to_head(home: Path) -> None:
    code, output = invoke("migrate")

    assert code == 0
    assert output.startswith("database schema at ")
    assert (home / "data" / "warroom.sqlite3").exists()


def skill_folder(root: Path, name: str, description: str = "Restart pods when they flap.") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nDo it.\n"
    )
    return folder


async def stored_skill(home: Path, org: str, path: str) -> str:
    db = Database.from_url(None, data_dir=home / "data")
    try:
        return (await FileStore(db).read(Namespace(org, Scope.SKILLS), path)).content
    finally:
        await db.dispose()


def test_skills_import_reports_each_skill_and_fails_on_an_invalid_one(home: Path) -> None:
    skill_folder(home / "in", "restart-pods")
    (skill_folder(home / "in", "bad") / "SKILL.md").write_text("---\nname: [worse\n---\n")
    (home / "in" / "ops" / "lower").mkdir(parents=True)
    (home / "in" / "ops" / "lower" / "skill.md").write_text("# Lower\n")

    code, output = invoke("skills", "import", str(home / "in"), "--org", "T0ORG")

    assert code == 1
    assert "ok       restart-pods: 1 file(s) imported" in output
    assert "invalid  bad: not imported" in output
    assert "not valid YAML" in output
    assert "invalid  lower: not imported" in output
    assert "ops/lower: skill.md: Claude Code loads only SKILL.md (upper case)" in output
    content = asyncio.run(stored_skill(home, "T0ORG", "/restart-pods/SKILL.md"))
    assert "name: restart-pods" in content


def test_skills_export_writes_the_org_skills_back_to_folders(home: Path) -> None:
    skill_folder(home / "in", "db-pool", "Check the DB pool.")
    assert invoke("skills", "import", str(home / "in"), "--org", "T0ORG")[0] == 0

    code, output = invoke("skills", "export", str(home / "out"), "--org", "T0ORG")

    assert code == 0
    assert "1 skill folder(s) written" in output
    exported = (home / "out" / "db-pool" / "SKILL.md").read_text()
    assert exported == (home / "in" / "db-pool" / "SKILL.md").read_text()


async def test_skills_import_defaults_to_the_bot_tokens_org(home: Path) -> None:
    skill_folder(home / "in", "restart-pods")
    slack = FakeSlackApi()
    await slack.start()
    try:
        settings = {"SLACK_BOT_TOKEN": slack.token, "SLACK_API_URL": slack.base_url}
        code, output = await asyncio.to_thread(
            invoke, "skills", "import", str(home / "in"), **settings
        )
    finally:
        await slack.stop()

    assert code == 0, output
    assert output.startswith(f"org {TEAM_ID}:")
    assert "name: restart-pods" in await stored_skill(home, TEAM_ID, "/restart-pods/SKILL.md")


def test_skills_import_of_a_missing_path_or_a_file_says_why(home: Path) -> None:
    (home / "file.md").write_text("x")

    missing = invoke("skills", "import", str(home / "nowhere"))
    a_file = invoke("skills", "import", str(home / "file.md"))

    assert missing[0] == 1
    assert f"no such directory: {home / 'nowhere'}" in missing[1]
    assert a_file[0] == 1
    assert f"not a directory: {home / 'file.md'}" in a_file[1]


@pytest.mark.usefixtures("home")
def test_skills_import_without_a_bot_token_uses_the_chat_org() -> None:
    code, output = invoke("skills", "import", ".")

    assert code == 0
    assert output.startswith("org local:")
    assert "no skill folders" in output


# ----- the fake Anthropic API ----------------------------------------------------------


@pytest.mark.slow
async def test_fake_anthropic_serves_a_json_script_until_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"text": "The pods are fine."}]')
    port = free_port()
    fake = await start(
        "fake-anthropic", "--port", str(port), "--script", str(script),
        env=warroom_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert fake.stdout is not None
    await Output(fake.stdout).until(lambda text: f"http://127.0.0.1:{port}" in text)

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        response = await http.post(
            "/v1/messages",
            headers={"x-api-key": "anything", "anthropic-version": "2023-06-01"},
            json={
                "model": "claude-sonnet-5-5",
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "?"}],
            },
        )
    fake.send_signal(signal.SIGTERM)

    content = response.json()["content"]
    assert [b for b in content if b["type"] == "text"] == [
        {"type": "text", "text": "The pods are fine."}
    ]
    assert await finish(fake) == 0


@pytest.mark.usefixtures("home")
def test_fake_anthropic_on_a_port_in_use_exits_1_saying_so() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = CliRunner().invoke(app, ["fake-anthropic", "--port", str(port)])

    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)  # not a traceback
    assert f"cannot listen on 127.0.0.1:{port}" in result.output


@pytest.mark.usefixtures("home")
def test_fake_anthropic_refuses_a_malformed_script(home: Path) -> None:
    (home / "bad.json").write_text('{"text": "not an array"}')

    code, output = invoke("fake-anthropic", "--script", str(home / "bad.json"))

    assert code == 2
    assert "must be a JSON array" in output


# ----- serve and worker, for real ----------------------------------------------------------


async def wait_until_up(url: str, *, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as http:
        while True:
            try:
                if (await http.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} did not answer within {timeout_s} s")
            await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_serve_answers_a_mention_in_its_thread_and_stops_cleanly_on_sigterm(
    tmp_path: Path,
) -> None:
    slack = FakeSlackApi()
    await slack.start()
    http_port, metrics_port = free_port(), free_port()
    try:
        async with FakeAnthropicAPI([Reply.text("The payments pods are fine.")]) as model:
            env = warroom_env(
                tmp_path / "data",
                WARROOM_SLACK_MODE="http",
                SLACK_HTTP_PORT=str(http_port),
                SLACK_BOT_TOKEN=slack.token,
                SLACK_SIGNING_SECRET=SIGNING_SECRET,
                SLACK_API_URL=slack.base_url,
                ANTHROPIC_API_KEY="fake-key",
                ANTHROPIC_BASE_URL=model.base_url,
                WARROOM_METRICS_PORT=str(metrics_port),
            )
            serve = await start("serve", env=env, cwd=tmp_path)
            try:
                await wait_until_up(f"http://127.0.0.1:{http_port}/healthz")

                # Given a top-level @mention sent to the running bot
                raw = json.dumps(event("event_app_mention_top_level.json")).encode()
                now = int(time.time())
                async with httpx.AsyncClient(timeout=10.0) as http:
                    ack = await http.post(
                        f"http://127.0.0.1:{http_port}/slack/events",
                        content=raw,
                        headers={
                            "Content-Type": "application/json",
                            "X-Slack-Request-Timestamp": str(now),
                            "X-Slack-Signature": sign(raw, timestamp=now),
                        },
                    )

                    # Then the in-process worker runs the steps and the answer is posted
                    await slack.wait_for(
                        lambda: any(
                            "payments pods are fine" in m.get("text", "")
                            for m in slack.thread(CHANNEL, ROOT_TS)
                        ),
                        timeout_s=60.0,
                    )
                    metrics = (await http.get(f"http://127.0.0.1:{metrics_port}/")).text
            finally:
                # When it gets SIGTERM, it stops on its own
                serve.send_signal(signal.SIGTERM)
                code = await finish(serve)
    finally:
        await slack.stop()

    assert ack.status_code == 200
    assert code == 0
    assert "warroom_steps_total" in metrics
    assert slack.calls[0].method == "auth.test"


@pytest.mark.slow
@pytest.mark.redis
async def test_worker_becomes_the_dramatiq_parent_which_stops_on_sigterm(
    tmp_path: Path, redis_url: str
) -> None:
    metrics_port = free_port()
    env = warroom_env(
        tmp_path / "data",
        REDIS_URL=redis_url,
        SLACK_BOT_TOKEN="xoxb-fake",
        ANTHROPIC_API_KEY="fake-key",
        WARROOM_METRICS_PORT=str(metrics_port),
    )
    worker = await start("worker", "--processes", "1", "--threads", "1", env=env, cwd=tmp_path)
    assert worker.stderr is not None
    log = Output(worker.stderr)
    try:
        # The warroom process itself (same PID) is now Dramatiq's parent (Dramatiq's CLI run
        # in it, so the worker process is forked with the code it imported), running one worker
        await log.until(lambda text: "Worker process is ready" in text)
        cmdline = await asyncio.to_thread(Path(f"/proc/{worker.pid}/cmdline").read_bytes)
        assert b"\0worker\0" in cmdline
        children = await asyncio.to_thread(_children, worker.pid)
        assert children
        child = await asyncio.to_thread(Path(f"/proc/{children[0]}/cmdline").read_bytes)
        assert child == cmdline  # forked, not started anew
        # and its metrics fork serves the worker processes' metrics
        await wait_until_up(f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await finish(worker)

    assert code == 0
    assert "session=- org=- channel=-" in log.text  # the workers log through our format


# ----- the README ------------------------------------------------------------------------

README = Path(__file__).resolve().parents[3] / "README.md"


def env_name(name: str, alias: object) -> str:
    if isinstance(alias, str):
        return alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return name.upper()


def test_the_readme_configuration_table_names_every_setting() -> None:
    table = README.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]

    missing = [
        env_name(name, field.validation_alias)
        for name, field in Settings.model_fields.items()
        if f"| `{env_name(name, field.validation_alias)}` |" not in table
    ]

    assert missing == []


def test_the_readme_quick_start_has_the_two_commands() -> None:
    install = "python3 -m venv .venv && .venv/bin/pip install -q -c requirements.lock -e '.[dev]'"
    quick_start = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]

    commands = [line for line in quick_start.splitlines() if line.startswith("python3 ")]

    assert commands == [f"{install} && .venv/bin/warroom drill", f"{install} && .venv/bin/pytest"]


@pytest.mark.parametrize("module", [anthropic_script, worker_process, terminal])
def test_docstring_examples_hold(module: ModuleType) -> None:
    result = doctest.testmod(module)

    assert result.attempted > 0
    assert result.failed == 0


def test_a_malformed_approval_policy_stops_the_worker_naming_the_variable_and_entry(
    home: Path,
) -> None:
    policy = home / "approvals.toml"
    policy.write_text('[[rule]]\nprograms = ["deployctl"]\ndecision = "maybe"\nreason = "r"\n')
    env = {
        "REDIS_URL": "redis://127.0.0.1:6379/11",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "WARROOM_APPROVAL_POLICY": str(policy),
    }

    result = CliRunner().invoke(app, ["worker"], env=env)

    assert result.exit_code == 2, result.output
    assert "WARROOM_APPROVAL_POLICY" in result.output
    assert "rule 1: decision must be allowed, approval or blocked" in result.output


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (every thread's)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found
