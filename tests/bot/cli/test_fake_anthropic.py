"""``warroom fake-anthropic`` as a person uses it: a script that runs out says so once, as a
permanent error (no retries); each reply served is printed, a compaction's named; a script
that is not UTF-8 is refused in one line."""

from __future__ import annotations

import functools
import json
import shutil
import signal
import tempfile
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from bot.cli.app import app
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest
from bot.fakes.anthropic_script import COMPACTION_MARK, ScriptPlayer, script_from_json
from tests.bot.cli_support import Output, finish, start, warroom_env
from tests.ports import free_port

MESSAGES = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def body(text: str) -> dict[str, object]:
    return {
        "model": "claude-sonnet-5-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }


async def chat_with_script(
    tmp_path: Path,
    replies: list[dict[str, object]],
    until: str,
    questions: tuple[str, ...] = ("is checkout up?",),
) -> tuple[str, str]:
    """What ``warroom chat`` printed for ``questions`` (each through its turn's usage line,
    the turn's last) and what ``warroom fake-anthropic`` printed, playing ``replies``
    (``until``: the fake's line to wait for before it stops)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(replies))
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="wr-fa-"))  # short: sandbox socket paths < 108 bytes
    env = warroom_env(data)
    fake = await start(
        "fake-anthropic", "--port", str(port), "--script", str(script), env=env, cwd=tmp_path
    )
    assert fake.stdout is not None
    said = Output(fake.stdout)
    await said.until(lambda text: f"http://127.0.0.1:{port}" in text)
    try:
        chat_env = env | {
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
            "ANTHROPIC_API_KEY": "fake",
        }
        chat = await start("chat", env=chat_env, cwd=tmp_path, stdin=True)
        assert chat.stdin is not None
        assert chat.stdout is not None
        out = Output(chat.stdout)
        for n, question in enumerate(questions):
            chat.stdin.write(f"{question}\n".encode())
            await out.until(functools.partial(_turns_shown_over, n))  # each answer's last line
        chat.stdin.close()
        await finish(chat)
        await said.until(lambda text: until in text)
    finally:
        fake.send_signal(signal.SIGTERM)
        await finish(fake)
        shutil.rmtree(data, ignore_errors=True)
    return out.text, said.text


@pytest.mark.slow
async def test_a_chat_whose_script_ran_out_is_told_so_once_and_the_fake_is_not_retried(
    tmp_path: Path,
) -> None:
    # Given the fake Messages API with a one-reply script (a command to run)
    # When a chat asks it twice (the question, then the command's result)
    out, said = await chat_with_script(
        tmp_path, [{"tool": "Bash", "input": {"command": "true"}}], until="the script ran out"
    )

    # Then the chat shows why, once (as its answer, not also as a notice before it), as a
    # refusal that is not retried
    assert out.count("script ran out") == 1, out
    assert "unavailable" not in out
    # and the fake saw one request for the reply and one for the error: no retry
    assert said.count("reply 1 of 1") == 1
    assert said.count("the script ran out (1 replies): answering 400 from now on") == 1


@pytest.mark.slow
async def test_a_chat_shows_a_refusal_once(tmp_path: Path) -> None:
    # Given a model that declines the request (the turn ends with the refusal as its answer)
    refusal: dict[str, object] = {"refusal": {"category": "cyber", "explanation": "Not this one."}}

    # When a chat asks it
    out, _ = await chat_with_script(tmp_path, [refusal], until="reply 1 of 1")

    # Then the refusal is printed once, as the answer
    assert out.count("The model declined to continue") == 1, out
    assert "warroom> The model declined to continue with this request (cyber)" in out


async def test_a_script_that_ran_out_answers_a_permanent_400_saying_so() -> None:
    async with FakeAnthropicAPI([]) as fake, httpx.AsyncClient(base_url=fake.base_url) as http:
        response = await http.post("/v1/messages", headers=MESSAGES, json=body("hi"))

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "the script ran out: its 0 replies were all served" in error["message"]
    assert "retry-after" not in response.headers


def test_the_player_names_a_compaction_that_takes_a_reply() -> None:
    said: list[str] = []
    player = ScriptPlayer(script_from_json('[{"text": "a"}, {"text": "summary"}]'), said.append)

    player(RecordedRequest(b"", body("why is checkout down?"), {}))
    player(RecordedRequest(b"", body(f"The conversation {COMPACTION_MARK}. Summarise."), {}))

    assert said == [
        "request: reply 1 of 2",
        "request (a compaction: the harness asks for a summary): reply 2 of 2",
    ]


def test_the_compaction_mark_is_in_the_harness_summary_request() -> None:
    from harness.loop.turn import SUMMARY_REQUEST

    assert COMPACTION_MARK in SUMMARY_REQUEST


def test_a_script_that_is_not_utf8_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "replies.json"
    script.write_bytes('[{"text": "caf\u00e9"}]\n'.encode("latin-1"))

    result = CliRunner().invoke(app, ["fake-anthropic", "--script", str(script)])

    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)  # not a traceback
    assert result.output.strip() == (
        f"cannot use the script {script}: not UTF-8 text: byte 0xe9 at line 1 (offset 14); "
        "save the file as UTF-8"
    )


@pytest.mark.slow
async def test_a_request_refused_after_the_first_answer_is_told_in_the_chat(
    tmp_path: Path,
) -> None:
    # Given a model that answers, then refuses a request for good (HTTP 400), then answers
    replies: list[dict[str, object]] = [
        {"text": "first answer"},
        {"status": 400},
        {"text": "third answer"},
    ]
    # When a person asks three times in one session
    out, _ = await chat_with_script(
        tmp_path, replies, until="reply 3 of 3", questions=("one", "two", "three")
    )
    # Then each turn shows its answer: the refusal of the second is said, not lost
    turns = out.split("so far in this thread")
    for n, shown in enumerate(["first answer", "refused this request", "third answer"]):
        assert shown in turns[n], out


@pytest.mark.slow
async def test_a_request_refused_after_a_tool_result_does_not_say_a_message_was_dropped(
    tmp_path: Path,
) -> None:
    # Given a model that asks for a command, then refuses the request carrying its result
    replies: list[dict[str, object]] = [
        {"tool": "Bash", "input": {"command": "true"}},
        {"status": 400},
    ]
    # When a chat asks it once
    out, _ = await chat_with_script(tmp_path, replies, until="reply 2 of 2")
    # Then the refusal is told, without claiming the person's message was not given
    assert "refused this request" in out, out
    assert "was not given to the model" not in out, out


def _turns_shown_over(n: int, text: str) -> bool:
    """Whether the chat printed more than ``n`` turns' usage lines (each turn's last)."""
    return text.count("so far in this thread") > n
