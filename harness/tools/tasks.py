"""TaskCreate, TaskGet, TaskList and TaskUpdate: Claude Code's task tools over the todo list.

Claude Code 2.1.336 offers these by default instead of TodoWrite; Warroom keeps one
list per session (``Checkpoint.todos``, shown live in the thread) and lets the model
use either vocabulary on it. A task's id is its position in the list, from 1 ("1",
"2", …); deleting a task moves the later ones up (the result says so). A task's
``subject`` is the todo's ``content``; ``description``, ``owner``, ``metadata`` and the
blocking links are accepted and not kept (the thread shows one line per task).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.loop.checkpoint import Todo, TodoStatus
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, tool_error

_UNKEPT = ("description", "owner", "metadata", "addBlocks", "addBlockedBy")


class TaskCreateInput(BaseModel):
    """TaskCreate's parameters (Claude Code's names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    subject: str = Field(min_length=1)
    description: str
    activeForm: str | None = Field(default=None, min_length=1)  # noqa: N815 (Claude Code's)
    metadata: dict[str, Any] | None = None


class TaskGetInput(BaseModel):
    """TaskGet's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    taskId: str  # noqa: N815 (Claude Code's parameter name)


class TaskListInput(BaseModel):
    """TaskList takes no parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskUpdateInput(BaseModel):
    """TaskUpdate's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    taskId: str  # noqa: N815
    subject: str | None = Field(default=None, min_length=1)
    description: str | None = None
    activeForm: str | None = Field(default=None, min_length=1)  # noqa: N815
    status: Literal["pending", "in_progress", "completed", "deleted"] | None = None
    addBlocks: list[str] | None = None  # noqa: N815
    addBlockedBy: list[str] | None = None  # noqa: N815
    owner: str | None = None
    metadata: dict[str, Any] | None = None


def _line(number: int, todo: Todo) -> str:
    return f"#{number} [{todo.status.value}] {todo.content}"


def _find(todos: tuple[Todo, ...], task_id: str) -> int | None:
    """The list index of task ``task_id`` ("3" or "#3"), or None."""
    digits = task_id.strip().removeprefix("#")
    if not digits.isdigit() or not 1 <= int(digits) <= len(todos):
        return None
    return int(digits) - 1


def _not_found(task_id: str, todos: tuple[Todo, ...]) -> ToolOutcome:
    known = f"1 to {len(todos)}" if todos else "none: the list is empty"
    return tool_error(f"Task not found: {task_id}. Task ids are list positions ({known}).")


async def task_create(p: TaskCreateInput, ctx: ToolContext) -> ToolOutcome:
    """Add a pending task at the end of the list."""
    todo = Todo(p.subject, TodoStatus.PENDING, p.activeForm or p.subject)
    todos = (*ctx.todos, todo)
    return ToolOutcome(f"Task #{len(todos)} created successfully: {p.subject}", todos=todos)


async def task_get(p: TaskGetInput, ctx: ToolContext) -> ToolOutcome:
    """One task, by id."""
    index = _find(ctx.todos, p.taskId)
    if index is None:
        return _not_found(p.taskId, ctx.todos)
    todo = ctx.todos[index]
    return ToolOutcome(
        f"Task #{index + 1}: {todo.content}\nStatus: {todo.status.value}\n"
        f"Active form: {todo.active_form}"
    )


async def task_list(p: TaskListInput, ctx: ToolContext) -> ToolOutcome:
    """Every task, one line each."""
    del p
    if not ctx.todos:
        return ToolOutcome("No tasks found")
    return ToolOutcome("\n".join(_line(i + 1, t) for i, t in enumerate(ctx.todos)))


async def task_update(p: TaskUpdateInput, ctx: ToolContext) -> ToolOutcome:
    """Change a task's subject, active form or status; ``deleted`` removes it."""
    index = _find(ctx.todos, p.taskId)
    if index is None:
        return _not_found(p.taskId, ctx.todos)
    number, todo = index + 1, ctx.todos[index]
    if p.status == "deleted":
        todos = ctx.todos[:index] + ctx.todos[index + 1 :]
        later = " Later tasks moved up one id." if index < len(todos) else ""
        return ToolOutcome(f"Task #{number} deleted.{later}", todos=todos)
    changed = replace(
        todo,
        content=p.subject or todo.content,
        active_form=p.activeForm or todo.active_form,
        status=TodoStatus(p.status) if p.status else todo.status,
    )
    fields = [name for name in ("subject", "activeForm", "status") if getattr(p, name)]
    ignored = [name for name in _UNKEPT if getattr(p, name) is not None]
    text = f"Updated task #{number} " + (", ".join(fields) if fields else "(nothing changed)")
    if ignored:
        text += f" ({', '.join(ignored)} not kept: the thread shows one line per task)"
    todos = (*ctx.todos[:index], changed, *ctx.todos[index + 1 :])
    return ToolOutcome(text, todos=todos)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STR = {"type": "string"}
_ID = {"type": "string", "description": "The task's id (its position in the list: 1, 2, …)."}

TASK_CREATE = ModelTool(
    name="TaskCreate",
    description=(
        "Add a task to this investigation's task list (the same list TodoWrite writes; the "
        "team sees it live in the thread). It starts pending; its id is its position."
    ),
    input_schema=_schema(
        {
            "subject": {"type": "string", "description": "What to do, imperative."},
            "description": {"type": "string", "description": "Details (not shown in Slack)."},
            "activeForm": {"type": "string", "description": "The same, present continuous."},
            "metadata": {"type": "object", "description": "Accepted, not kept."},
        },
        ["subject", "description"],
    ),
    params=TaskCreateInput,
    runner=task_create,
)

TASK_GET = ModelTool(
    name="TaskGet",
    description="Show one task of this investigation's task list, by id.",
    input_schema=_schema({"taskId": _ID}, ["taskId"]),
    params=TaskGetInput,
    runner=task_get,
)

TASK_LIST = ModelTool(
    name="TaskList",
    description="List this investigation's tasks: id, status and subject, one per line.",
    input_schema=_schema({}, []),
    params=TaskListInput,
    runner=task_list,
)

TASK_UPDATE = ModelTool(
    name="TaskUpdate",
    description=(
        "Change a task of this investigation's task list: its subject, activeForm or status "
        "(pending, in_progress, completed; deleted removes it and moves later ids up)."
    ),
    input_schema=_schema(
        {
            "taskId": _ID,
            "subject": _STR,
            "description": _STR,
            "activeForm": _STR,
            "status": {
                "type": "string",
                "enum": ["pending", "in_progress", "completed", "deleted"],
            },
            "addBlocks": {"type": "array", "items": _STR},
            "addBlockedBy": {"type": "array", "items": _STR},
            "owner": _STR,
            "metadata": {"type": "object"},
        },
        ["taskId"],
    ),
    params=TaskUpdateInput,
    runner=task_update,
)

TASK_TOOLS = (TASK_CREATE, TASK_GET, TASK_LIST, TASK_UPDATE)
