"""``warroom chat`` as a person uses it: on a terminal (a pty) or a pipe, against the fake
Messages API, the real harness, store, worker and jails."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from tests.bot.cli.pty_support import CTRL_D, ENTER, PtyCommand
from tests.bot.cli_support import Output, finish, start, warroom_env

READY = "end with Ctrl-D."  # the banner: printed once the prompt takes input
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "app.py", line 3, in <module>\n'
    "psycopg.OperationalError: connection pool exhausted"
)

pytestmark = pytest.mark.slow


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory with a short path (jail sockets live under it)."""
    path = Path(tempfile.mkdtemp(prefix="wr-chat-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def user_texts(request: RecordedRequest) -> list[str]:
    """The text blocks of the request's last user message."""
    content = request.messages[-1]["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if b.get("type") == "text"]


def counter(request: RecordedRequest) -> Reply:
    return Reply.text(f"Answer {sum(1 for m in request.messages if m['role'] == 'user')}.")


async def test_a_long_line_and_a_pasted_stack_trace_are_each_one_whole_message(
    tmp_path: Path, data_dir: Path
) -> None:
    async with FakeAnthropicAPI(counter, api_key="fake-key") as fake:
        env = warroom_env(data_dir, ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url)
        chat = await PtyCommand.start("chat", env=env, cwd=tmp_path)
        try:
            await chat.until(lambda text: READY in text)
            # When a line longer than the terminal's 4,095-character line is typed
            await chat.type(b"x" * 5000 + ENTER)
            await chat.until(lambda text: "warroom> Answer 1." in text)
            # and a three-line stack trace is pasted, then sent
            await chat.paste(TRACE)
            await chat.type(ENTER)
            await chat.until(lambda text: "warroom> Answer 2." in text)
            await chat.type(CTRL_D)
            assert await chat.finish() == 0
        finally:
            chat.close()
    # Then the model got the whole line, and the whole trace as one message: two turns
    first, second = fake.requests
    assert any("x" * 5000 in text for text in user_texts(first))
    assert next(t for t in user_texts(second) if "Traceback" in t).endswith(TRACE)


LONG_ANSWER = "".join(f"Line {n} of a long answer.\n" for n in range(12_000))  # ~300 KB


async def test_ctrl_d_typed_while_a_long_answer_is_printed_ends_the_chat(
    tmp_path: Path, data_dir: Path
) -> None:
    async with FakeAnthropicAPI(lambda _: Reply.text(LONG_ANSWER), api_key="fake-key") as fake:
        env = warroom_env(data_dir, ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url)
        chat = await PtyCommand.start("chat", env=env, cwd=tmp_path)
        try:
            await chat.until(lambda text: READY in text)
            await chat.type(b"what happened?" + ENTER)
            # When the terminal shows nothing for a while (a slow link, a paused screen):
            # the answer (far more than the pty holds) is printed until its write blocks
            chat.pause()
            await _until(lambda: chat.unread() >= 3_000)
            # and Ctrl-D is typed meanwhile, then the screen catches up
            await chat.type(CTRL_D)
            chat.resume()
            # Then the whole answer is shown and the chat ends (the key was read as typed:
            # while the terminal was in canonical mode, Ctrl-D became a NUL byte)
            assert await chat.finish(timeout_s=60) == 0
        finally:
            chat.close()
    assert "Line 11999 of a long answer." in chat.text
    assert len(fake.requests) == 1


async def _until(condition: Callable[[], bool], *, timeout_s: float = 60.0) -> None:
    """Poll ``condition`` (a state of the pty no event tells) every 10 ms until it holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not so within {timeout_s} s"
        await asyncio.sleep(0.01)


def restarter(request: RecordedRequest) -> Reply:
    command = "systemctl restart payments; echo restarted >> /workspace/effects.log"
    return Reply.tool("Bash", {"command": command, "description": "Restart payments"})


async def test_approve_with_nothing_waiting_is_refused_and_ctrl_d_during_an_approval_stops_it(
    tmp_path: Path, data_dir: Path
) -> None:
    async with FakeAnthropicAPI(restarter, api_key="fake-key") as fake:
        env = warroom_env(data_dir, ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url)
        chat = await PtyCommand.start("chat", env=env, cwd=tmp_path)
        try:
            await chat.until(lambda text: READY in text)
            # When `approve` is typed with nothing waiting, the chat says so and sends nothing
            await chat.type(b"approve" + ENTER)
            said = await chat.until(lambda text: "Nothing is waiting" in text or "…" in text)
            assert "Nothing is waiting for approval" in said
            assert fake.requests == []
            # When the agent waits for an approval and the person presses Ctrl-D
            await chat.type(b"payments is stuck, restart it" + ENTER)
            await chat.until(lambda text: "Type `approve` to run it" in text)
            await chat.type(CTRL_D)
            code = await chat.finish()
        finally:
            chat.close()
    # Then the chat says the command was not run, and it was not; the model was asked once
    assert code == 0
    assert "`systemctl restart payments; echo restarted" in chat.text
    assert "was not run; the approval is settled as stopped" in chat.text
    assert len(fake.requests) == 1


def delegator(request: RecordedRequest) -> Reply:
    """A blocked command, a one-second command, a subagent (which runs a one-second
    command too), then an answer."""
    everything = json.dumps(request.messages)
    if "SUBTASK" in json.dumps(request.messages[0]):
        if "pods-ok" in everything:
            return Reply.text("pods: healthy")
        return Reply.tool("Bash", {"command": "sleep 1; echo pods-ok", "description": "Pods"})
    if "pods: healthy" in everything:
        return Reply.text("All checked.")
    if "waited" in everything:
        prompt = "SUBTASK: check the pods, answer in one line."
        return Reply.tool("Agent", {"description": "Check pods", "prompt": prompt})
    if "tool_result" in everything:
        return Reply.tool("Bash", {"command": "sleep 1; echo waited", "description": "Wait"})
    return Reply.tool("Bash", {"command": "kubectl create token admin", "description": "Token"})


@pytest.mark.bwrap
async def test_chat_shows_blocked_calls_real_durations_and_a_subagent_done_only_when_it_is(
    tmp_path: Path, data_dir: Path
) -> None:
    async with FakeAnthropicAPI(delegator, api_key="fake-key") as fake:
        env = warroom_env(data_dir, ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url)
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        chat.stdin.write(b"are the pods fine?\n")
        await out.until(lambda text: "warroom> All checked." in text)
        chat.stdin.close()
        assert await finish(chat) == 0
    text = out.text
    # A call the policy blocked has its line, with why
    assert "⛔ Blocked (not run): kubectl create token admin" in text
    # A command's time is its own: the one-second command took a second or more
    took = re.search(r"✓ Running `Bash: Wait` \((\d+\.\d) s\)", text)
    assert took is not None, text
    assert float(took.group(1)) >= 1.0
    # The subagent is shown started, and done only once its answer is in, after its command
    started = text.index("→ Agent: Check pods: started; it works on")
    child_command = text.index("→ Running `Bash: Pods`")
    done = re.search(r"✓ Agent: Check pods \((\d+\.\d) s\)", text)
    assert done is not None, text
    assert started < child_command < done.start()
    assert float(done.group(1)) >= 1.0
    assert "✓ Agent (" not in text
    assert len([r for r in fake.requests if "SUBTASK" not in json.dumps(r.messages[0])]) == 4


async def test_chat_says_at_start_that_a_configured_mcp_server_is_down(
    tmp_path: Path, data_dir: Path
) -> None:
    config = tmp_path / "mcp.json"
    broken = {"command": "sh", "args": ["-c", "echo 'grafana: bad token' >&2; exit 3"]}
    config.write_text(json.dumps({"mcpServers": {"grafana": broken}}))
    env = warroom_env(
        data_dir,
        ANTHROPIC_API_KEY="fake-key",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
        WARROOM_MCP_CONFIG=str(config),
    )
    chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
    assert chat.stdin is not None
    assert chat.stdout is not None
    out = Output(chat.stdout)
    # Before anything is typed, the chat says the server is down, and why
    shown = await out.until(lambda text: "! MCP server grafana: down" in text)
    chat.stdin.close()
    assert await finish(chat) == 0
    line = next(line for line in shown.splitlines() if "MCP server grafana" in line)
    assert "bad token" in line
    assert "its tools are not offered until it comes back" in line


async def test_ctrl_c_on_a_terminal_takes_the_clean_up_path_and_exits_130(
    tmp_path: Path, data_dir: Path
) -> None:
    env = warroom_env(
        data_dir, ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL="http://127.0.0.1:9"
    )
    chat = await PtyCommand.start("chat", env=env, cwd=tmp_path)
    try:
        await chat.until(lambda text: READY in text)
        # (the line editor holds the terminal in raw mode: Ctrl-C arrives as a key)
        await chat.type(b"\x03")
        assert await chat.finish() == 130
    finally:
        chat.close()
    assert "Traceback" not in chat.text
