"""Approve / Deny clicks: who may decide, and recording the decision once (§13).

A click is acked at once; then ``ApprovalButtons.press`` checks it against the session's
committed checkpoint and records the decision with ``SessionStore.notify`` (kind
``approval``, one per ``tool_use`` id: the database keeps the first of two clicks) and wakes
the session. The worker applies it at its next step and updates the message (who, when).
Everything else is answered with an ephemeral message to the clicker and changes nothing:

- a button whose call is no longer the pending one, or whose input hash differs (a stale
  button, after a deploy or a newer request);
- a request already decided (a second click, by anyone);
- a clicker who may not approve: a Slack Connect user of another org, someone outside the
  configured approvers (user ids, or members of user groups: ``usergroups.users.list``), or,
  when the org says so, the person who asked the session (``not_requester``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackCallFailed, slack_call
from bot.slack.approval_messages import ButtonValue, decision_line
from bot.slack.installation import Installation
from harness import (
    APPROVAL_KIND,
    ApprovalDecision,
    Checkpoint,
    InvalidMessage,
    PendingApproval,
    decision_key,
)
from memory_store import Session, SessionStore

logger = logging.getLogger(__name__)

Enqueue = Callable[[str, str], Awaitable[None]]

STALE = (
    "This approval button is out of date: the request it was made for is no longer "
    "waiting (a newer request replaced it, or the command changed). Nothing was done."
)


@dataclass(frozen=True)
class Approvers:
    """Who may decide an approval (settings ``WARROOM_APPROVERS``,
    ``WARROOM_APPROVAL_NOT_REQUESTER``).

    Attributes:
        user_ids: Slack user ids that may decide.
        group_ids: Slack user-group ids (``S…``) whose members may decide.
        not_requester: the person who started the session may not approve its actions.

    With no ids, any member of the installing org may decide (never a Slack Connect user
    of another org).
    """

    user_ids: frozenset[str] = frozenset()
    group_ids: frozenset[str] = frozenset()
    not_requester: bool = False

    @classmethod
    def parse(cls, ids: str, *, not_requester: bool = False) -> Approvers:
        """From a comma- or space-separated list of user (``U…``/``W…``) and user-group
        (``S…``) ids.

        >>> sorted(Approvers.parse("U1, S2 W3").user_ids)
        ['U1', 'W3']
        """
        words = ids.replace(",", " ").split()
        return cls(
            user_ids=frozenset(w for w in words if not w.startswith("S")),
            group_ids=frozenset(w for w in words if w.startswith("S")),
            not_requester=not_requester,
        )


@dataclass
class ApprovalButtons:
    """The Approve and Deny buttons' handler (see the module docstring)."""

    sessions: SessionStore
    client: AsyncWebClient
    enqueue: Enqueue
    approvers: Approvers = field(default_factory=Approvers)
    installation: Installation | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    async def press(self, body: Mapping[str, Any], *, approve: bool, org_id: str) -> None:
        """Handle one click (after its ack). Never raises for a bad click; Slack failures
        are logged.

        Raises:
            DatabaseUnavailable: the store could not be reached (nothing was recorded).
        """
        action = body["actions"][0]
        user = body.get("user") or {}
        user_id = str(user.get("id") or "")
        channel_id = str((body.get("channel") or {}).get("id") or "")
        value = ButtonValue.decode(str(action.get("value") or ""))
        session = await self.sessions.get(value.session_id) if value else None
        if value is None or session is None or session.key.org_id != org_id:
            return  # not ours to answer (another org's, or no such session)
        thread_ts = session.key.thread_ts
        approval = _pending_of(session)
        if (
            approval is None
            or approval.tool_use_id != value.tool_use_id
            or approval.input_sha256 != value.input_sha256
        ):
            await self._tell(channel_id, user_id, thread_ts, STALE)
            return
        if not approval.pending:
            await self._tell(channel_id, user_id, thread_ts, _already(approval))
            return
        refusal = await self._may_not(user, session)
        if refusal is not None:
            await self._tell(channel_id, user_id, thread_ts, refusal)
            return
        decision = ApprovalDecision(
            approve, approval.tool_use_id, approval.input_sha256, user_id, self.clock()
        )
        key = decision_key(approval.tool_use_id)
        token = await self.sessions.notify(
            session.id, kind=APPROVAL_KIND, text=decision.to_text(), source_key=key
        )
        if token is not None:
            await self.enqueue(session.id, token)
            return
        first = await self._recorded(session.id, key)
        if first is not None and first.to_text() != decision.to_text():
            verb = "approved" if first.approve else "stopped" if first.stopped else "denied"
            text = f"<@{first.user_id}> already {verb} this request. Nothing more was done."
            await self._tell(channel_id, user_id, thread_ts, text)

    async def _recorded(self, session_id: str, key: str) -> ApprovalDecision | None:
        """The decision recorded first for ``key`` (the click that won)."""
        for item in reversed(await self.sessions.inbox(session_id)):
            if item.source_ts == key:
                return ApprovalDecision.from_text(item.text)
        return None

    async def _may_not(self, user: Mapping[str, Any], session: Session) -> str | None:
        """Why this clicker may not decide, or None when they may."""
        user_id = str(user.get("id") or "")
        if self._external(user):
            return (
                "Only members of this workspace's organisation can approve Warroom's "
                "actions; your decision was not recorded."
            )
        if self.approvers.not_requester and user_id == session.requester_id:
            return (
                "You started this session, and this workspace asks someone else to approve "
                "its actions. Ask a teammate to decide; nothing was recorded."
            )
        allowed = self.approvers.user_ids | self.approvers.group_ids
        if not allowed or user_id in self.approvers.user_ids:
            return None
        for group_id in sorted(self.approvers.group_ids):
            if user_id in await self._members(group_id):
                return None
        return (
            "You are not one of the people this workspace allows to approve Warroom's "
            "actions; your decision was not recorded."
        )

    def _external(self, user: Mapping[str, Any]) -> bool:
        """A Slack Connect user of another org: their ``team_id`` is not the installing
        workspace's (a sibling workspace of the same Grid org counts as ours only when the
        payload says so)."""
        team = str(user.get("team_id") or "")
        if self.installation is None or not team:
            return False
        return team not in (self.installation.team_id, self.installation.enterprise_id)

    async def _members(self, group_id: str) -> frozenset[str]:
        try:
            answer = await slack_call(
                "usergroups.users.list", self.client.usergroups_users_list(usergroup=group_id)
            )
        except SlackCallFailed as exc:
            logger.warning("approvers: members of %s unknown: %s", group_id, exc)
            return frozenset()
        return frozenset(str(u) for u in answer.get("users") or ())

    async def _tell(self, channel_id: str, user_id: str, thread_ts: str, text: str) -> None:
        """An ephemeral reply only the clicker sees."""
        try:
            await slack_call(
                "chat.postEphemeral",
                self.client.chat_postEphemeral(
                    channel=channel_id, user=user_id, text=text, thread_ts=thread_ts
                ),
            )
        except SlackCallFailed as exc:
            logger.warning("approval reply to %s not shown: %s", user_id, exc)


def _pending_of(session: Session) -> PendingApproval | None:
    """The approval in the session's committed checkpoint, or None."""
    try:
        return Checkpoint.from_json(session.checkpoint).approval
    except InvalidMessage:
        return None


def _already(approval: PendingApproval) -> str:
    return f"This request was already decided ({decision_line(approval)}). Nothing more was done."
