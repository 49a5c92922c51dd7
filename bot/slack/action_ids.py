"""The ``action_id`` of each button Warroom puts in a thread: what Slack sends back when a
person clicks it. Plain constants, so a program that only clicks (``warroom fake-slack``)
loads nothing else."""

from __future__ import annotations

__all__ = ["APPROVE_ACTION_ID", "DENY_ACTION_ID"]

APPROVE_ACTION_ID = "warroom_approve"
"""An approval request's Approve button."""
DENY_ACTION_ID = "warroom_deny"
"""An approval request's Deny button."""
