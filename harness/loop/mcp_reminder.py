"""Telling a session when an MCP server it could use goes away or comes back.

Before each model call the step compares the servers whose tools the session is offered
now with those it was offered at its previous model call (``Checkpoint.mcp_servers``) and
adds one ``<system-reminder>`` notice per change (docs/architecture.md §12). The first
model call only records them: the tool list itself tells the model what it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from harness.loop.checkpoint import Checkpoint
from harness.loop.events import Notice, NoticeTopic
from harness.mcp.names import PREFIX
from harness.mcp.servers import McpTool


def servers_of(tools: Sequence[McpTool]) -> tuple[str, ...]:
    """The servers ``tools`` come from, sorted, each once."""
    return tuple(sorted({t.server for t in tools}))


def note_server_changes(
    cp: Checkpoint, offered: Sequence[McpTool]
) -> tuple[Checkpoint, tuple[Notice, ...]]:
    """``cp`` recording the servers of ``offered``, with a notice queued per server gone
    or back since the previous model call, and those notices as events (topic ``mcp``).

    >>> from harness.loop.checkpoint import Requester
    >>> cp = Checkpoint("s", "T", "C", Requester("U"), mcp_servers=("grafana", "k8s"))
    >>> tool = McpTool("mcp__k8s__pods", "k8s", "pods", "", {})
    >>> cp, events = note_server_changes(cp, [tool])
    >>> cp.mcp_servers, [e.text[:33] for e in events]
    (('k8s',), ['The MCP server grafana went away:'])
    """
    now = servers_of(offered)
    seen = cp.mcp_servers
    if seen is None or seen == now:
        return replace(cp, mcp_servers=now), ()
    texts = [_gone(name) for name in seen if name not in now]
    texts += [_back(name) for name in now if name not in seen]
    cp = replace(cp, mcp_servers=now, notices=(*cp.notices, *texts))
    return cp, tuple(Notice(topic=NoticeTopic.MCP, text=t) for t in texts)


def _gone(server: str) -> str:
    return (
        f"The MCP server {server} went away: its tools ({PREFIX}{server}__*) are no longer in "
        "your tool list. You will be told when it is back; until then, work without it."
    )


def _back(server: str) -> str:
    return (
        f"The MCP server {server} is available now: its tools ({PREFIX}{server}__*) are in "
        "your tool list."
    )
