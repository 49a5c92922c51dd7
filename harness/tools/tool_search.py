"""ToolSearch: load the definitions of deferred MCP tools on demand (Claude Code's tool search).

When the MCP tools offered to a session would take too much of the context, their definitions
are sent with ``defer_loading`` and the model gets their names in this tool's description
(``<available-deferred-tools>``). Claude Code's interface (2.1.332): parameters ``query``
(``select:<name>,<name>`` or keywords, ``+word`` required in the name) and ``max_results``
(default 5); the result is one ``tool_reference`` per tool found, which the Messages API
expands into the tool's definition at that point of the conversation, so the tool list (the
cached prefix) never changes. A deferred tool called before it was loaded is refused with a
pointer here (``not_loaded``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.mcp.search import search_tools
from harness.mcp.servers import McpTool
from harness.model.adapter import ToolSpec
from harness.tools.contract import ToolContext, ToolOutcome, tool_error, validation_message

NAME = "ToolSearch"
NO_MATCH = "No matching deferred tools found"
_DESCRIPTION = """\
Load the full definitions of deferred tools so they can be called. The deferred tools are \
listed by name below; until a tool's definition is loaded only its name is known, and calling \
it fails. The tools this returns are loaded into the conversation: call them afterwards like \
any other tool. A tool loaded once stays loaded.

Query forms:
- "select:mcp__grafana__search_dashboards,mcp__k8s__list_pods": exactly these tools, by name
- "dashboards search": keywords, the max_results best matches
- "+grafana dashboards": "grafana" must be in the name; ranked by the other words
"""
_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": (
                'What to find: "select:<tool_name>[,<tool_name>…]" for exact names, or keywords.'
            ),
        },
        "max_results": {
            "type": "number",
            "description": "The most tools a keyword query returns (default 5).",
            "default": 5,
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


class ToolSearchInput(BaseModel):
    """ToolSearch's parameters (Claude Code's names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    query: str
    max_results: int = Field(default=5, ge=1, le=50)


def tool_search_spec(deferred: Sequence[McpTool]) -> ToolSpec:
    """ToolSearch's definition, naming the ``deferred`` tools (in their stable order)."""
    names = "\n".join(t.name for t in deferred)
    listing = f"<available-deferred-tools>\n{names}\n</available-deferred-tools>"
    return ToolSpec(NAME, f"{_DESCRIPTION}\n{listing}", _SCHEMA)


def deferred_tools(ctx: ToolContext) -> tuple[McpTool, ...]:
    """The deferred MCP tools offered to the session of ``ctx``."""
    offered = ctx.mcp.tools(ctx.channel_id) if ctx.mcp is not None else ()
    return tuple(t for t in offered if t.deferred)


async def run_tool_search(tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
    """The deferred tools ``query`` finds, as tool references (no text); a tool error when
    this session has no deferred tools; ``No matching deferred tools found`` otherwise."""
    deferred = deferred_tools(ctx)
    if not deferred:
        return tool_error(f"Error: No such tool available: {NAME}")
    try:
        params = ToolSearchInput.model_validate(tool_input)
    except ValidationError as exc:
        return tool_error(validation_message(NAME, exc))
    found = search_tools(params.query, deferred, params.max_results)
    if not found:
        return ToolOutcome(NO_MATCH)
    return ToolOutcome("", tool_references=found)


def not_loaded(name: str) -> ToolOutcome:
    """The refusal of a call to a deferred tool whose definition was not loaded yet."""
    return tool_error(
        f"{name} is a deferred tool and its definition has not been loaded yet. Call "
        f'{NAME} with query "select:{name}" first, then call {name} with the parameters '
        "its definition gives."
    )
