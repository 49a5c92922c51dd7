"""TodoWrite: the model's task list, shown live in the thread's status message.

The whole list replaces the previous one (Claude Code's semantics). Items carry
``content`` (imperative: "Check the pods"), ``status`` and ``activeForm`` (present
continuous: "Checking the pods"); other keys an older model may send (``id``,
``priority``) are ignored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.loop.checkpoint import Todo, TodoStatus
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome

ACCEPTED = (
    "Todos have been modified successfully. Ensure that you continue to use the todo list to "
    "track your progress. Please proceed with the current tasks if applicable"
)


class TodoItem(BaseModel):
    """One item as the model writes it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    content: str = Field(min_length=1)
    status: Literal["pending", "in_progress", "completed"]
    activeForm: str = Field(min_length=1)  # noqa: N815 (Claude Code's parameter name)


class TodoWriteInput(BaseModel):
    """TodoWrite's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    todos: list[TodoItem]


async def todo_write(p: TodoWriteInput, ctx: ToolContext) -> ToolOutcome:
    """Replace the session's todo list."""
    todos = tuple(Todo(t.content, TodoStatus(t.status), t.activeForm) for t in p.todos)
    return ToolOutcome(ACCEPTED, todos=todos)


TODO_WRITE = ModelTool(
    name="TodoWrite",
    description=(
        "Create or update your task list for this investigation; the team sees it live in the "
        "thread. Send the whole list each time (it replaces the previous one). Each item has "
        "content (what to do, imperative), status (pending, in_progress or completed) and "
        "activeForm (the same in present continuous, shown while it is in progress). Keep "
        "exactly one item in_progress while working, and mark items completed as soon as they "
        "are done. Use it for investigations with several steps; skip it for a single quick "
        "question."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The complete, updated task list.",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1},
                        "status": {
                            "type": "string",
                            "enum": ["pending", "in_progress", "completed"],
                        },
                        "activeForm": {"type": "string", "minLength": 1},
                    },
                    "required": ["content", "status", "activeForm"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["todos"],
        "additionalProperties": False,
    },
    params=TodoWriteInput,
    runner=todo_write,
)
