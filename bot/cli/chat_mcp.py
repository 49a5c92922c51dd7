"""``warroom chat`` says at start which configured MCP servers are down.

The chat's worker opens its runtime, MCP servers included, as it starts; a server that
does not come up is only known to the model (its tools are missing) unless the person
is told. Once the runtime is open, each server that is not up gets one ``!`` line with
why (``warroom mcp list`` shows the same); a server that comes back later is told to
the session as any notice is.
"""

from __future__ import annotations

import asyncio
from typing import TextIO

from bot.cli.mcp import describe_states
from bot.durable.actors import RuntimeHolder
from harness import ServerState

__all__ = ["report_mcp_down"]

POLL_S = 0.1  # how often the runtime's opening is looked for


async def report_mcp_down(holder: RuntimeHolder, out: TextIO) -> None:
    """Wait for ``holder``'s runtime to open, then print a line per MCP server that is
    down (nothing when none is configured or all are up). Runs until done or cancelled."""
    # The runtime opens on the worker's thread and loop: no event of this loop says so
    while (runtime := holder.opened) is None:  # noqa: ASYNC110
        await asyncio.sleep(POLL_S)
    servers = runtime.mcp
    if servers is None:
        return
    states = servers.states()
    down = [
        line
        for (state, _), line in zip(states.values(), describe_states(servers), strict=True)
        if state is not ServerState.UP
    ]
    for line in down:
        out.write(f"  ! MCP server {line}: its tools are not offered until it comes back\n")
    out.flush()
