"""``/agent watch on|off|status``: make the channel an alert channel, or stop (issue #27).

``status`` is for everyone; ``on`` and ``off`` follow the same allow-list as changing
skills and memory (``WARROOM_SKILL_EDITORS``). The switch is stored per org and channel
(``memory_store.WatchedChannels``) and wins over the default (``WARROOM_WATCH_CHANNELS``).
"""

from __future__ import annotations

from bot.slack.skills.command import SkillsCommand, SkillsCommands
from bot.slack.watch import Watch
from memory_store import ChannelWatch

USAGE = (
    "`/agent watch on` makes this channel an alert channel: each new post of an alerting "
    "app (Alertmanager, Grafana, PagerDuty, Datadog, Sentry, Opsgenie…) starts an "
    "investigation in its thread, no mention needed; `/agent watch off` stops that; "
    "`/agent watch status` says which it is."
)


class WatchCommand:
    """The ``/agent watch`` handler over the watched channels (None: not set up here)."""

    def __init__(self, watch: Watch | None, skills: SkillsCommands) -> None:
        self._watch = watch
        self._skills = skills

    async def handle(self, command: SkillsCommand) -> None:
        """Answer one ``/agent watch …`` (``command.words`` start with ``watch``).

        Raises:
            DatabaseUnavailable: the switch could not be read or written.
            SlackCallFailed, SlackUnreachable: the reply could not be sent.
        """
        words = command.words[1:] if command.words[:1] == ("watch",) else command.words
        verb = words[0].lower() if words else "status"
        if self._watch is None:
            await self._skills.tell(command, "Watched channels are not set up here.")
        elif verb in ("on", "off"):
            if await self._skills.may_edit(command):
                await self._switch(command, self._watch, on=verb == "on")
        elif verb == "status":
            await self._skills.tell(command, await self._status(command, self._watch))
        else:
            await self._skills.tell(command, USAGE)

    async def _switch(self, command: SkillsCommand, watch: Watch, *, on: bool) -> None:
        await watch.channels.switch(
            command.org_id, command.channel_id, watching=on, actor=command.user_id
        )
        if on:
            text = (
                f"<#{command.channel_id}> is now watched: {_senders(watch)} "
                "starts an investigation in its thread. Repeats of one problem join its "
                "first thread. Reply `stop` there (or press Stop) to end one. I must be "
                "in the channel to see its posts (`/invite @warroom`)."
            )
        else:
            text = f"<#{command.channel_id}> is no longer watched: only mentions start me here."
        await self._skills.tell(command, text)

    async def _status(self, command: SkillsCommand, watch: Watch) -> str:
        switched = await watch.channels.get(command.org_id, command.channel_id)
        watching = await watch.watching(command.org_id, command.channel_id)
        state = "watched" if watching else "not watched"
        why = _why(switched, default=command.channel_id in watch.policy.default_channels)
        tail = f" There, {_senders(watch)} starts an investigation." if watching else ""
        return f"<#{command.channel_id}> is {state} ({why}).{tail}"


def _why(switched: ChannelWatch | None, *, default: bool) -> str:
    if switched is not None:
        verb = "on" if switched.watching else "off"
        return (
            f"switched {verb} by <@{switched.changed_by}> "
            f"on {switched.changed_at:%Y-%m-%d %H:%M} UTC"
        )
    return "watched from the start by the settings" if default else "the default"


def _senders(watch: Watch) -> str:
    if watch.policy.senders:
        listed = ", ".join(sorted(watch.policy.senders))
        return f"each new top-level post of these apps ({listed})"
    return "each new top-level post of a bot or app (not a person's, not mine)"
