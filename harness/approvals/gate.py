"""The gate a tool call passes before it runs: the policy's decision for that call.

``ApprovalGate`` is what the loop is given (``Collaborators.approvals``): the policy in force,
how long an approval may wait (``timeout_s``), and what the session's sandbox can reach
(``reach``: the egress rules, for requests in a command and for code the policy cannot
read). ``decide`` classifies one ``tool_use``:

- ``Bash``: the command through the guard first (a command the guard refuses is left to the
  tool, which refuses it: nobody is asked to approve what cannot run), then the policy, off
  the event loop (both walk the parse);
- an MCP tool: the org's allow/ask/deny for it (``mcp_decision``);
- every other tool (Read, Write, Edit, Glob, Grep, TodoWrite, Skill, ToolSearch): allowed;
  they touch only the org's files and the sandbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness.approvals.pending import utc_now
from harness.approvals.policy import ALLOWED, Decision, Policy, default_policy, mcp_decision
from harness.approvals.reach import OpenNetwork, Reach
from harness.guard.check import Deny, check_bash
from harness.mcp.policy import Approval

DEFAULT_TIMEOUT_S = 30 * 60.0
"""Seconds an approval waits for a decision before it is denied (``WARROOM_APPROVAL_TIMEOUT_S``)."""


@dataclass(frozen=True)
class ApprovalGate:
    """The approval policy as the loop applies it.

    Attributes:
        policy: the rules in force (shipped and the deployment's) for every org without
            its own policy in ``org_policies``.
        org_policies: org id (``enterprise_id or team_id``) → that org's policy.
        timeout_s: seconds an approval waits before it expires (denied).
        reach: what the sandbox can reach (``EgressReach`` over the gateway's rules,
            ``NoNetwork``, ``OpenNetwork``); by default the worst, an open network.
        clock: the current time (aware UTC).
    """

    policy: Policy = field(default_factory=default_policy)
    org_policies: Mapping[str, Policy] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    reach: Reach = field(default_factory=OpenNetwork)
    clock: Callable[[], datetime] = utc_now

    def policy_for(self, org_id: str | None) -> Policy:
        """The policy of ``org_id``: its own, else the deployment's (None: the latter)."""
        return self.org_policies.get(org_id, self.policy) if org_id else self.policy

    async def decide(
        self,
        name: str,
        tool_input: Mapping[str, Any],
        *,
        mcp_approval: Approval | None = None,
        org_id: str | None = None,
    ) -> Decision:
        """The decision for a call of tool ``name`` with ``tool_input`` (unvalidated), by
        the policy of ``org_id`` (``policy_for``).

        ``mcp_approval``: the org's decision for an MCP tool (None: not an MCP tool, or
        one the session cannot call, which the tool itself refuses).
        """
        if name == "Bash":
            command = tool_input.get("command")
            if not isinstance(command, str) or not command:
                return ALLOWED  # the tool refuses malformed input itself
            policy = self.policy_for(org_id)
            return await asyncio.to_thread(self._bash, command, policy)  # CPU-bound
        if mcp_approval is not None:
            return mcp_decision(mcp_approval, name)
        return ALLOWED

    def _bash(self, command: str, policy: Policy) -> Decision:
        if isinstance(check_bash(command), Deny):
            return ALLOWED  # the Bash tool refuses it with the guard's reason
        return policy.bash(command, reach=self.reach)
