"""The status line shows the model's thinking summary between tool calls."""

from __future__ import annotations

from bot.slack.progress import _step_line
from harness import ModelResponded, Notice, NoticeTopic, Usage


def responded(*, text: str = "", thinking: str = "", calls: tuple[str, ...] = ()) -> ModelResponded:
    return ModelResponded("tool_use" if calls else "end_turn", text, calls, Usage(), 1, thinking)


def test_the_thinking_summary_between_tool_calls_is_the_status_line() -> None:
    event = responded(thinking="The 500s began with the 14:01 deploy.\n\nMore.", calls=("Bash",))

    assert _step_line([event], None) == "The 500s began with the 14:01 deploy."


def test_a_long_summary_is_cut_to_one_line() -> None:
    event = responded(thinking="word " * 200, calls=("Bash",))

    line = _step_line([event], None)

    assert line is not None
    assert len(line) == 300
    assert line.endswith("…")


def test_without_a_summary_the_status_says_thinking() -> None:
    assert _step_line([responded(calls=("Bash",))], None) == "Thinking…"
    assert _step_line([responded(text="Done.")], None) == "Writing the answer…"


def test_a_message_cut_to_the_size_bound_is_said_in_the_status_line() -> None:
    cut = Notice(
        topic=NoticeTopic.INPUT,
        text="A message of 1,080,000 characters was cut to its first 100,000.",
    )

    assert _step_line([cut], None) == cut.text
