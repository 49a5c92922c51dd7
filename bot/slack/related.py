"""``/agent related``: the past incidents this channel's sessions were given at their start
(issue 29; docs/architecture.md §17), with links.

Each session's related incidents were found by searching the org's past incidents' summaries
when it started, and listed in its first message; ``RecallStore.given`` kept them. The reply
names each session's thread (a permalink when the workspace URL is known), and for each
incident its date, channel, title, what fixed it, where the agent reads it
(``/incidents/…``) and its summary's links. Anyone in the channel may ask; the reply is
ephemeral.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.slack.skills.command import SkillsCommand, SkillsCommands
from harness import permalink
from memory_store import Given, RecallStore

USAGE = (
    "`/agent related` lists the past incidents this channel's sessions were given at their "
    "start (found by searching the org's incident summaries), with links."
)
MAX_SESSIONS = 10


class RelatedCommand:
    """The ``/agent related`` handler; replies through the skills commands' ``tell``."""

    def __init__(
        self, recall: RecallStore, skills: SkillsCommands, workspace_url: str | None = None
    ) -> None:
        """``workspace_url``: ``auth.test``'s ``url``, to link each thread (None: no links)."""
        self._recall = recall
        self._skills = skills
        self._workspace_url = workspace_url

    async def handle(self, command: SkillsCommand) -> None:
        """Answer one ``/agent related`` (ephemeral).

        Raises:
            SlackCallFailed, SlackUnreachable: the reply could not be sent.
            DatabaseUnavailable: the rows could not be read.
        """
        await self._skills.tell(command, await self.report(command.org_id, command.channel_id))

    async def report(self, org_id: str, channel_id: str) -> str:
        """The reply's text (Slack mrkdwn), newest session first."""
        given = await self._recall.given(org_id, channel_id, limit=MAX_SESSIONS)
        if not given:
            return (
                f"No session in <#{channel_id}> was given related past incidents yet (they are "
                "found when a session starts, from the org's recorded incidents)."
            )
        lines = [f"*Related past incidents given to sessions in <#{channel_id}>*"]
        for session in given:
            lines.append(self._thread(channel_id, session))
            if not session.items:
                lines.append("  • none found")
            lines += [f"  • {_item(item)}" for item in session.items]
        return "\n".join(lines)

    def _thread(self, channel_id: str, session: Given) -> str:
        when = f"{session.given_at:%Y-%m-%d %H:%M} UTC"
        if self._workspace_url and session.thread_ts:
            link = permalink(self._workspace_url, channel_id, session.thread_ts)
            return f"<{link}|Thread of {when}>:"
        return f"Thread of {when}:"


def _item(item: Mapping[str, Any]) -> str:
    """One incident: date, channel, title, fix, path, links."""
    text = f"{item.get('date', '')} in <#{item.get('channel_id', '')}>: {item.get('title', '')}"
    if item.get("fix"):
        text += f" — fix: {item['fix']}"
    text += f" (`{item.get('path', '')}`)"
    links = [link for link in str(item.get("links", "")).split() if link.startswith("http")]
    if links:
        text += " " + " ".join(f"<{link}|link>" for link in links[:3])
    return text


class PrivateChannels:
    """Remembers which channels are private, for the rule on their past incidents.

    Slack's ``message`` events carry ``channel_type`` (``channel`` public, ``group``
    private: the Events API's ``message.groups``); a mention in a private channel comes
    with such a twin. The first ``group`` event of a channel in this process is recorded
    (``RecallStore.mark_private``, idempotent); later ones cost nothing.
    """

    def __init__(self, recall: RecallStore) -> None:
        """Record into ``recall``."""
        self._recall = recall
        self._known: set[tuple[str, str]] = set()

    def private_channel_of(self, body: Mapping[str, Any], org_id: str) -> tuple[str, str] | None:
        """(org, channel) of an event from a private channel not yet recorded here, else None."""
        event = body.get("event") or {}
        channel = str(event.get("channel") or "")
        if event.get("channel_type") != "group" or not channel:
            return None
        key = (org_id, channel)
        return None if key in self._known else key

    async def remember(self, org_id: str, channel_id: str) -> None:
        """Record the channel as private.

        Raises:
            DatabaseUnavailable: not recorded (the next event of the channel tries again).
        """
        await self._recall.mark_private(org_id, channel_id)
        self._known.add((org_id, channel_id))
