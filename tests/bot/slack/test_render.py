"""Rendering for Slack: answers within Slack's limits, the status message, failure notices."""

from __future__ import annotations

import doctest
import re

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import poster, render
from bot.slack.render import (
    FileAnswer,
    InlineAnswer,
    Progress,
    SlackMessage,
    render_answer,
    render_model_unavailable,
    render_sandbox_replaced,
    render_session_failed,
    render_status,
    render_step_cap,
    split_markdown,
)
from bot.slack.skills import command as skills_command
from bot.slack.skills import edit_policy
from bot.slack.skills import editor as skill_editor
from harness import Todo, TodoStatus
from tests.fakes.slack_api import FakeSlackApi

PARAGRAPH = "The checkout pods restarted at 14:02 after the deploy of v1.4; " * 20  # ~1,300 chars


def paragraphs(count: int) -> str:
    return "\n\n".join(f"{i}. {PARAGRAPH}" for i in range(count))


def markdown_blocks(message: SlackMessage) -> list[str]:
    return [block["text"] for block in message.blocks if block["type"] == "markdown"]


def section_texts(message: SlackMessage) -> list[str]:
    return [block["text"]["text"] for block in message.blocks if block["type"] == "section"]


def balanced_fences(text: str) -> bool:
    return len(re.findall(r"^```", text, flags=re.MULTILINE)) % 2 == 0


def test_short_answer_is_one_message_with_one_markdown_block() -> None:
    answer = render_answer("**Root cause:** the DB pool is exhausted.\n\n- raise `max_conn`")

    assert isinstance(answer, InlineAnswer)
    (message,) = answer.messages
    assert markdown_blocks(message) == [
        "**Root cause:** the DB pool is exhausted.\n\n- raise `max_conn`"
    ]
    assert message.text == "Root cause: the DB pool is exhausted."


def test_a_cited_entry_links_to_its_message_in_the_block_and_in_the_notification_text() -> None:
    link = "https://acme.slack.com/archives/C1/p1796100000000100"
    answer = render_answer(f"**Reported** at 14:02 [[T1]({link})].")

    assert isinstance(answer, InlineAnswer)
    (message,) = answer.messages
    assert markdown_blocks(message) == [f"**Reported** at 14:02 [[T1]({link})]."]
    assert message.text == f"Reported at 14:02 [<{link}|T1>]."


def test_long_answer_is_split_at_paragraphs_into_blocks_of_at_most_12000_chars() -> None:
    text = paragraphs(25)  # ~33,000 chars

    answer = render_answer(text)

    assert isinstance(answer, InlineAnswer)
    assert len(answer.messages) == 3
    chunks = [markdown_blocks(m)[0] for m in answer.messages]
    assert all(len(chunk) <= 12_000 for chunk in chunks)
    assert all(len(m.blocks) == 1 for m in answer.messages)
    assert "\n\n".join(chunks) == text  # cut only between paragraphs
    assert [m.text[-5:] for m in answer.messages] == ["(1/3)", "(2/3)", "(3/3)"]


def test_code_block_that_fits_is_moved_whole_to_the_next_message() -> None:
    code = "```\n" + "\n".join(f"pod-{i} CrashLoopBackOff" for i in range(200)) + "\n```"
    text = paragraphs(7) + "\n\n" + code  # the fence would straddle the 12,000 mark

    chunks = split_markdown(text, 12_000)

    assert len(chunks) == 2
    assert chunks[1] == code
    assert all(balanced_fences(chunk) for chunk in chunks)


def test_code_block_longer_than_a_message_is_closed_and_reopened_across_messages() -> None:
    code = "```text\n" + "\n".join(f"line {i}: " + "x" * 80 for i in range(300)) + "\n```"

    answer = render_answer(code)

    assert isinstance(answer, InlineAnswer)
    chunks = [markdown_blocks(m)[0] for m in answer.messages]
    assert len(chunks) == 3
    assert all(
        len(c) <= 12_000 and c.startswith("```text\n") and c.endswith("\n```") for c in chunks
    )
    body = [line for c in chunks for line in c.split("\n")[1:-1]]
    assert body == code.split("\n")[1:-1]


def test_a_single_line_longer_than_a_block_is_cut_into_blocks() -> None:
    text = "x" * 30_000

    chunks = split_markdown(text, 12_000)

    assert [len(c) for c in chunks] == [12_000, 12_000, 6_000]


def test_answer_longer_than_max_messages_is_signalled_as_a_file_with_a_preview() -> None:
    text = paragraphs(60)  # ~80,000 chars

    answer = render_answer(text, max_messages=4)

    assert isinstance(answer, FileAnswer)
    assert answer.content == text
    (preview,) = markdown_blocks(answer.preview)
    assert len(preview) <= 2_000
    assert "attached below as a file" in preview


def test_status_shows_step_todo_marks_elapsed_time_and_a_stop_button() -> None:
    progress = Progress(
        session_id="s-1",
        step="Running `kubectl get pods -n checkout`",
        todos=(
            Todo("Check pods", TodoStatus.COMPLETED, ""),
            Todo("Read deploy log", TodoStatus.IN_PROGRESS, active_form="Reading the deploy log"),
            Todo("Write notes", TodoStatus.PENDING, ""),
        ),
        elapsed_s=72.3,
    )

    message = render_status(progress)

    head, todos = section_texts(message)
    assert "1m 12s" in head
    assert "Running `kubectl get pods -n checkout`" in head
    assert todos.split("\n") == ["☑ ~Check pods~", "◐ *Reading the deploy log*", "☐ Write notes"]
    (button,) = message.blocks[-1]["elements"]
    assert (button["action_id"], button["value"]) == ("warroom_stop", "s-1")


def test_status_with_a_huge_todo_list_stays_within_50_blocks_of_3000_chars() -> None:
    todos = tuple(
        Todo(f"{i} " + "check the shard " * 30, TodoStatus.PENDING, "") for i in range(2_000)
    )

    message = render_status(Progress("s-1", "x" * 10_000, todos, elapsed_s=5))

    assert len(message.blocks) == 50
    assert all(len(text) <= 3_000 for text in section_texts(message))
    assert section_texts(message)[-1].startswith("…and ")
    assert message.blocks[-1]["type"] == "actions"


def test_finished_status_has_no_stop_button() -> None:
    message = render_status(Progress("s-1", None, elapsed_s=3_725, finished=True))

    assert [b["type"] for b in message.blocks] == ["section"]
    assert "1h 2m 5s" in section_texts(message)[0]


def test_failures_are_told_in_plain_words_within_the_section_limit() -> None:
    lost_files = [f"/workspace/dump-{i}.log" for i in range(5_000)]

    notices = [
        render_model_unavailable(attempts=5, reason="overloaded_error " * 500),
        render_sandbox_replaced(lost_processes=["tail -f app.log"], lost_files=lost_files),
        render_step_cap(steps=200),
        render_session_failed(crashes=3),
    ]

    texts = [section_texts(n)[0] for n in notices]
    assert all(len(t) <= 3_000 for t in texts)
    assert "can't reach the AI model" in texts[0]
    assert "`tail -f app.log`" in texts[1]
    assert "4990 more" in texts[1]
    assert "200 steps" in texts[2]
    assert "crashed 3 times" in texts[3]


async def test_every_rendered_message_is_accepted_by_slack_limits(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    # Given messages rendered from big inputs
    answer = render_answer(paragraphs(30) + "\n\n```\n" + "y" * 20_000 + "\n```", max_messages=9)
    assert isinstance(answer, InlineAnswer)
    todos = tuple(Todo("z" * 400, TodoStatus.IN_PROGRESS, "z" * 400) for _ in range(500))
    messages = [*answer.messages, render_status(Progress("s-1", "q" * 9_000, todos))]
    # When they are posted to the (limit-enforcing) fake Slack
    for message in messages:
        await slack_client.chat_postMessage(
            channel="C1", text=message.text, blocks=list(message.blocks)
        )
    # Then every one was accepted
    assert [c.response["ok"] for c in slack_api.calls_to("chat.postMessage")] == [True] * len(
        messages
    )


def test_markdown_message_refuses_more_than_12000_chars() -> None:
    with pytest.raises(ValueError, match="12000"):
        render.markdown_message("a" * 12_001)


@pytest.mark.parametrize("module", [render, poster, skill_editor, skills_command, edit_policy])
def test_docstring_examples_hold(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.failed == 0


def test_the_status_line_shows_the_sessions_tokens_and_cost() -> None:
    from bot.slack.render import Progress, render_status
    from bot.slack.spend import checkpoint_spend
    from harness import Checkpoint, Requester, Usage

    cp = Checkpoint("s1", "T1", "C1", Requester("U1"), usage=Usage(1000, 200, 50_000, 3000))
    spend = checkpoint_spend(cp, "claude-sonnet-5-5")
    message = render_status(Progress("s1", "Thinking…", elapsed_s=65, spend=spend))
    # $2 × 1,000 + $10 × 200 + $0.20 × 50,000 + $2.50 × 3,000 per million tokens
    assert "54,200 tokens · $0.022" in message.blocks[0]["text"]["text"]


def test_an_answers_notification_text_keeps_underscores_inside_words_and_code() -> None:
    # Slack shows a message's ``text`` in notifications (issue #26.6: pool_size read "pool size")
    rendered = render_answer("_Raise_ `pool_size` and DB_POOL_MAX to 20 in `__init__.py`.")

    assert isinstance(rendered, InlineAnswer)
    assert rendered.messages[0].text == "Raise pool_size and DB_POOL_MAX to 20 in __init__.py."
