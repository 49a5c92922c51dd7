"""The approval message in a thread: the exact action, why, who asked, Approve / Deny (§13).

Pure rendering, like ``render``. Each button's ``value`` binds the session, the ``tool_use``
id and the SHA-256 of the call's canonical input (``ButtonValue``), so a click acts on exactly
that call and input or on nothing. Once decided, the message is updated in place
(``chat.update``): the buttons go, and a line says who decided and when (UTC).

Slack limits: a ``section`` text ≤ 3,000 characters (a long command is cut in the middle
of the message, never in what is run: the exact input is bound by its hash), a button
``value`` ≤ 2,000 characters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bot.slack.action_ids import APPROVE_ACTION_ID as APPROVE_ACTION_ID
from bot.slack.action_ids import DENY_ACTION_ID as DENY_ACTION_ID
from bot.slack.render import Block, SlackMessage, escape_mrkdwn, section, truncate
from harness import ApprovalStatus, PendingApproval

MAX_ACTION_CHARS = 2_600  # what fits in one section with the fences and the reason


@dataclass(frozen=True)
class ButtonValue:
    """What an Approve or Deny button is bound to."""

    session_id: str
    tool_use_id: str
    input_sha256: str

    def encode(self) -> str:
        """The button's ``value`` (compact JSON)."""
        return json.dumps(
            {"s": self.session_id, "t": self.tool_use_id, "h": self.input_sha256},
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, value: str) -> ButtonValue | None:
        """Inverse of ``encode``; None for a value that is not one.

        >>> ButtonValue.decode(ButtonValue("s1", "toolu_1", "ab").encode())
        ButtonValue(session_id='s1', tool_use_id='toolu_1', input_sha256='ab')
        >>> ButtonValue.decode("s1") is None
        True
        """
        try:
            data = json.loads(value)
            return cls(str(data["s"]), str(data["t"]), str(data["h"]))
        except (ValueError, KeyError, TypeError):
            return None


def render_approval(
    approval: PendingApproval, *, session_id: str, requester_id: str
) -> SlackMessage:
    """The message asking for approval (with buttons while pending), or, once decided,
    the same message saying who decided and when."""
    shown = escape_mrkdwn(approval.action.replace("```", "`\u200b``"))
    if len(shown) > MAX_ACTION_CHARS:
        half = MAX_ACTION_CHARS // 2
        shown = f"{shown[:half]}\n… ({len(approval.action):,} characters in all) …\n{shown[-half:]}"
    what = "run" if approval.tool == "Bash" else "call"
    head = (
        f":raised_hand: *Approval needed* · <@{requester_id}>'s agent wants to {what}:\n"
        f"```{shown}```\n"
        f"*Why:* {escape_mrkdwn(truncate(approval.reason, 300))}"
    )
    blocks: list[Block] = [section(head)]
    if approval.pending:
        expires = approval.expires_at.strftime("%H:%M UTC")
        blocks.append(section(f"_Unanswered, it is denied at {expires}._"))
        blocks.append(_buttons(approval, session_id))
    else:
        blocks.append(section(decision_line(approval)))
    state = "Approval needed" if approval.pending else decision_line(approval)
    return SlackMessage(text=truncate(state, 150), blocks=tuple(blocks))


def decision_line(approval: PendingApproval) -> str:
    """``:white_check_mark: Approved by <@U1> at 14:02 UTC`` and the like."""
    at = approval.decided_at.strftime("%H:%M UTC") if approval.decided_at else ""
    by = f"<@{approval.decided_by}>"
    return {
        ApprovalStatus.APPROVED: f":white_check_mark: Approved by {by} at {at}",
        ApprovalStatus.DENIED: f":no_entry_sign: Denied by {by} at {at}",
        ApprovalStatus.STOPPED: f":octagonal_sign: Stopped by {by} at {at}",
        ApprovalStatus.EXPIRED: f":hourglass: Expired unanswered at {at}",
        ApprovalStatus.PENDING: "Approval needed",
    }[approval.status]


def _buttons(approval: PendingApproval, session_id: str) -> Block:
    value = ButtonValue(session_id, approval.tool_use_id, approval.input_sha256).encode()
    return {
        "type": "actions",
        "block_id": "warroom_approval",
        "elements": [
            {
                "type": "button",
                "action_id": APPROVE_ACTION_ID,
                "text": {"type": "plain_text", "text": "Approve"},
                "style": "primary",
                "value": value,
            },
            {
                "type": "button",
                "action_id": DENY_ACTION_ID,
                "text": {"type": "plain_text", "text": "Deny"},
                "style": "danger",
                "value": value,
            },
        ],
    }
