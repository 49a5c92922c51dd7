"""A worker that cannot set itself up at a step (what start-up could not foresee) says so in
the thread, fails the session at once (no retries as crashes), and works again once the
cause is fixed and the person writes again (issue #26, item 1)."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.cli.fake_slack import CHANNEL, SIGNING_SECRET, deliver_lines
from bot.fakes.anthropic_api import FakeAnthropicAPI
from bot.fakes.anthropic_script import echo_reply
from bot.fakes.slack_api import FakeSlackApi
from tests.bot.cli.test_app import free_port, wait_until_up
from tests.bot.cli_support import Output, finish, start, warroom_env

pytestmark = pytest.mark.slow

SAID = "The worker could not set itself up to work on this"
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
