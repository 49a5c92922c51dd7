"""An approval the session waits for, as checkpoint state, and the decisions that settle it.

(docs/architecture.md §13.) A tool call the policy says needs approval is not run: the
checkpoint gets a ``PendingApproval`` bound to the call's ``tool_use`` id and the SHA-256 of
its canonical input (``input_sha256``), the durable layer posts it to the thread and parks
the session, and a decision comes back as an input of kind ``approval`` (recorded once per
``tool_use`` id by ``SessionStore.notify``, so a double click is one decision) or as the
timed wake-up of its expiry (``expiry_note``). Approving lets exactly that input run once;
denying, an expiry or ``stop`` answer the call with Claude Code's rejected-tool-use result
(``REJECTED``), so the model asks the humans instead of retrying.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

APPROVAL_KIND = "approval"
"""The ``Inbound.kind`` of a decision recorded by the Slack edge."""

REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
    "wait for the user to tell you how to proceed."
)
"""Claude Code's tool result for a tool use the user rejected (its ``REJECT_MESSAGE``, 2.1.x):
the model is trained to stop and ask on it rather than retry."""

_EXPIRY_PREFIX = "Approval expired: "


class ApprovalStatus(StrEnum):
    """Where an approval stands."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    STOPPED = "stopped"


@dataclass(frozen=True)
class PendingApproval:
    """The approval a session's next tool call waits for.

    Attributes:
        tool_use_id: the call it is for.
        tool: the tool's name (``Bash``, ``mcp__pagerduty__resolve_incident``).
        input_sha256: SHA-256 (hex) of the call's canonical input (``input_sha256``).
        action: what would run, exactly: the command, or the tool and its arguments.
        reason: why it needs approval (the policy's reason).
        requested_at, expires_at: aware UTC times; unanswered past ``expires_at`` it is
            denied (the sweeper wakes the session then: ``harness.next_wake``).
        status: pending until decided.
        decided_by: the Slack user id who decided ("" for an expiry).
        decided_at: when it was decided (None while pending).
        message_ts: the thread message with the buttons ("" until the durable layer
            posted it).
    """

    tool_use_id: str
    tool: str
    input_sha256: str
    action: str
    reason: str
    requested_at: datetime
    expires_at: datetime
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: str = ""
    decided_at: datetime | None = None
    message_ts: str = ""

    @property
    def pending(self) -> bool:
        """Whether it still waits for a decision."""
        return self.status is ApprovalStatus.PENDING

    def decided(self, status: ApprovalStatus, by: str, at: datetime) -> PendingApproval:
        """A copy settled as ``status`` by user ``by`` ("" for an expiry) at ``at``."""
        return replace(self, status=status, decided_by=by, decided_at=at)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the checkpoint's encoding)."""
        return {
            "tool_use_id": self.tool_use_id,
            "tool": self.tool,
            "input_sha256": self.input_sha256,
            "action": self.action,
            "reason": self.reason,
            "requested_at": self.requested_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "status": self.status.value,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "message_ts": self.message_ts,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingApproval:
        """Inverse of ``to_dict``.

        Raises:
            KeyError, ValueError: a missing or malformed field.
        """
        decided_at = data.get("decided_at")
        return cls(
            tool_use_id=str(data["tool_use_id"]),
            tool=str(data["tool"]),
            input_sha256=str(data["input_sha256"]),
            action=str(data["action"]),
            reason=str(data["reason"]),
            requested_at=datetime.fromisoformat(data["requested_at"]),
            expires_at=datetime.fromisoformat(data["expires_at"]),
            status=ApprovalStatus(data["status"]),
            decided_by=str(data.get("decided_by", "")),
            decided_at=datetime.fromisoformat(decided_at) if decided_at else None,
            message_ts=str(data.get("message_ts", "")),
        )


def input_sha256(tool: str, tool_input: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a call's canonical form: ``{"input": …, "name": …}`` as JSON with
    sorted keys and no spaces. A button is bound to it, so a changed input is a new call.

    >>> input_sha256("Bash", {"command": "kubectl get pods"})[:12]
    'df62b57c248f'
    """
    canonical = json.dumps(
        {"input": tool_input, "name": tool}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApprovalDecision:
    """A person's decision on an approval, as the Slack edge records it (``to_text``).

    Attributes:
        approve: True to approve, False to deny (``stopped``: the thread's ``stop``).
        tool_use_id, input_sha256: what the button was bound to.
        user_id: who decided; at: when (aware UTC).
        stopped: the decision is the thread's ``stop`` (a denial that says so).
    """

    approve: bool
    tool_use_id: str
    input_sha256: str
    user_id: str
    at: datetime
    stopped: bool = False

    def to_text(self) -> str:
        """The inbox text (JSON)."""
        return json.dumps(
            {
                "approve": self.approve,
                "tool_use_id": self.tool_use_id,
                "input_sha256": self.input_sha256,
                "user_id": self.user_id,
                "at": self.at.isoformat(),
                "stopped": self.stopped,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_text(cls, text: str) -> ApprovalDecision | None:
        """Inverse of ``to_text``; None for text that is not a decision."""
        try:
            data = json.loads(text)
            return cls(
                approve=bool(data["approve"]),
                tool_use_id=str(data["tool_use_id"]),
                input_sha256=str(data["input_sha256"]),
                user_id=str(data["user_id"]),
                at=datetime.fromisoformat(data["at"]),
                stopped=bool(data.get("stopped", False)),
            )
        except (ValueError, KeyError, TypeError):
            return None


def decision_key(tool_use_id: str) -> str:
    """The inbox ``source_key`` of the decision on ``tool_use_id`` (one per call)."""
    return f"approval:{tool_use_id}"


def expiry_note(tool_use_id: str) -> str:
    """The wake-up note that expires the approval of ``tool_use_id``."""
    return _EXPIRY_PREFIX + tool_use_id


def expired_call(note: str) -> str | None:
    """The ``tool_use`` id an expiry note is for; None for any other note."""
    return note[len(_EXPIRY_PREFIX) :] if note.startswith(_EXPIRY_PREFIX) else None


def rejected_text(approval: PendingApproval) -> str:
    """The tool result of a call that was not approved: Claude Code's rejection, then who
    decided, in our words."""
    if approval.status is ApprovalStatus.EXPIRED:
        why = "Nobody approved it in the thread before the request expired."
    elif approval.status is ApprovalStatus.STOPPED:
        why = f"<@{approval.decided_by}> stopped the session in the thread instead."
    else:
        why = f"<@{approval.decided_by}> denied it in the thread."
    return f"{REJECTED}\n{why}"


def utc_now() -> datetime:
    """The current time (aware UTC)."""
    return datetime.now(UTC)
