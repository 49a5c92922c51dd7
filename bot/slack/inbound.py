"""An inbound Slack message event (``app_mention`` or ``message``), parsed into one typed value.

Shapes are Slack's Events API callbacks (docs.slack.dev, "message" and "app_mention"
events; the ``message_changed`` and ``message_deleted`` subtypes). The org is
``authorizations[0].enterprise_id or team_id``: in an Enterprise Grid shared channel
the event's own ``team`` is the sender's workspace, not the installation's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from bot.alerts.model import Alert
from bot.alerts.slack_alert import alert_from_message
from bot.alerts.slack_view import Sender, sender_of
from bot.slack.content import message_content
from bot.slack.text import mentions

logger = logging.getLogger(__name__)

# Subtypes that are a person posting (docs.slack.dev, "message" event subtypes).
_POSTED_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})


class MessageKind(StrEnum):
    """What happened to the message."""

    POSTED = "posted"
    EDITED = "edited"  # a ``message_changed`` whose text changed, or its ``app_mention`` twin
    DELETED = "deleted"  # ``message_deleted``, or the Slackbot tombstone left in its place
    OTHER = "other"  # joins, topic changes, unfurls, reply-count updates, …


@dataclass(frozen=True)
class InboundMessage:
    """One message event, as the intake needs it.

    Attributes:
        event_id: Slack's ``event_id`` (retries of one delivery share it).
        org_id: ``enterprise_id or team_id`` of the installation.
        channel_id: the channel.
        ts: the message's ``ts`` (for an edit or deletion: the changed message's).
        thread_ts: the thread root's ``ts``; None for a message outside any thread.
        event_ts: the event's own ``ts`` (equals ``ts`` for a new message; the two
            events Slack sends for one @mention share it).
        user_id: the author (``""`` when Slack gives none).
        text: what people see of it (``content.message_content``: text, blocks,
            attachments, forwarded messages, files), without the bot's mention.
        mentions_bot: the raw text mentions the bot.
        from_bot: written by a bot or app (ours or another), never a person.
        kind: posted, edited, deleted or other.
        edited_ts: ``edited.ts`` of an edit: the same in the ``message_changed`` event
            and in the ``app_mention`` Slack sends when the edit added the mention.
        external: the author is not a member of the installing workspace (a Slack
            Connect user, or another org's app, in an externally shared channel).
        files: the message's file objects (``id``, ``name``, ``size``, …).
        sender: the bot or app that posted it (None: a person).
        alert: what a new top-level post of another bot or app says, read as an alert
            (``bot.alerts.slack_alert``), or the resolve an app's edit of such a post
            makes (firing → resolved); None for anything else. Only a watched
            channel acts on it (``bot.slack.watch``).
    """

    event_id: str
    org_id: str
    channel_id: str
    ts: str
    thread_ts: str | None
    event_ts: str
    user_id: str
    text: str
    mentions_bot: bool
    from_bot: bool
    kind: MessageKind
    edited_ts: str | None = None
    external: bool = False
    files: tuple[Mapping[str, Any], ...] = ()
    sender: Sender | None = None
    alert: Alert | None = None

    @property
    def thread_root(self) -> str:
        """The ``ts`` naming the message's thread (its own ``ts`` when it starts one)."""
        return self.thread_ts or self.ts

    @property
    def in_thread(self) -> bool:
        """True for a reply inside a thread (not the thread's root message)."""
        return self.thread_ts is not None and self.thread_ts != self.ts

    @property
    def sighting_key(self) -> str:
        """``"<org>:<channel>:<event ts>"``: one key for both events of one @mention
        (org-scoped, so tenants never shadow each other's messages); an edit is keyed
        by its ``edited.ts``, which its two events share."""
        return f"{self.org_id}:{self.channel_id}:{self.edited_ts or self.event_ts}"

    @property
    def source_ts(self) -> str:
        """The inbox key: the message ``ts``; an edit is keyed by the edit too (≤ 64
        chars), so the ``message_changed`` and the ``app_mention`` of one edit are
        recorded once."""
        if self.kind is MessageKind.EDITED:
            return f"{self.ts}/{self.edited_ts or self.event_ts}"
        return self.ts


def org_id_of(body: Mapping[str, Any]) -> str:
    """The org of a callback: ``authorizations[0].enterprise_id or team_id``.

    Falls back to the body's own ``enterprise_id or team_id`` when Slack sent no
    ``authorizations``.

    >>> org_id_of({"team_id": "T1", "authorizations": [{"enterprise_id": "E1", "team_id": "T1"}]})
    'E1'
    >>> org_id_of({"team_id": "T1", "authorizations": [{"enterprise_id": None, "team_id": "T1"}]})
    'T1'
    """
    first = (body.get("authorizations") or [{}])[0]
    org = first.get("enterprise_id") or first.get("team_id")
    return str(org or body.get("enterprise_id") or body.get("team_id") or "")


def parse_message_event(body: Mapping[str, Any], *, bot_user_id: str) -> InboundMessage:
    """Parse an ``event_callback`` body carrying an ``app_mention`` or ``message`` event.

    Raises:
        KeyError: the body has no ``event`` or the event no ``channel``/``ts``.
    """
    event = body["event"]
    subtype = event.get("subtype")
    message, kind = _content(event, subtype)
    raw = str(message.get("text") or "")
    user = str(message.get("user") or "")
    edited = message.get("edited") or {}
    if kind is MessageKind.POSTED and edited.get("ts"):
        kind = MessageKind.EDITED  # the ``app_mention`` of an edit that added the mention
    sender = sender_of(message)
    ts = str(message.get("ts") or event["ts"])
    top_level = message.get("thread_ts") in (None, ts)
    alert = None
    if sender is not None and top_level and user != bot_user_id:
        if kind is MessageKind.POSTED:
            alert = _alert(message, sender, str(event["channel"]), bot_user_id)
        elif subtype == "message_changed":
            alert = _resolved_by_edit(event, message, sender, bot_user_id)
    return InboundMessage(
        event_id=str(body.get("event_id") or ""),
        org_id=org_id_of(body),
        channel_id=str(event["channel"]),
        ts=ts,
        thread_ts=message.get("thread_ts"),
        event_ts=str(event["ts"]),
        user_id=user,
        text=message_content(message, bot_user_id=bot_user_id),
        mentions_bot=mentions(raw, bot_user_id),
        from_bot=_from_bot(message, user, bot_user_id),
        kind=kind,
        edited_ts=str(edited["ts"]) if edited.get("ts") else None,
        external=_external(body, message),
        files=tuple(f for f in message.get("files") or [] if isinstance(f, Mapping)),
        sender=sender,
        alert=alert,
    )


def _alert(
    message: Mapping[str, Any], sender: Sender, channel_id: str, bot_user_id: str
) -> Alert | None:
    """The post read as an alert; None (logged) when it cannot be one."""
    try:
        return alert_from_message(message, sender, channel_id=channel_id, bot_user_id=bot_user_id)
    except ValueError as exc:
        logger.warning("a post of %s in %s is not an alert: %s", sender.name, channel_id, exc)
        return None


def _resolved_by_edit(
    event: Mapping[str, Any], message: Mapping[str, Any], sender: Sender, bot_user_id: str
) -> Alert | None:
    """An app's edit of its own alert post that turns it from firing to resolved (PagerDuty's
    app, for one, updates the incident's post in place): the resolve, as a delivery of its
    own (keyed by the edit's event ``ts``). Any other edit of an app's post is no alert."""
    channel = str(event["channel"])
    previous = event.get("previous_message") or {}
    before = _alert(previous, sender_of(previous) or sender, channel, bot_user_id)
    after = _alert(message, sender, channel, bot_user_id)
    if before is None or after is None or not before.firing or after.firing:
        return None
    return replace(after, delivery_id=f"{after.delivery_id}:edit:{event['ts']}")


def _content(
    event: Mapping[str, Any], subtype: str | None
) -> tuple[Mapping[str, Any], MessageKind]:
    if subtype == "message_changed":
        new, old = event.get("message") or {}, event.get("previous_message") or {}
        if new.get("subtype") == "tombstone":  # a deleted message that had replies
            return new, MessageKind.DELETED
        edited = new.get("text") != old.get("text")
        return new, MessageKind.EDITED if edited else MessageKind.OTHER
    if subtype == "message_deleted":
        return event.get("previous_message") or event, MessageKind.DELETED
    if subtype == "bot_message" or subtype in _POSTED_SUBTYPES:
        return event, MessageKind.POSTED
    return event, MessageKind.OTHER


def _external(body: Mapping[str, Any], message: Mapping[str, Any]) -> bool:
    """Whether the author is outside the installing workspace: the channel is shared
    with another org (``is_ext_shared_channel``) and the author's team
    (``user_team``, else ``team``, else an app's ``bot_profile.team_id``) is not the installation's
    (``authorizations[0].team_id``). A member of a sibling workspace of the same
    Enterprise Grid org in such a channel also counts as external: events do not say
    which org a team belongs to."""
    if not body.get("is_ext_shared_channel"):
        return False
    installed = (body.get("authorizations") or [{}])[0].get("team_id") or body.get("team_id")
    event = body.get("event") or {}
    profile = message.get("bot_profile") or {}
    team = (
        message.get("user_team")
        or event.get("user_team")
        or message.get("team")
        or profile.get("team_id")  # an app's post: the team of the app's install
    )
    return bool(team) and team != installed


def _from_bot(message: Mapping[str, Any], user: str, bot_user_id: str) -> bool:
    return (
        bool(message.get("bot_id"))
        or message.get("subtype") == "bot_message"
        or user == bot_user_id
        or not user
    )
