"""The toolbox: every model-facing tool by name, their specs, and ``run_tool``.

``Tool``, ``ToolContext`` and ``ToolOutcome`` (the contract) live in ``tool`` and are
re-exported here.

The tool list is static bytes (the first prompt-cache breakpoint, docs/architecture.md
§4): ``tool_specs()`` returns the same specs, in the same order, every time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

from harness.errors import WorkspaceRefused
from harness.model.adapter import ToolSpec
from harness.tools.bash import BASH
from harness.tools.contract import Tool, ToolContext, ToolOutcome, tool_error
from harness.tools.files import EDIT, READ, WRITE
from harness.tools.search import GLOB, GREP
from harness.tools.todo import TODO_WRITE
from harness.vfs import PathError

__all__ = [
    "TOOLS",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "run_tool",
    "summarize_call",
    "tool_specs",
]

TOOLS: Mapping[str, Tool] = {
    tool.name: tool for tool in (BASH, GLOB, GREP, READ, EDIT, WRITE, TODO_WRITE)
}


def tool_specs() -> tuple[ToolSpec, ...]:
    """The tools offered to the model, in a fixed order."""
    return tuple(tool.spec() for tool in TOOLS.values())


@overload
async def run_tool(
    name: str,
    tool_input: Mapping[str, Any],
    ctx: ToolContext,
    *,
    recovering: Literal[False] = False,
) -> ToolOutcome: ...


@overload
async def run_tool(
    name: str, tool_input: Mapping[str, Any], ctx: ToolContext, *, recovering: Literal[True]
) -> ToolOutcome | None: ...


async def run_tool(
    name: str, tool_input: Mapping[str, Any], ctx: ToolContext, *, recovering: bool = False
) -> ToolOutcome | None:
    """Run one tool call; a mistake of the model comes back as an error outcome.

    Args:
        name: the tool name the model used.
        tool_input: the ``tool_use`` input object, unvalidated.
        ctx: the call's context (``ctx.tool_use_id`` is the idempotency key).
        recovering: the previous worker died between this call's intent and result:
            redo it when that is safe, look it up when it is not; None means its
            outcome cannot be known.

    Raises:
        memory_store.DatabaseUnavailable, WorkspaceUnavailable: infrastructure
            failures (retry the step); never for unknown tools, bad input, bad paths,
            missing files, refused commands or failing commands.
    """
    tool = TOOLS.get(name)
    if tool is None:
        return tool_error(f"Error: No such tool available: {name}")
    try:
        if recovering:
            return await tool.recover(tool_input, ctx)
        return await tool.run(tool_input, ctx)
    except (PathError, WorkspaceRefused) as exc:
        return tool_error(str(exc))


def summarize_call(name: str, tool_input: Mapping[str, Any]) -> str:
    """A short line for the thread's status message, e.g. ``Read /memory/x.md``.

    >>> summarize_call("Bash", {"command": "kubectl get pods", "description": "List pods"})
    'Bash: List pods'
    >>> summarize_call("Grep", {"pattern": "OOM", "path": "/workspace/logs"})
    'Grep "OOM" in /workspace/logs'
    """

    def text(key: str) -> str:
        value = tool_input.get(key)
        return value if isinstance(value, str) else ""

    if name == "Bash":
        what = text("description") or text("command")
    elif name in ("Read", "Write", "Edit"):
        what = text("file_path")
    elif name == "Glob":
        what = text("pattern") + (f" in {text('path')}" if text("path") else "")
    elif name == "Grep":
        what = f'"{text("pattern")}"' + (f" in {text('path')}" if text("path") else "")
    elif name == "TodoWrite":
        todos = tool_input.get("todos")
        count = len(todos) if isinstance(todos, list) else None
        what = "" if count is None else f"{count} item" + ("" if count == 1 else "s")
    else:
        what = ""
    what = " ".join(what.split())
    if len(what) > 80:
        what = what[:79] + "…"
    separator = ": " if name == "Bash" else " "
    return name + (separator + what if what else "")
