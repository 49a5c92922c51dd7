"""Claude Code's names for MCP tools: ``mcp__<server>__<tool>``.

The Messages API accepts tool names matching ``^[a-zA-Z0-9_-]{1,128}$`` (Anthropic's tool-use
docs), so any other character becomes ``_``; a name longer than 128 keeps its start and gets a
short hash of the whole, so two long names never collide.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_TOOL_NAME = 128
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The model-facing name of ``tool`` on ``server``.

    >>> tool_name("grafana", "search_dashboards")
    'mcp__grafana__search_dashboards'
    >>> tool_name("k8s", "pods.list v2")
    'mcp__k8s__pods_list_v2'
    """
    name = f"{PREFIX}{_INVALID.sub('_', server)}__{_INVALID.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"


def is_mcp(name: str) -> bool:
    """Whether a tool name is an MCP tool's."""
    return name.startswith(PREFIX)
