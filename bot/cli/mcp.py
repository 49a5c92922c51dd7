"""``warroom mcp list``: the configured MCP servers, their state and their tools.

The servers are started as a worker starts them (``WARROOM_MCP_CONFIG``, this host's
environment), listed, then stopped. Each tool shows the org's decision for it (``allow``,
``ask``: needs a human's approval, ``deny``: never offered to the model); a server that is
down shows why, with the last lines it wrote to stderr.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from bot.mcp_servers import open_mcp_servers
from bot.settings import Settings
from harness import McpServers, ServerState

__all__ = ["describe_states", "list_servers", "render_servers", "unknown_lines"]

DESCRIPTION_CHARS = 80
STDERR_LINES = 10


def describe_states(servers: McpServers, *, stderr: bool = True) -> list[str]:
    """One line per server: ``name: up, N tools`` (those offered to the model) or
    ``name: down (why)``, with the last line it wrote to stderr when ``stderr``."""
    counts: dict[str, int] = {}
    for tool in servers.tools():
        counts[tool.server] = counts.get(tool.server, 0) + 1
    lines = []
    for name, (state, reason) in servers.states().items():
        if state is ServerState.UP:
            lines.append(f"{name}: up, {counts.get(name, 0)} tools")
        else:
            last = servers.stderr_tail(name).rpartition("\n")[2] if stderr else ""
            said = f"; stderr: {last}" if last else ""
            lines.append(f"{name}: {state.value} ({reason or 'no reason given'}{said})")
    return lines


def render_servers(servers: McpServers) -> str:
    """Each server's state line, then either its tools (name, the org's decision, the start
    of the description) or, when it is down, the end of its stderr."""
    lines = []
    listing = servers.listing()
    for (name, (state, _)), state_line in zip(
        servers.states().items(), describe_states(servers, stderr=False), strict=True
    ):
        lines.append(state_line)
        if state is ServerState.UP:
            lines.extend(_tool_line(t.name, t.approval.value, t.description) for t in listing[name])
            lines.extend(f"    {line}" for line in unknown_lines(servers, name))
            continue
        tail = servers.stderr_tail(name).splitlines()[-STDERR_LINES:]
        lines.extend(f"    stderr: {line}" for line in tail)
    return "\n".join(lines)


def unknown_lines(servers: McpServers, name: str) -> list[str]:
    """A warning per tool server ``name``'s ``warroom.tools`` names that it does not have."""
    policy = servers.unknown_in_policy().get(name, ())
    return [
        f'warning: "warroom.tools" names {tool!r}, which {name} does not have: its decision '
        "applies to nothing (a typo, or a renamed tool?)"
        for tool in policy
    ]


def _tool_line(name: str, approval: str, description: str) -> str:
    description = " ".join(description.split())
    if len(description) > DESCRIPTION_CHARS:
        description = description[: DESCRIPTION_CHARS - 1] + "…"
    return f"    {name}  [{approval}]  {description}".rstrip()


async def list_servers(settings: Settings) -> tuple[str, bool] | None:
    """``render_servers`` of the configured servers and whether one of them is down, or
    None when none are configured.

    Raises:
        OSError, McpConfigError: the configuration could not be read or is invalid.
    """
    with _quiet("harness.mcp.servers"):  # the listing says why a server is down, once
        servers = await open_mcp_servers(settings)
    if servers is None:
        return None
    try:
        down = any(state is not ServerState.UP for state, _ in servers.states().values())
        return render_servers(servers), down
    finally:
        await servers.aclose()


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Keep ``logger_name``'s warnings off stderr for the block (errors still show)."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
