"""``warroom chat``: a terminal thread against the real harness, store and in-process worker,
with the fake Messages API standing in for Claude."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.app import app
from bot.fakes.anthropic_api import FakeAnthropicAPI, Fault, RecordedRequest, Reply
from bot.fakes.anthropic_script import echo_reply
from harness import Checkpoint, Requester
from memory_store import Database, SessionKey, SessionOrigin, SessionStore
from sandbox_client import LocalConfig, LocalProvider
from tests.bot.cli_support import Output, finish, start, warroom_env

TODOS = [
    {"content": "Check the pods", "status": "in_progress", "activeForm": "Checking the pods"},
    {"content": "Check the last deploy", "status": "pending", "activeForm": "Checking the deploy"},
]


def user_texts(request: RecordedRequest) -> str:
    """Every user-side text of a request, as one string."""
    return json.dumps([m for m in request.messages if m.get("role") == "user"])


def investigator(request: RecordedRequest) -> Reply:
    """Keep working (TodoWrite) until steered towards the database; answer after that."""
    said = user_texts(request)
    if "thanks" in said:
        return Reply.text("You are welcome.")
    if "database" in said:
        return Reply.text("Steered: the database pool is exhausted.")
    return Reply.tool("TodoWrite", {"todos": TODOS}, text="Looking.")


@pytest.mark.slow
async def test_chat_prints_progress_and_answers_and_lines_typed_while_it_works_steer_it(
    tmp_path: Path,
) -> None:
    async with FakeAnthropicAPI(investigator, api_key="fake-key") as fake:
        env = warroom_env(
            tmp_path / "data", ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url
        )
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)

        # Given an incident reported in the chat, and the agent working on it
        chat.stdin.write(b"checkout-api returns 500s since 14:02\n")
        await out.until(lambda text: "▸ Check the pods" in text)

        # When a line is typed while it works
        chat.stdin.write(b"ignore the cache, check the database\n")

        # Then the model is steered by it and the answer is printed
        await out.until(lambda text: "warroom> Steered: the database pool" in text)

        # And a line typed after the answer starts the next turn
        chat.stdin.write(b"thanks\n")
        await out.until(lambda text: "warroom> You are welcome." in text)
        chat.stdin.close()
        assert await finish(chat) == 0

    assert "→ " in out.text  # the TodoWrite calls were shown as they ran
    assert "☐ Check the last deploy" in out.text
    assert "checkout-api returns 500s" in user_texts(fake.requests[0])
    assert out.text.count("warroom> ") == 2


def test_chat_without_an_anthropic_key_exits_2_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    env = {"ANTHROPIC_API_KEY": None, "WARROOM_DATA_DIR": str(tmp_path / "data")}

    result = CliRunner().invoke(app, ["chat"], env=env, input="hello\n")

    assert result.exit_code == 2
    assert "ANTHROPIC_API_KEY is not set" in result.output


@pytest.mark.slow
async def test_chat_reads_invalid_utf8_with_replacement_characters(tmp_path: Path) -> None:
    async with FakeAnthropicAPI(echo_reply, api_key="fake-key") as fake:
        env = warroom_env(
            tmp_path / "data", ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url
        )
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        stdout, stderr = await asyncio.wait_for(chat.communicate(b"\xff\xfe pods down\n"), 60)

    assert chat.returncode == 0, stderr.decode()
    assert "\ufffd\ufffd pods down" in user_texts(fake.requests[0]).encode().decode(
        "unicode_escape"
    )
    assert "warroom> " in stdout.decode()


def gone_after(*replies: Reply) -> Callable[[RecordedRequest], Reply | Fault]:
    """A model API that serves ``replies``, then answers 500 to every request after."""
    queue = list(replies)

    def script(request: RecordedRequest) -> Reply | Fault:
        return queue.pop(0) if queue else Fault.status(500)

    return script


@pytest.mark.slow
async def test_a_failed_session_exits_1_with_its_reason_and_leaves_no_sandbox_running(
    tmp_path: Path,
) -> None:
    # Given a model that runs a Bash command, then is gone (it answers 500 to every retry)
    bash = Reply.tool("Bash", {"command": "echo hi", "description": "say hi"})
    async with FakeAnthropicAPI(gone_after(bash), api_key="fake-key") as fake:
        env = warroom_env(
            tmp_path / "data", ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url
        )
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        stdout, stderr = await asyncio.wait_for(chat.communicate(b"the site is down\n"), 150)

    # Then the chat exits 1 saying why, without library tracebacks
    assert chat.returncode == 1
    assert "→ Running `Bash: say hi`" in stdout.decode()
    assert "The session ended as failed: ModelUnavailable" in stdout.decode()
    assert "HTTP 500" in stdout.decode()
    assert "Traceback" not in stderr.decode()
    # And the sandbox its Bash command ran in is gone
    state_dir = tmp_path / "data" / "sbx"
    provider = LocalProvider(LocalConfig(state_dir=state_dir))
    jails = [d.name for d in state_dir.iterdir() if d.name.startswith("sbx-")]
    assert [j for j in jails if provider.find(j) is not None] == []
    assert "Traceback" in (tmp_path / "data" / "chat.log").read_text()


@pytest.mark.slow
async def test_a_failed_session_is_reported_while_the_user_can_still_type(tmp_path: Path) -> None:
    # Given a model that is gone from the start, and a user who keeps the chat open
    async with FakeAnthropicAPI(gone_after(), api_key="fake-key") as fake:
        env = warroom_env(
            tmp_path / "data", ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url
        )
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        chat.stdin.write(b"the site is down\n")
        await chat.stdin.drain()
        seen = b""

        async def until_reported() -> None:
            nonlocal seen
            while b"Type again to retry" not in seen:
                chunk = await chat.stdout.read(4096)  # type: ignore[union-attr]
                assert chunk, "the chat ended without saying the session failed"
                seen += chunk

        # When the session fails, Then the chat says so at once, with stdin still open
        await asyncio.wait_for(until_reported(), 90)
        assert chat.returncode is None
        assert b"The session ended as failed" in seen
        chat.stdin.close()
        await asyncio.wait_for(chat.wait(), 60)

    assert chat.returncode == 1


async def _leave_runnable(data_dir: Path, key: SessionKey, text: str, origin: SessionOrigin) -> str:
    """A session left runnable in the chat's database, as a killed process leaves it."""
    db = Database.from_url(None, data_dir=data_dir)
    try:
        await db.migrate()
        session_id = uuid.uuid4().hex
        checkpoint = Checkpoint(session_id, key.org_id, key.channel_id, Requester("U1", "x"))
        opened = await SessionStore(db).open_or_join(
            key,
            requester_id="U1",
            initial_checkpoint=checkpoint.to_json(),
            text=text,
            source_ts="1.1",
            session_id=session_id,
            origin=origin,
        )
        return opened.session_id
    finally:
        await db.dispose()


async def _epoch(data_dir: Path, session_id: str) -> int:
    db = Database.from_url(None, data_dir=data_dir)
    try:
        session = await SessionStore(db).get(session_id)
        assert session is not None
        return session.epoch
    finally:
        await db.dispose()


async def test_chat_answers_only_its_own_session_never_a_slack_one_or_an_old_chats(
    tmp_path: Path,
) -> None:
    # Given, on the same database, a Slack thread's session and an interrupted chat's
    # session, both left runnable
    data_dir = tmp_path / "data"
    slack_id = await _leave_runnable(
        data_dir, SessionKey("T1", "C1", "1.000100"), "slack question", SessionOrigin.SLACK
    )
    old_id = await _leave_runnable(
        data_dir, SessionKey("local", "chat", "2.000100"), "old chat question", SessionOrigin.CHAT
    )
    async with FakeAnthropicAPI(echo_reply, api_key="fake-key") as fake:
        env = warroom_env(data_dir, ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url)
        # When a new chat is asked a question
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        stdout, stderr = await asyncio.wait_for(chat.communicate(b"new question\n"), 60)

    # Then it answers that question only, and neither other session was touched
    assert chat.returncode == 0, stderr.decode()
    asked = " ".join(user_texts(r) for r in fake.requests)
    assert "new question" in asked
    assert "slack question" not in asked
    assert "old chat question" not in asked
    assert stdout.decode().count("warroom> ") == 1
    assert await _epoch(data_dir, slack_id) == 0
    assert await _epoch(data_dir, old_id) == 0


GATED = (
    "while [ ! -f go ]; do sleep 0.1; done; "
    "printf 'pods: 3 running\\npods: 1 crashloop\\n"
    "\\033]0;pwned\\007\\033]52;c;ZXZpbA==\\007\\033[2J'"
)


def gated_investigator(request: RecordedRequest) -> Reply:
    """Run one gated command (it waits for a file ``go``), then answer."""
    if "tool_result" in json.dumps(request.messages):
        return Reply.text("Done: one pod crashloops.")
    bash = {"command": GATED, "description": "list pods"}
    return Reply.tool("Bash", bash, text="Checking the pods.\x1b[31m now")


async def test_chat_shows_a_command_while_it_runs_then_its_time_and_output_without_controls(
    tmp_path: Path,
) -> None:
    async with FakeAnthropicAPI(gated_investigator, api_key="fake-key") as fake:
        env = warroom_env(
            tmp_path / "data", ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url
        )
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        chat.stdin.write(b"are the pods fine?\n")
        await chat.stdin.drain()

        # When the agent's command has started (and waits)
        await out.until(lambda text: "→ Running `Bash: list pods`" in text)
        # Then the chat has said so while it runs, with the model's interim text and
        # how long it has been running
        await out.until(lambda text: "… still running (10 s)" in text, timeout_s=60)
        shown_while_running = out.text
        # And once the command ends, its time and the head of its output follow
        for handle_file in (tmp_path / "data" / "sbx").glob("*/handle.json"):
            # /workspace is a tmpfs inside the jail: reach it through the jail's root
            pid = json.loads(handle_file.read_text())["pid"]
            (Path(f"/proc/{pid}/root/workspace") / "go").write_text("")
        await out.until(lambda text: "warroom> Done: one pod crashloops." in text)
        chat.stdin.close()
        assert await finish(chat) == 0

    assert "… thinking" in shown_while_running
    # (on current models the text between tool calls arrives as a thinking summary)
    assert "… Checking the pods.[31m now" in shown_while_running
    assert "✓ Running" not in shown_while_running
    assert re.search(r"✓ Running `Bash: list pods` \(\d+\.\d s\)", out.text)
    assert "│ pods: 3 running\n" in out.text
    assert "│ pods: 1 crashloop\n" in out.text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out.text)
    assert "]0;pwned" in out.text  # shown as text, no longer a terminal command


def restarter(request: RecordedRequest) -> Reply:
    """Ask to restart a service (a change: it needs approval), then say what came back."""
    turns = sum(1 for m in request.messages if m.get("role") == "assistant")
    if turns == 0:
        command = "systemctl restart payments 2>/dev/null; echo restarted-once"
        return Reply.tool("Bash", {"command": command, "description": "Restart payments"})
    results = [
        block
        for m in request.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]
    content = results[-1]["content"] if results else ""
    return Reply.text(f"Result: {json.dumps(content)[:200]}")


@pytest.mark.slow
@pytest.mark.bwrap
@pytest.mark.parametrize(
    ("decision", "shown"), [("approve", "restarted-once"), ("deny", "rejected")]
)
async def test_chat_asks_before_a_change_and_the_person_decides_by_typing(
    tmp_path: Path, decision: str, shown: str
) -> None:
    async with FakeAnthropicAPI(restarter, api_key="fake-key") as fake:
        env = warroom_env(
            tmp_path / "data", ANTHROPIC_API_KEY="fake-key", ANTHROPIC_BASE_URL=fake.base_url
        )
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        # Given a request that leads the agent to a change
        chat.stdin.write(b"payments is stuck, restart it\n")
        # Then it asks first, with the exact command
        await out.until(lambda text: "Type `approve` to run it" in text)
        assert "systemctl restart payments" in out.text
        assert len(fake.requests) == 1  # waiting: the model is not asked again
        # When the person types their decision
        chat.stdin.write(f"{decision}\n".encode())
        await out.until(lambda text: "warroom> Result:" in text)
        chat.stdin.close()
        assert await finish(chat) == 0
    assert shown in out.text.split("warroom> Result:")[1]


@pytest.mark.slow
async def test_chat_says_at_once_that_the_model_api_cannot_be_reached(tmp_path: Path) -> None:
    # Given a chat pointed at a model API nothing listens on
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]  # bound, not listening: connections are refused
    env = warroom_env(
        tmp_path / "data",
        ANTHROPIC_API_KEY="fake-key",
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
    )
    try:
        chat = await start("chat", env=env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        # Then, before anything is typed (no minute of retries first), it names the host
        shown = await out.until(lambda text: "cannot reach the model API" in text)
        chat.stdin.close()
        assert await finish(chat) == 0
    finally:
        holder.close()
    line = next(line for line in shown.splitlines() if "cannot reach the model API" in line)
    assert f"127.0.0.1:{port}" in line
    assert "refused" in line
    assert "ANTHROPIC_BASE_URL" in line
