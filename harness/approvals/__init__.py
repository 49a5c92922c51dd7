"""Approvals (docs/architecture.md §13): which tool calls need a human's yes before they run.

``policy`` classifies a Bash command (from the guard's walk), a gateway request and an MCP
tool as allowed, needing approval, or blocked, from rules that are data
(``default_policy.toml``, extended by an org's file).
"""

from harness.approvals.http_clients import HttpCall, http_calls
from harness.approvals.policy import (
    ALLOWED,
    Decision,
    Policy,
    PolicyError,
    ProgramSpec,
    Rule,
    Verdict,
    default_policy,
    mcp_decision,
    parse_policy,
    request_decision,
    with_org_policy,
)
from harness.approvals.reach import EgressReach, NoNetwork, OpenNetwork, Reach, Route
from harness.approvals.sql import SqlKind, SqlVerdict, classify_sql

__all__ = [
    "ALLOWED",
    "Decision",
    "EgressReach",
    "HttpCall",
    "NoNetwork",
    "OpenNetwork",
    "Policy",
    "PolicyError",
    "ProgramSpec",
    "Reach",
    "Route",
    "Rule",
    "SqlKind",
    "SqlVerdict",
    "Verdict",
    "classify_sql",
    "default_policy",
    "http_calls",
    "mcp_decision",
    "parse_policy",
    "request_decision",
    "with_org_policy",
]
