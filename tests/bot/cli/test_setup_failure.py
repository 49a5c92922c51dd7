"""A worker that cannot set itself up at a step (what start-up could not foresee) says so in
the thread, fails the session at once (no retries as crashes), and works again once the
cause is fixed and the person writes again (issue #26, item 1): its runtime does not open,
or no sandbox will start for a command (bubblewrap refuses, the sandboxes' directory
cannot be written)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from bot.cli.fake_slack import CHANNEL, SIGNING_SECRET, deliver_lines
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.fakes.anthropic_script import echo_reply
from bot.fakes.slack_api import FakeSlackApi
from tests.bot.cli.test_app import wait_until_up
from tests.bot.cli_support import Output, finish, start, warroom_env
from tests.ports import free_port

pytestmark = pytest.mark.slow

SAID = "The worker could not set itself up to work on this"
NO_SANDBOX = "The worker could not start a sandbox to run commands in"
STATES = ("*Working*", "*Failed*", "*Finished*")
RULES = "rules:\n  - name: status\n    hosts: [status.example.com]\n    tunnel: true\n"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory with a short path (jail sockets live under it) whose ``gateway``
    is a file: the gateway's CA cannot be made there, which start-up does not check."""
    path = Path(tempfile.mkdtemp(prefix="wr-setup-"))
    (path / "gateway").write_text("not a directory\n")
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_chat_says_why_its_worker_could_not_set_up_and_works_once_it_is_fixed(
    tmp_path: Path, data_dir: Path
) -> None:
    rules = tmp_path / "egress.yml"
    rules.write_text(RULES)
    async with FakeAnthropicAPI(echo_reply, api_key="fake-key") as fake:
        env = warroom_env(
            data_dir,
            ANTHROPIC_API_KEY="fake-key",
            ANTHROPIC_BASE_URL=fake.base_url,
            WARROOM_EGRESS_RULES=str(rules),
        )
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        # When a message is typed to a chat whose worker cannot make the gateway's CA
        chat.stdin.write(b"is checkout-api up?\n")
        await chat.stdin.drain()
        # Then the chat says so, naming what failed, and nothing ran
        shown = await out.until(lambda text: "Type again to retry" in text, timeout_s=90)
        assert "The session ended as failed: " + SAID in shown
        assert str(data_dir / "gateway") in shown
        assert fake.requests == []
        # When the cause is fixed and the person types again, Then it is answered
        (data_dir / "gateway").unlink()
        chat.stdin.write(b"and now?\n")
        await chat.stdin.drain()
        await out.until(lambda text: "warroom> " in text and "and now?" in text, timeout_s=90)
        chat.stdin.close()
        assert await finish(chat, timeout_s=90) == 0
    assert len(fake.requests) == 1
    asked = json.dumps(fake.requests[0].messages)  # the first question was kept for the retry
    assert "is checkout-api up?" in asked
    assert "and now?" in asked


async def test_serve_tells_the_slack_thread_its_worker_could_not_set_up(
    tmp_path: Path, data_dir: Path
) -> None:
    rules = tmp_path / "egress.yml"
    rules.write_text(RULES)
    app_port = free_port()
    slack = FakeSlackApi()
    await slack.start()
    try:
        async with FakeAnthropicAPI(echo_reply, api_key="fake-key") as model:
            # Given serve in HTTP mode (its worker in the same process), against fake Slack
            env = warroom_env(
                data_dir,
                WARROOM_SLACK_MODE="http",
                SLACK_API_URL=slack.base_url,
                SLACK_BOT_TOKEN=slack.token,
                SLACK_SIGNING_SECRET=SIGNING_SECRET,
                SLACK_HTTP_PORT=str(app_port),
                ANTHROPIC_API_KEY="fake-key",
                ANTHROPIC_BASE_URL=model.base_url,
                WARROOM_EGRESS_RULES=str(rules),
            )
            serve = await start("serve", env=env, cwd=tmp_path)
            try:
                await wait_until_up(f"http://127.0.0.1:{app_port}/healthz")
                # When someone mentions the bot
                said: list[str] = []
                events_url = f"http://127.0.0.1:{app_port}/slack/events"
                mention = _lines("@warroom is checkout-api up?")
                await deliver_lines(slack, events_url, mention, said.append)
                # Then the thread is told why nothing runs, once, and no model was asked
                told = await _bot_says(slack, SAID)
            finally:
                serve.send_signal(signal.SIGTERM)
                code = await finish(serve, timeout_s=90)
            assert model.requests == []
    finally:
        await slack.stop()
    assert said == []
    assert json.dumps(str(data_dir / "gateway"))[1:-1] in told
    assert "warroom doctor" in told
    assert code == 0
    bot_posts = [m for m in slack.state.messages[CHANNEL] if m.get("bot_id")]
    assert len([m for m in bot_posts if SAID in str(m.get("text", ""))]) == 1


def _runs_a_command(request: RecordedRequest) -> Reply:
    """The model: a command first, then an answer quoting what the command printed."""
    last = request.messages[-1].get("content") if request.messages else None
    results = [b for b in last or () if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results:
        return Reply.text(f"The command printed: {results[-1].get('content')}")
    return Reply.tool("Bash", {"command": "echo from-the-jail"})


def _refusing_bwrap(directory: Path, fixed: Path) -> Path:
    """A ``bwrap`` first on ``PATH`` that refuses as bubblewrap does where user namespaces
    are not allowed, until ``fixed`` exists; then it is the real one."""
    real = shutil.which("bwrap")
    assert real is not None
    script = directory / "bwrap"
    script.write_text(
        "#!/bin/sh\n"
        f'[ -e "{fixed}" ] && exec "{real}" "$@"\n'
        "echo 'bwrap: setting up uid map: Permission denied' >&2\n"
        "exit 1\n"
    )
    script.chmod(0o755)
    return directory


async def test_chat_says_why_no_sandbox_starts_and_runs_the_command_once_fixed(
    tmp_path: Path,
) -> None:
    fixed = tmp_path / "fixed"
    (tmp_path / "bin").mkdir()
    bin_dir = _refusing_bwrap(tmp_path / "bin", fixed)
    data_dir = Path(tempfile.mkdtemp(prefix="wr-nosbx-"))
    try:
        async with FakeAnthropicAPI(_runs_a_command, api_key="fake-key") as fake:
            env = warroom_env(
                data_dir,
                ANTHROPIC_API_KEY="fake-key",
                ANTHROPIC_BASE_URL=fake.base_url,
                PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            )
            chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
            assert chat.stdin is not None
            assert chat.stdout is not None
            out = Output(chat.stdout)
            # When the model runs a command and bubblewrap refuses to make the jail
            chat.stdin.write(b"is checkout-api up?\n")
            await chat.stdin.drain()
            # Then the chat says so at once, in bubblewrap's words, and what to do
            shown = await out.until(lambda text: "Type again to retry" in text, timeout_s=90)
            assert "The session ended as failed: " + NO_SANDBOX in shown
            assert "bwrap: setting up uid map: Permission denied" in shown
            assert "warroom doctor" in shown
            assert len(fake.requests) == 1  # not retried: the model was asked once
            # When bubblewrap works again and the person types again
            fixed.touch()
            chat.stdin.write(b"try again\n")
            await chat.stdin.drain()
            # Then the same command runs and is answered, the first question not lost
            answered = "The command printed: from-the-jail"
            await out.until(lambda text: answered in text, timeout_s=90)
            chat.stdin.close()
            assert await finish(chat, timeout_s=90) == 0
        assert len(fake.requests) == 2
        retried = json.dumps(fake.requests[1].messages)
        assert "is checkout-api up?" in retried
        assert "try again" in retried
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


async def test_serve_tells_the_thread_no_sandbox_starts_and_closes_its_status(
    tmp_path: Path,
) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="wr-nosbx-"))
    (data_dir / "sbx").write_text("not a directory\n")  # where jails live: made unusable
    app_port = free_port()
    slack = FakeSlackApi()
    await slack.start()
    try:
        async with FakeAnthropicAPI(_runs_a_command, api_key="fake-key") as model:
            # Given serve in HTTP mode (its worker in the same process), against fake Slack
            env = warroom_env(
                data_dir,
                WARROOM_SLACK_MODE="http",
                WARROOM_AGENT_SURFACE="false",  # the status-message path
                SLACK_API_URL=slack.base_url,
                SLACK_BOT_TOKEN=slack.token,
                SLACK_SIGNING_SECRET=SIGNING_SECRET,
                SLACK_HTTP_PORT=str(app_port),
                ANTHROPIC_API_KEY="fake-key",
                ANTHROPIC_BASE_URL=model.base_url,
            )
            serve = await start("serve", env=env, cwd=tmp_path)
            try:
                await wait_until_up(f"http://127.0.0.1:{app_port}/healthz")
                events_url = f"http://127.0.0.1:{app_port}/slack/events"
                said: list[str] = []
                # When someone mentions the bot and the model runs a command
                mention = _lines("@warroom is checkout-api up?")
                await deliver_lines(slack, events_url, mention, said.append)
                # Then the thread is told why nothing ran, once, at once
                told = await _bot_says(slack, NO_SANDBOX)
                assert str(data_dir / "sbx") in told
                assert "warroom doctor" in told
                assert len(model.requests) == 1
                # and the turn's status message says Failed, with no live Stop button
                await _until(lambda: _statuses(slack) and all(_failed(m) for m in _statuses(slack)))
                # When the directory is fixed and the person replies
                (data_dir / "sbx").unlink()
                await deliver_lines(slack, events_url, _lines("try again"), said.append)
                # Then the same command runs and its answer is posted
                await _bot_says(slack, "The command printed: from-the-jail")
            finally:
                serve.send_signal(signal.SIGTERM)
                code = await finish(serve, timeout_s=90)
    finally:
        await slack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    assert said == []
    assert code == 0
    bot_posts = [m for m in slack.state.messages[CHANNEL] if m.get("bot_id")]
    assert len([m for m in bot_posts if NO_SANDBOX in str(m.get("text", ""))]) == 1


def _statuses(slack: FakeSlackApi) -> list[dict[str, object]]:
    """The bot's status messages in the channel (those of a turn: Working, Finished, …)."""
    return [
        m
        for m in slack.state.messages.get(CHANNEL, [])
        if m.get("bot_id") and any(w in json.dumps(m.get("blocks")) for w in STATES)
    ]


def _failed(message: dict[str, object]) -> bool:
    blocks = json.dumps(message.get("blocks"))
    return "*Failed*" in blocks and "warroom_stop" not in blocks


async def _until(check: Callable[[], object], *, timeout_s: float = 60.0) -> None:
    """Wait until ``check()`` is true (the fake records as it goes; looked at every 0.1 s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not so within {timeout_s} s")
        await asyncio.sleep(0.1)


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def _bot_says(slack: FakeSlackApi, text: str, *, timeout_s: float = 90.0) -> str:
    """The blocks (as JSON) of the first bot message in the channel whose text has
    ``text`` (the fake records posts
    as they come; it has no event to wait on, so it is looked at every 0.1 s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        for message in slack.state.messages.get(CHANNEL, []):
            if message.get("bot_id") and text in str(message.get("text", "")):
                return json.dumps(message.get("blocks"))  # the fallback text is cut short
        await asyncio.sleep(0.1)
    raise AssertionError(f"the bot never said {text!r}: {slack.state.messages.get(CHANNEL)}")
