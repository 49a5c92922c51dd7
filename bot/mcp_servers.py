"""The worker's MCP servers, built from ``WARROOM_MCP_CONFIG`` (docs/architecture.md §12).

The file is Claude Code's ``.mcp.json``; its ``${VAR}`` references resolve from this
process's environment, so credentials stay on the worker host and never reach a sandbox.
"""

from __future__ import annotations

import asyncio
import os

from bot.settings import Settings
from harness import MODELS, McpServers, ServerConfig, parse_config

START_TIMEOUT_S = 30.0
TOOL_SEARCH_PERCENT = 10  # Claude Code's ``auto``: defer over 10% of the context window
FALLBACK_CONTEXT_TOKENS = 200_000  # a model id the catalogue does not know


def load_mcp_config(settings: Settings) -> tuple[ServerConfig, ...]:
    """The servers ``WARROOM_MCP_CONFIG`` names, in name order; none when it is unset.

    Raises:
        OSError: the file could not be read.
        McpConfigError: the file is not a valid configuration (the message says where).
    """
    if settings.mcp_config is None:
        return ()
    return parse_config(settings.mcp_config.read_text(encoding="utf-8"), os.environ)


async def open_mcp_servers(
    settings: Settings, *, start_timeout_s: float = START_TIMEOUT_S
) -> McpServers | None:
    """The configured servers, started (each up or down within ``start_timeout_s``), or
    None when no configuration is set. Close with ``McpServers.aclose``.

    Raises:
        OSError, McpConfigError: as ``load_mcp_config``.
    """
    configs = await asyncio.to_thread(load_mcp_config, settings)
    if not configs:
        return None
    servers = McpServers(
        configs,
        start_timeout_s=start_timeout_s,
        call_timeout_s=settings.mcp_timeout_s,
        defer_above_tokens=defer_above_tokens(settings),
    )
    await servers.start()
    return servers


def defer_above_tokens(settings: Settings) -> int | None:
    """The size (tokens) over which MCP tool definitions are deferred, from
    ``WARROOM_MCP_TOOL_SEARCH``: None never, 0 always, else a share of the model's window.

    >>> defer_above_tokens(Settings.model_construct(mcp_tool_search="auto:5", model="x"))
    10000
    >>> defer_above_tokens(Settings.model_construct(mcp_tool_search="false", model="x"))
    """
    mode = settings.mcp_tool_search
    if mode == "false":
        return None
    if mode == "true":
        return 0
    percent = int(mode.partition(":")[2] or TOOL_SEARCH_PERCENT)
    spec = MODELS.get(settings.model)
    window = spec.context_tokens if spec is not None else FALLBACK_CONTEXT_TOKENS
    return window * percent // 100
