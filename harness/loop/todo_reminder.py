"""The todo reminder: a nudge about TodoWrite every ~10 tool results, and after compaction.

Claude Code adds such a reminder when the task list has not been touched for a while
and right after compaction (when the list is the model's best memory of the plan).
Here it is worked out from the transcript alone, so it needs no checkpoint field:
count the tool calls since the last TodoWrite call or the last reminder; at
``EVERY_TOOL_RESULTS`` a reminder joins the next user message.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.loop.checkpoint import Checkpoint, Todo
from harness.loop.prompt import reminder
from harness.model.messages import Message, TextBlock, ToolUseBlock

EVERY_TOOL_RESULTS = 10
MARK = "TodoWrite has not been used in a while."


def calls_since_todo(messages: Sequence[Message], *, at_most: int | None = None) -> int:
    """Tool calls since the last TodoWrite call or the last todo reminder, newest first.

    With ``at_most``, counting stops there: the older messages are not read (a long
    session's stored messages are decoded only when read: ``Message.from_stored``)."""
    count = 0
    for message in reversed(messages):
        if at_most is not None and count >= at_most:
            return count
        for block in reversed(message.content):
            if isinstance(block, ToolUseBlock):
                if block.name == "TodoWrite":
                    return count
                count += 1
            elif isinstance(block, TextBlock) and MARK in block.text:
                return count
    return count


def todo_reminder(cp: Checkpoint, *, compacted: bool) -> str | None:
    """The reminder to add to the next user message, or None.

    Args:
        cp: the checkpoint whose last message is the one the reminder would follow.
        compacted: the transcript was compacted in this step.
    """
    if compacted:
        if not cp.todos:
            return None
        return reminder(
            "The conversation was compacted. Your task list is still:\n"
            + _listing(cp.todos)
            + "\nKeep it up to date with TodoWrite as you go on."
        )
    if calls_since_todo(cp.messages, at_most=EVERY_TOOL_RESULTS) < EVERY_TOOL_RESULTS:
        return None
    text = (
        f"{MARK} If this work has several steps, a task list helps you and the team follow "
        "it; if the list is out of date, update it. Ignore this when it does not apply, and "
        "do not mention it to the team."
    )
    if cp.todos:
        text += "\n\nYour task list now:\n" + _listing(cp.todos)
    return reminder(text)


def _listing(todos: Sequence[Todo]) -> str:
    return "\n".join(f"{i}. [{t.status.value}] {t.content}" for i, t in enumerate(todos, 1))
