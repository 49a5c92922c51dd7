"""The toolbox: every model-facing tool by name, their specs, and ``run_tool``.

``Tool``, ``ToolContext`` and ``ToolOutcome`` (the contract) live in ``tool`` and are
re-exported here.

The tool list is static bytes (the first prompt-cache breakpoint, docs/architecture.md
§4): ``tool_specs()`` returns the same specs, in the same order, every time: the built-in
tools, then the MCP tools it is given (``mcp_specs``: the servers up for the session's
channel, in a stable order, behind ToolSearch when deferred; docs/architecture.md §12).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal, overload

from harness.errors import WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused
from harness.mcp.names import is_mcp
from harness.model.adapter import ToolSpec
from harness.tools.agent import AGENT
from harness.tools.background import KILL_SHELL, MONITOR, TASK_STOP
from harness.tools.bash import BASH
from harness.tools.bounds import GREP_MAX_RESULT_CHARS, MAX_RESULT_CHARS
from harness.tools.contract import ModelTool, Tool, ToolContext, ToolOutcome, tool_error
from harness.tools.cron import CRON_CREATE, CRON_DELETE, CRON_LIST
from harness.tools.files import EDIT, READ, WRITE
from harness.tools.mcp_call import run_mcp
from harness.tools.persisted import cut_middle, keep_in_file
from harness.tools.refused import REFUSED
from harness.tools.search import GLOB, GREP
from harness.tools.skill import SKILL
from harness.tools.tasks import TASK_TOOLS
from harness.tools.todo import TODO_WRITE
from harness.tools.tool_search import NAME as TOOL_SEARCH
from harness.tools.tool_search import run_tool_search
from harness.tools.wakeup import SCHEDULE_WAKEUP
from harness.tools.web_fetch import WEB_FETCH
from harness.vfs import PathError

__all__ = [
    "TOOLS",
    "Tool",
    "canonical_name",
    "ToolContext",
    "ToolOutcome",
    "reruns_safely",
    "run_tool",
    "summarize_call",
    "tool_specs",
]

TOOLS: Mapping[str, Tool] = {
    tool.name: tool
    for tool in (
        BASH,
        GLOB,
        GREP,
        READ,
        EDIT,
        WRITE,
        TODO_WRITE,
        SKILL,
        MONITOR,
        TASK_STOP,
        SCHEDULE_WAKEUP,
        CRON_CREATE,
        CRON_LIST,
        CRON_DELETE,
        AGENT,
        WEB_FETCH,
    )
}
AGENT_TOOL = AGENT.name
WAKEUP_TOOL = SCHEDULE_WAKEUP.name
ALIASES: Mapping[str, Tool] = {
    KILL_SHELL.name: KILL_SHELL,
    "KillBash": KILL_SHELL,
    "Task": AGENT,
    **{tool.name: tool for tool in TASK_TOOLS},
}
"""Tools run when called but not offered: Claude Code's other names (its alias table:
``Task`` is Agent, ``KillShell``/``KillBash`` are TaskStop) and its default todo tools,
which edit the list TodoWrite keeps (``tasks``)."""
_OFFERED_AS = {"Task": AGENT.name, "KillShell": TASK_STOP.name, "KillBash": TASK_STOP.name}

# A result over its tool's cap is kept in a sandbox file behind a preview (Claude Code
# 2.1.332's per-tool caps). Read bounds itself (its refusals say how to page), and
# reading a kept result back must not be kept again, so Read has no entry. Every MCP
# tool is kept above ``MAX_RESULT_CHARS``, like Bash.
_KEEP_ABOVE_CHARS: Mapping[str, int] = {
    "Bash": MAX_RESULT_CHARS,
    "Glob": MAX_RESULT_CHARS,
    "Grep": GREP_MAX_RESULT_CHARS,
    "Skill": MAX_RESULT_CHARS,
}
BACKSTOP_CHARS = 120_000  # no result reaches the model larger than this


def tool_specs(mcp_tools: tuple[ToolSpec, ...] = ()) -> tuple[ToolSpec, ...]:
    """The tools offered to the model: the built-in ones in a fixed order, then
    ``mcp_tools`` (``mcp_specs``) as given."""
    return (*(tool.spec() for tool in TOOLS.values()), *mcp_tools)


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
            outcome cannot be known (always so for an MCP tool: it is never re-sent).

    Every result is bounded: over its tool's cap it is kept in a sandbox file behind a
    preview (``persisted``), and nothing over ``BACKSTOP_CHARS`` reaches the model.

    Raises:
        memory_store.DatabaseUnavailable, WorkspaceUnavailable: infrastructure
            failures (retry the step); never for unknown tools, bad input, bad paths,
            paths the sandbox refuses, missing files, refused commands or failing
            commands.
    """
    tool = TOOLS.get(name) or ALIASES.get(name)
    if name == TOOL_SEARCH:  # read-only: after a crash it is simply run again
        return await run_tool_search(tool_input, ctx)
    if tool is None and is_mcp(name):
        if recovering:
            return None
        return await _bounded(name, await run_mcp(name, tool_input, ctx), ctx)
    if tool is None and name in REFUSED:
        return tool_error(f"{name} is not available in Warroom. {REFUSED[name]}")
    if tool is None:
        return tool_error(f"Error: No such tool available: {name}")
    try:
        if recovering:
            outcome = await tool.recover(tool_input, ctx)
        else:
            outcome = await tool.run(tool_input, ctx)
    except PathError as exc:
        return tool_error(str(exc))
    except (WorkspaceRefused, WorkspaceFileNotFound, WorkspaceIsADirectory) as exc:
        return tool_error(f"{exc}.")
    return None if outcome is None else await _bounded(name, outcome, ctx)


def canonical_name(name: str) -> str:
    """The offered tool an alias runs (``Task`` → ``Agent``), else ``name``.

    >>> canonical_name("Task"), canonical_name("KillBash"), canonical_name("Read")
    ('Agent', 'TaskStop', 'Read')
    """
    return _OFFERED_AS.get(name, name)


def reruns_safely(name: str) -> bool:
    """Whether a call of ``name`` is simply run again after a crash: it reads, or it is
    idempotent by ``tool_use_id`` (a built-in tool without a recoverer, or ToolSearch).
    Such a call needs no intent committed before it runs (docs/architecture.md §5);
    Bash, Edit and MCP tools do.

    >>> [reruns_safely(n) for n in ("Read", "TodoWrite", "Bash", "Edit", "mcp__x__y")]
    [True, True, False, False, False]
    """
    if name == TOOL_SEARCH:
        return True
    tool = TOOLS.get(name)
    return isinstance(tool, ModelTool) and tool.recoverer is None


async def _bounded(name: str, outcome: ToolOutcome, ctx: ToolContext) -> ToolOutcome:
    """``outcome`` with its text kept in a file when over the tool's cap, then cut at
    ``BACKSTOP_CHARS`` whatever happened."""
    text = outcome.content
    cap = MAX_RESULT_CHARS if is_mcp(name) else _KEEP_ABOVE_CHARS.get(name)
    if cap is not None:
        text = await keep_in_file(text, ctx.tool_use_id, ctx.workspace, cap, command=name == "Bash")
    text = cut_middle(text, BACKSTOP_CHARS)
    return outcome if text == outcome.content else replace(outcome, content=text)


MAX_DETAIL_CHARS = 300


def call_detail(name: str, tool_input: Mapping[str, Any]) -> str:
    """What a call acted on, for the incident record (≤ 300 chars): a Bash command, a
    file path, an MCP call's arguments; "" for the rest.

    >>> call_detail("Bash", {"command": "kubectl get pods -n prod", "description": "List"})
    'kubectl get pods -n prod'
    >>> call_detail("mcp__grafana__query", {"expr": "up"})
    '{"expr": "up"}'
    """
    if name == "Bash":
        value = tool_input.get("command")
    elif name in ("Read", "Write", "Edit"):
        value = tool_input.get("file_path")
    elif name.startswith("mcp__"):
        value = json.dumps(dict(tool_input), sort_keys=True, ensure_ascii=False)
    else:
        value = None
    text = value if isinstance(value, str) else ""
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


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
    elif name == "Skill":
        what = text("skill")
    elif name == TOOL_SEARCH:
        what = text("query")
    elif name == WEB_FETCH.name:
        what = text("url")
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
