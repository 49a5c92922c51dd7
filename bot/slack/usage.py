"""``/agent usage``: what this channel and the org spent on the model, today and this month.

Read from the model-call ledger (§14): every answered call, priced when it returned.
Days and months are UTC. Anyone in the channel may ask.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.slack.skills.command import SkillsCommand, SkillsCommands
from bot.slack.spend import spend_text
from memory_store import Clock, ModelCallLog, utc_now

USAGE = (
    "`/agent usage` shows what this channel and the org spent on the model, today and this month."
)


class UsageCommand:
    """The ``/agent usage`` handler; replies through the skills commands' ``tell``."""

    def __init__(self, ledger: ModelCallLog, skills: SkillsCommands, clock: Clock = utc_now):
        self._ledger = ledger
        self._skills = skills
        self._clock = clock

    async def handle(self, command: SkillsCommand) -> None:
        """Answer one ``/agent usage`` (ephemeral).

        Raises:
            SlackCallFailed, SlackUnreachable: the reply could not be sent.
            DatabaseUnavailable: the ledger could not be read.
        """
        await self._skills.tell(command, await self.report(command.org_id, command.channel_id))

    async def report(self, org_id: str, channel_id: str) -> str:
        """The reply's text: the channel's and the org's spend today and this month (UTC)."""
        now = self._clock().astimezone(UTC)
        day = datetime(now.year, now.month, now.day, tzinfo=UTC)
        month = datetime(now.year, now.month, 1, tzinfo=UTC)
        lines = [f"*Model spend* (UTC; {now:%Y-%m-%d})"]
        for label, channel in ((f"<#{channel_id}>", channel_id), ("The org", None)):
            today = await self._ledger.spent(org_id, since=day, channel_id=channel)
            this_month = await self._ledger.spent(org_id, since=month, channel_id=channel)
            lines.append(
                f"{label}: today {spend_text(today)} · this month {spend_text(this_month)}"
            )
        return "\n".join(lines)
