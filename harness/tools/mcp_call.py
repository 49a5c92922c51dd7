"""MCP tools as model-facing tools: their specs, and one call through ``McpServers``.

An MCP tool is named ``mcp__<server>__<tool>`` and carries its server's own description
and input schema (docs/architecture.md §12). The model sees only the tools of the servers
that are up and serve the session's channel; a call to any other one is refused as an
unknown tool. A server that is down (it may have gone since the model saw its tools),
a call past its time limit and the server's own
error results all come back as error results the model reads, never as a crash of the
step. MCP has no idempotency key, so a call interrupted by a worker crash is never sent
again: after a crash its outcome is unknown (``run_tool`` recovers it as None).

The org's policy (``harness.mcp.policy``) is applied here too: a tool that needs a human's
approval comes back as a tool error saying so, without reaching its server. When the offered
tools are deferred (too many to send up front), their specs carry ``defer_loading`` behind a
ToolSearch spec, and a deferred tool the session has not loaded is refused (``tool_search``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.mcp.errors import McpApprovalRequired, McpTimeout, McpUnavailable
from harness.mcp.policy import approval_needed_text
from harness.mcp.servers import McpTool
from harness.model.adapter import ToolSpec
from harness.tools.contract import ToolContext, ToolOutcome, tool_error
from harness.tools.tool_search import not_loaded, tool_search_spec

NO_CONTENT = "(The MCP tool returned no content)"


def mcp_specs(tools: Sequence[McpTool]) -> tuple[ToolSpec, ...]:
    """The specs of MCP tools (``McpServers.tools(channel_id)``: the servers up for a
    session's channel, in their stable order), with each server's description and schema;
    when they are deferred, ToolSearch's spec first and each with ``defer_loading``."""
    specs = tuple(ToolSpec(t.name, t.description, t.input_schema, t.deferred) for t in tools)
    deferred = [t for t in tools if t.deferred]
    return (tool_search_spec(deferred), *specs) if deferred else specs


async def run_mcp(name: str, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
    """Call the MCP tool ``name`` with ``tool_input`` within the call's time limit.

    The limit is the servers' ``call_timeout_s``, never past what is left of the session's
    tool-time budget (``ctx.bash_max_timeout_ms``).

    Returns:
        The tool's text (``is_error`` as the server said), or an error outcome when the
        tool is no tool of a server serving this session's channel, it is deferred and
        not loaded, it needs a human's approval, its server is down or went away
        mid-call, or no result came in time.
    """
    servers = ctx.mcp
    if servers is None or not servers.serves(name, ctx.channel_id):
        return tool_error(f"Error: No such tool available: {name}")
    offered = next((t for t in servers.tools(ctx.channel_id) if t.name == name), None)
    if offered is not None and offered.deferred and name not in ctx.loaded_tools:
        return not_loaded(name)
    timeout_s = min(servers.call_timeout_s, ctx.bash_max_timeout_ms / 1000)
    try:
        result = await servers.call(name, tool_input, timeout_s=timeout_s, approved=ctx.approved)
    except McpApprovalRequired:
        return tool_error(approval_needed_text(name))
    except McpTimeout as exc:
        return tool_error(
            f"MCP tool {name} did not answer within {exc.timeout_s:g} s and was abandoned. "
            "Whether it took effect is unknown; check before calling it again."
        )
    except McpUnavailable as exc:
        return tool_error(
            f"MCP tool {name} is unavailable: {exc.reason}. If the call was under way, "
            "whether it took effect is unknown."
        )
    return ToolOutcome(result.text or NO_CONTENT, is_error=result.is_error)
