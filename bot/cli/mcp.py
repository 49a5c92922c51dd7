"""``warroom mcp list``: the configured MCP servers, their state and their tools.

The servers are started as a worker starts them (``WARROOM_MCP_CONFIG``, this host's
environment), listed, then stopped.
"""

from __future__ import annotations

from bot.mcp_servers import open_mcp_servers
from bot.settings import Settings
from harness import McpServers, ServerState

__all__ = ["describe_states", "list_servers", "render_servers"]

DESCRIPTION_CHARS = 80


def describe_states(servers: McpServers) -> list[str]:
    """One line per server: ``name: up, N tools`` or ``name: down (why)``."""
    counts: dict[str, int] = {}
    for tool in servers.tools():
        counts[tool.server] = counts.get(tool.server, 0) + 1
    lines = []
    for name, (state, reason) in servers.states().items():
        if state is ServerState.UP:
            lines.append(f"{name}: up, {counts.get(name, 0)} tools")
        else:
            lines.append(f"{name}: {state.value} ({reason or 'no reason given'})")
    return lines


def render_servers(servers: McpServers) -> str:
    """Each server's state line, then its tools (name and the start of the description)."""
    by_server: dict[str, list[str]] = {}
    for tool in servers.tools():
        description = " ".join(tool.description.split())
        if len(description) > DESCRIPTION_CHARS:
            description = description[: DESCRIPTION_CHARS - 1] + "…"
        by_server.setdefault(tool.server, []).append(f"    {tool.name}  {description}".rstrip())
    lines = []
    for name, state_line in zip(servers.states(), describe_states(servers), strict=True):
        lines.append(state_line)
        lines.extend(by_server.get(name, []))
    return "\n".join(lines)


async def list_servers(settings: Settings) -> str | None:
    """``render_servers`` of the configured servers, or None when none are configured.

    Raises:
        OSError, McpConfigError: the configuration could not be read or is invalid.
    """
    servers = await open_mcp_servers(settings)
    if servers is None:
        return None
    try:
        return render_servers(servers)
    finally:
        await servers.aclose()
