"""A thread reply posts one status message per turn at most, never one below its answer, and
leaves an earlier turn's final status as it was (issue #26's second new-user trial: a reply
posted extra status messages). Through ``warroom serve`` against the fake Slack, on the
status-message path (Slack's agent surface off)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cli.fake_slack import CHANNEL, SIGNING_SECRET, deliver_lines
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.fakes.slack_api import FakeSlackApi
from tests.bot.cli.test_app import wait_until_up
from tests.bot.cli_support import finish, start, warroom_env
from tests.ports import free_port

pytestmark = pytest.mark.slow

STATES = ("*Working*", "*Failed*", "*Finished*")
Say = Callable[[str], Awaitable[None]]


def _model(request: RecordedRequest) -> Reply:
    """A command for a request saying ``run``, then an answer quoting its output; any
    other message is answered at once."""
    content = request.messages[-1].get("content") if request.messages else None
    blocks = [b for b in content or () if isinstance(b, dict)]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        return Reply.text(f"The command printed {results[-1].get('content')}.")
    said = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    if "run " in said:
        return Reply.tool("Bash", {"command": said.split("run ", 1)[1].split("\n")[0]})
    return Reply.text("Answered at once.")


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory with a short path (jail sockets live under it)."""
    path = Path(tempfile.mkdtemp(prefix="wr-status-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_a_reply_to_an_idle_session_posts_its_answer_and_no_status_message(
    data_dir: Path,
) -> None:
    async with _serving(data_dir) as (slack, say):
        # Given a session that ran a command and answered (its turn has a status message)
        await say("@warroom run echo 42")
        await _until(lambda: _bot(slack, "The command printed 42."))
        await _until(lambda: all(_final(m) for m in _statuses(slack)))
        # When someone replies and the session answers at its first step
        await say("thanks, anything else?")
        await _until(lambda: _bot(slack, "Answered at once."))
    # Then the reply got its answer and nothing else: no status message below it, and the
    # first turn's status still says it finished (not "continued below")
    statuses = _statuses(slack)
    assert len(statuses) == 1, statuses
    assert _final(statuses[0])
    assert "continued" not in json.dumps(statuses[0].get("blocks"))
    assert _bot_posts(slack)[-1]["text"].startswith("Answered at once.")


async def test_a_reply_while_a_command_runs_leaves_one_status_message_finished(
    data_dir: Path,
) -> None:
    async with _serving(data_dir) as (slack, say):
        # Given a session running a command (its status message posted as it began)
        await say("@warroom run sleep 5; echo slept")
        await _until(lambda: _statuses(slack))
        # When someone replies while it runs, and the session then answers
        await say("also, is the database fine?")
        await _until(lambda: _bot(slack, "The command printed slept."))
    # Then the thread has one status message, finished, with no live Stop button
    statuses = _statuses(slack)
    assert len(statuses) == 1, statuses
    assert _final(statuses[0])


class _Channel:
    """The fake Slack's channel, typed in line by line as ``warroom fake-slack`` does."""

    def __init__(self, slack: FakeSlackApi, events_url: str) -> None:
        self.slack = slack
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._said: list[str] = []
        self._player = asyncio.create_task(
            deliver_lines(slack, events_url, self._typed(), self._said.append)
        )
        self._delivered = 0

    async def _typed(self) -> AsyncIterator[str]:
        while (line := await self._lines.get()) is not None:
            yield line

    async def say(self, line: str) -> None:
        """Type ``line`` (one player: a line after the first replies in its thread)."""
        before = len(self.slack.state.messages.get(CHANNEL, []))
        await self._lines.put(line)
        await _until(lambda: len(self.slack.state.messages.get(CHANNEL, [])) > before)
        assert self._said == [], self._said

    async def close(self) -> None:
        await self._lines.put(None)
        await self._player


@contextlib.asynccontextmanager
async def _serving(data_dir: Path) -> AsyncIterator[tuple[FakeSlackApi, Say]]:
    """``warroom serve`` in HTTP mode (its worker in the same process) against the fake
    Slack, on the status-message path; stopped with SIGTERM when the block ends (it then
    sends the status views it holds, so the thread is as shown for good)."""
    app_port = free_port()
    slack = FakeSlackApi()
    await slack.start()
    try:
        async with FakeAnthropicAPI(_model, api_key="fake-key") as model:
            env = warroom_env(
                data_dir,
                WARROOM_SLACK_MODE="http",
                WARROOM_AGENT_SURFACE="false",
                SLACK_API_URL=slack.base_url,
                SLACK_BOT_TOKEN=slack.token,
                SLACK_SIGNING_SECRET=SIGNING_SECRET,
                SLACK_HTTP_PORT=str(app_port),
                ANTHROPIC_API_KEY="fake-key",
                ANTHROPIC_BASE_URL=model.base_url,
            )
            serve = await start("serve", env=env, cwd=data_dir)
            try:
                await wait_until_up(f"http://127.0.0.1:{app_port}/healthz")
                channel = _Channel(slack, f"http://127.0.0.1:{app_port}/slack/events")
                try:
                    yield slack, channel.say
                finally:
                    await channel.close()
            finally:
                serve.send_signal(signal.SIGTERM)
                assert await finish(serve, timeout_s=90) == 0
    finally:
        await slack.stop()


def _bot_posts(slack: FakeSlackApi) -> list[dict[str, Any]]:
    return [m for m in slack.state.messages.get(CHANNEL, []) if m.get("bot_id")]


def _bot(slack: FakeSlackApi, text: str) -> bool:
    return any(str(m.get("text", "")).startswith(text) for m in _bot_posts(slack))


def _statuses(slack: FakeSlackApi) -> list[dict[str, Any]]:
    """The turns' status messages (Working, Finished, Failed)."""
    return [m for m in _bot_posts(slack) if any(s in json.dumps(m.get("blocks")) for s in STATES)]


def _final(message: dict[str, Any]) -> bool:
    blocks = json.dumps(message.get("blocks"))
    return "*Finished*" in blocks and "warroom_stop" not in blocks


async def _until(check: Callable[[], object], *, timeout_s: float = 90.0) -> None:
    """Wait until ``check()`` is true (the fake records as it goes; looked at every 0.1 s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not so within {timeout_s} s")
        await asyncio.sleep(0.1)
