"""``warroom serve`` and ``doctor`` against Slack's refusals and outages, as real processes
(issue #12, items 5 and 10)."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bot.cli.doctor import Status, check_slack, check_socket_mode
from bot.fakes.slack_api import FakeSlackApi
from bot.settings import Settings
from tests.bot.cli.test_app import wait_until_up
from tests.bot.cli_support import finish, start, warroom_env
from tests.bot.slack_edge import SIGNING_SECRET
from tests.fakes.slack_socket_mode import FakeSocketMode
from tests.ports import free_port

UNREACHABLE_API_URL = "http://127.0.0.1:9/api/"  # discard port: nothing listens here


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlackApi]:
    fake = FakeSlackApi()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def socket_mode() -> AsyncIterator[FakeSocketMode]:
    fake = FakeSocketMode()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def test_serve_with_a_refused_app_token_exits_2_naming_it(
    tmp_path: Path, slack: FakeSlackApi
) -> None:
    env = warroom_env(
        tmp_path / "data",
        SLACK_BOT_TOKEN=slack.token,
        SLACK_APP_TOKEN="xapp-1-revoked",
        SLACK_API_URL=slack.base_url,
        ANTHROPIC_API_KEY="fake-key",
    )
    serve = await start("serve", env=env, cwd=tmp_path)
    _, stderr = await asyncio.wait_for(serve.communicate(), 60)

    assert serve.returncode == 2, stderr.decode()[-3000:]
    assert "SLACK_APP_TOKEN was refused by Slack (apps.connections.open: invalid_auth)" in (
        stderr.decode()
    )
    assert "Traceback" not in stderr.decode()


async def test_serve_says_slack_could_not_be_reached(tmp_path: Path) -> None:
    env = warroom_env(
        tmp_path / "data",
        SLACK_BOT_TOKEN="xoxb-1",
        SLACK_APP_TOKEN="xapp-1",
        SLACK_API_URL=UNREACHABLE_API_URL,
        ANTHROPIC_API_KEY="fake-key",
    )
    serve = await start("serve", env=env, cwd=tmp_path)
    _, stderr = await asyncio.wait_for(serve.communicate(), 90)

    assert serve.returncode == 1
    assert "Slack could not be reached (auth.test)" in stderr.decode()
    assert "transport" not in stderr.decode()


async def test_serve_in_http_mode_logs_where_it_listens_and_answers_400_to_a_non_json_body(
    tmp_path: Path, slack: FakeSlackApi
) -> None:
    port = free_port()
    env = warroom_env(
        tmp_path / "data",
        WARROOM_SLACK_MODE="http",
        SLACK_HTTP_PORT=str(port),
        SLACK_BOT_TOKEN=slack.token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.base_url,
        ANTHROPIC_API_KEY="fake-key",
    )
    serve = await start("serve", env=env, cwd=tmp_path)
    try:
        await wait_until_up(f"http://127.0.0.1:{port}/healthz")
        async with httpx.AsyncClient(timeout=10.0) as http:
            answer = await http.post(
                f"http://127.0.0.1:{port}/slack/events",
                content=b"{not json",
                headers={"Content-Type": "application/json"},
            )
    finally:
        serve.send_signal(signal.SIGTERM)
        code = await finish(serve)
    assert serve.stderr is not None
    logged = (await serve.stderr.read()).decode()

    assert answer.status_code == 400
    assert code == 0
    assert f"listening on 0.0.0.0:{port}, Request URL path /slack/events" in logged
    assert "`token` will be unused" not in logged
    assert "Traceback" not in logged


def _settings(tmp_path: Path, **values: object) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path, **values)  # type: ignore[arg-type,call-arg]


async def test_doctor_opens_a_socket_mode_connection_with_the_app_token(
    tmp_path: Path, socket_mode: FakeSocketMode
) -> None:
    good = _settings(
        tmp_path, slack_app_token=socket_mode.app_token, slack_api_url=socket_mode.base_url
    )
    bad = _settings(tmp_path, slack_app_token="xapp-revoked", slack_api_url=socket_mode.base_url)

    ok, refused = await check_socket_mode(good), await check_socket_mode(bad)

    assert ok.status is Status.OK
    assert socket_mode.connections_opened == 1
    assert refused.status is Status.PROBLEM
    assert "refused SLACK_APP_TOKEN: invalid_auth" in refused.detail


async def test_doctor_says_slack_could_not_be_reached(tmp_path: Path) -> None:
    settings = _settings(tmp_path, slack_bot_token="xoxb-1", slack_api_url=UNREACHABLE_API_URL)

    result = await check_slack(settings)

    assert result.status is Status.PROBLEM
    assert result.detail == "auth.test failed: Slack could not be reached"


async def test_serve_in_http_mode_on_a_port_in_use_exits_2_naming_the_setting(
    tmp_path: Path, slack: FakeSlackApi
) -> None:
    # Given a port something else already listens on
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("0.0.0.0", 0))
    holder.listen()
    port = holder.getsockname()[1]
    env = warroom_env(
        tmp_path / "data",
        WARROOM_SLACK_MODE="http",
        SLACK_HTTP_PORT=str(port),
        SLACK_BOT_TOKEN=slack.token,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.base_url,
        ANTHROPIC_API_KEY="fake-key",
    )
    try:
        # When serve starts in HTTP mode on it
        serve = await start("serve", env=env, cwd=tmp_path)
        _, stderr = await asyncio.wait_for(serve.communicate(), 60)
    finally:
        holder.close()
    # Then it stops at once with the configuration exit code, naming the setting
    assert serve.returncode == 2, stderr.decode()[-2000:]
    assert f"SLACK_HTTP_PORT {port} cannot be listened on" in stderr.decode()
    assert "Traceback" not in stderr.decode()


@pytest.mark.parametrize("command", ["serve", "worker"])
async def test_a_metrics_port_in_use_exits_2_naming_the_setting(
    tmp_path: Path, slack: FakeSlackApi, command: str
) -> None:
    # Given a port something else already listens on
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("0.0.0.0", 0))
    holder.listen()
    port = holder.getsockname()[1]
    env = warroom_env(
        tmp_path / "data",
        WARROOM_METRICS_PORT=str(port),
        SLACK_BOT_TOKEN=slack.token,
        SLACK_APP_TOKEN="xapp-fake",
        SLACK_API_URL=slack.base_url,
        ANTHROPIC_API_KEY="fake-key",
        **({"REDIS_URL": "redis://127.0.0.1:1/0"} if command == "worker" else {}),
    )
    try:
        # When serve or a worker starts with it as WARROOM_METRICS_PORT
        process = await start(command, env=env, cwd=tmp_path)
        _, stderr = await asyncio.wait_for(process.communicate(), 150)  # a loaded host
    finally:
        holder.close()
    # Then it stops at once with the configuration exit code, naming the setting
    assert process.returncode == 2, stderr.decode()[-2000:]
    assert f"WARROOM_METRICS_PORT {port} cannot be listened on" in stderr.decode()
    assert "Traceback" not in stderr.decode()
