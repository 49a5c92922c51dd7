"""Errors of MCP calls. The tree::

    McpError                 an MCP call could not be made or finished
    ├── McpUnavailable       no such tool, or its server is down (``name``, ``reason``)
    ├── McpTimeout           no result within ``timeout_s``: whether it took effect is unknown
    └── McpApprovalRequired  the org requires a human's approval first; nothing was sent

The tool runner (``harness.tools.mcp_call``) turns each into a tool error the model reads.
"""

from __future__ import annotations


class McpError(Exception):
    """An MCP call could not be made or finished."""


class McpUnavailable(McpError):
    """The tool's server is down (``reason`` says why), or the tool is unknown."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


class McpTimeout(McpError):
    """The call did not finish within ``timeout_s``; whether it took effect is unknown."""

    def __init__(self, name: str, timeout_s: float) -> None:
        super().__init__(f"{name}: no result within {timeout_s:g} s")
        self.name = name
        self.timeout_s = timeout_s


class McpApprovalRequired(McpError):
    """The org requires a human's approval before ``name`` runs; it was not sent."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name}: needs a human's approval")
        self.name = name
