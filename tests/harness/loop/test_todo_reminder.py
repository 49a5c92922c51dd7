"""The todo reminder, worked out from the transcript (``harness.loop.todo_reminder``)."""

from __future__ import annotations

from dataclasses import replace

from harness import Checkpoint, Requester, Todo, TodoStatus
from harness.loop.todo_reminder import MARK, todo_reminder
from harness.model.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock

TODOS = (
    Todo("Check pods", TodoStatus.COMPLETED, "Checking pods"),
    Todo("Read logs", TodoStatus.IN_PROGRESS, "Reading logs"),
)


def session(calls: list[str], *, todos: tuple[Todo, ...] = ()) -> Checkpoint:
    """A checkpoint whose transcript made ``calls`` (tool names), one per turn."""
    messages = [Message("user", (TextBlock("investigate"),))]
    for i, name in enumerate(calls):
        messages.append(Message("assistant", (ToolUseBlock(f"t{i}", name, {}),)))
        messages.append(Message("user", (ToolResultBlock(f"t{i}", "ok", False),)))
    cp = Checkpoint("s-1", "T1", "C1", Requester("U1"), messages=tuple(messages))
    return replace(cp, todos=todos)


def test_no_reminder_before_ten_calls() -> None:
    assert todo_reminder(session(["Bash"] * 9), compacted=False) is None


def test_a_reminder_after_ten_calls_lists_the_current_tasks() -> None:
    text = todo_reminder(session(["Bash"] * 10, todos=TODOS), compacted=False)

    assert text is not None
    assert MARK in text
    assert "1. [completed] Check pods\n2. [in_progress] Read logs" in text


def test_the_count_restarts_at_a_todowrite_and_at_a_reminder() -> None:
    after_todo = session(["Bash"] * 12 + ["TodoWrite"] + ["Bash"] * 9)
    reminded = session(["Bash"] * 10)
    reminded = replace(reminded, messages=(*reminded.messages, Message("user", (TextBlock(MARK),))))

    assert todo_reminder(after_todo, compacted=False) is None
    assert todo_reminder(reminded, compacted=False) is None


def test_after_compaction_the_task_list_is_repeated_when_there_is_one() -> None:
    text = todo_reminder(session([], todos=TODOS), compacted=True)

    assert text is not None
    assert "The conversation was compacted." in text
    assert "2. [in_progress] Read logs" in text
    assert todo_reminder(session([]), compacted=True) is None


def test_the_count_reads_no_further_back_than_it_needs() -> None:
    # Given a long session with no TodoWrite whose oldest messages cannot be read
    cp = session(["Bash"] * 30)
    unreadable = Message.from_stored('{"role":"user","content":[{"type":"image"}]}')
    cp = replace(cp, messages=(unreadable, *cp.messages[1:]))
    # Then the reminder is worked out from the newest calls alone
    assert todo_reminder(cp, compacted=False) is not None
