"""Which MCP tools the model may call on its own: the org's approval policy (architecture §13).

A tool is ``allow`` (called when the model asks), ``ask`` (needs a human's approval first) or
``deny`` (left out of the tool list altogether). The org says so per server in Warroom's own key
of the ``.mcp.json`` entry, so the file stays Claude Code's::

    "grafana": {"type": "http", "url": "…",
                "warroom": {"default": "ask", "tools": {"search_dashboards": "allow"}}}

A tool the org names gets that decision; otherwise the server's ``default``; otherwise the tool's
own MCP annotation decides: ``readOnlyHint: true`` is ``allow``, anything else ``ask`` (the MCP
specification's default for ``readOnlyHint`` is false: a tool is assumed to change things).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Approval(StrEnum):
    """What happens when the model calls a tool."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


@dataclass(frozen=True)
class ServerPolicy:
    """A server's approval policy as the org wrote it.

    Attributes:
        default: the decision for the server's tools the org does not name; None: decided by
            each tool's ``readOnlyHint``.
        tools: the server's own tool name → its decision.
    """

    default: Approval | None = None
    tools: Mapping[str, Approval] = field(default_factory=dict)

    def decide(self, tool: str, *, read_only: bool) -> Approval:
        """The decision for ``tool`` (the server's own name), ``read_only`` as it declares.

        >>> policy = ServerPolicy(tools={"delete_dashboard": Approval.DENY})
        >>> policy.decide("delete_dashboard", read_only=False).value
        'deny'
        >>> policy.decide("search", read_only=True).value
        'allow'
        >>> policy.decide("create", read_only=False).value
        'ask'
        >>> ServerPolicy(default=Approval.ALLOW).decide("create", read_only=False).value
        'allow'
        """
        if tool in self.tools:
            return self.tools[tool]
        if self.default is not None:
            return self.default
        return Approval.ALLOW if read_only else Approval.ASK


def approval_needed_text(name: str) -> str:
    """The tool error the model reads when it calls an ``ask`` tool (until approvals exist)."""
    return (
        f"{name} was not run: the organisation requires a human's approval before this tool "
        "runs, and approvals cannot be requested from Warroom yet. Do not retry it; use "
        "read-only tools instead, or tell the user what you would run and why so a person "
        "can do it."
    )
