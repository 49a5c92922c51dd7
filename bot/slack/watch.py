"""Watched channels (issue #27): where an alerting app's post starts a session unasked.

In a watched channel, every new top-level message from a sender that counts starts an
investigation in its thread with no mention: the message is read into an ``Alert``
(``bot.alerts.slack_alert``) and recorded in the alert registry before the event's ack
(a ``NewAlert`` whose ``posted_ts`` is the message, so its thread is the message's
own), then the alert taker (``bot.alerts.webhook.Taker``) decides: a new problem
starts a session there, a repeat of an open one is a reply in the first thread, a
resolve tells that session. Whether a channel is watched: its ``/agent watch on|off``
switch (``memory_store.WatchedChannels``), else the default (``WARROOM_WATCH_CHANNELS``).

Which senders count (``WatchPolicy``): bots and apps only (a person's top-level message
starts nothing, as before), never Warroom itself, and when ``WARROOM_WATCH_SENDERS``
names bot or app ids (``B…``/``A…``), only those.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.alerts.model import Alert
from bot.alerts.slack_view import Sender
from memory_store import NewAlert, WatchedChannels

RecordAlerts = Callable[[list[NewAlert]], Awaitable[list[int]]]
"""``AlertStore.record``: new rows' ids (a redelivered message's row exists: none)."""


@dataclass(frozen=True)
class WatchPolicy:
    """Which channels are watched by default, and whose posts count there.

    Attributes:
        default_channels: channel ids watched until someone switches them off.
        senders: bot or app ids whose posts count; empty: every bot and app.
    """

    default_channels: frozenset[str] = frozenset()
    senders: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, channels: str, senders: str) -> WatchPolicy:
        """From the settings' comma-separated lists.

        >>> policy = WatchPolicy.parse("C1, C2", "")
        >>> sorted(policy.default_channels), policy.senders
        (['C1', 'C2'], frozenset())

        Raises:
            ValueError: a sender that is not a bot (``B…``) or app (``A…``) id, or a
                channel that is not a channel id (``C…``/``G…``).
        """
        channel_ids = frozenset(c.strip() for c in channels.split(",") if c.strip())
        sender_ids = frozenset(s.strip() for s in senders.split(",") if s.strip())
        bad = [c for c in channel_ids if c[0] not in "CG"]
        bad += [s for s in sender_ids if s[0] not in "BA"]
        if bad:
            raise ValueError(f"not a channel (C…/G…) or bot/app (B…/A…) id: {', '.join(bad)}")
        return cls(channel_ids, sender_ids)

    def counts(self, sender: Sender, *, own_bot_id: str) -> bool:
        """Whether ``sender``'s posts are alerts (never Warroom's own).

        >>> p = WatchPolicy(senders=frozenset({"A0DD"}))
        >>> p.counts(Sender("B1", "A0DD", "Datadog"), own_bot_id="B0ME")
        True
        >>> p.counts(Sender("B2", "A0GH", "GitHub"), own_bot_id="B0ME")
        False
        >>> WatchPolicy().counts(Sender("B0ME", "A0ME", "warroom"), own_bot_id="B0ME")
        False
        """
        if own_bot_id and sender.bot_id == own_bot_id:
            return False
        return not self.senders or bool(sender.ids & self.senders)


@dataclass(frozen=True)
class Watch:
    """The watched channels' part of the intake (see the module docstring).

    Attributes:
        channels: the ``/agent watch`` switches.
        policy: defaults and senders.
        record: records alerts (``AlertStore.record``).
        wake: tells the alert taker something was recorded.
        own_bot_id: Warroom's own ``bot_id`` (``auth.test``): its posts never count.
    """

    channels: WatchedChannels
    policy: WatchPolicy
    record: RecordAlerts
    wake: Callable[[], None]
    own_bot_id: str = ""

    async def watching(self, org_id: str, channel_id: str) -> bool:
        """Whether ``channel_id`` is watched (its switch, else the default).

        Raises:
            DatabaseUnavailable: the switch could not be read.
        """
        switched = await self.channels.get(org_id, channel_id)
        if switched is not None:
            return switched.watching
        return channel_id in self.policy.default_channels

    async def take(
        self, alert: Alert, sender: Sender, *, org_id: str, channel_id: str, ts: str
    ) -> bool:
        """Record ``alert``, posted as message ``ts`` of ``channel_id``, if the channel
        is watched and ``sender`` counts; True when recorded now (call ``wake`` after
        the ack). A redelivered message is recorded once.

        Raises:
            DatabaseUnavailable: nothing was recorded.
        """
        if not self.policy.counts(sender, own_bot_id=self.own_bot_id):
            return False
        if not await self.watching(org_id, channel_id):
            return False
        row = NewAlert(
            org_id=org_id,
            source=alert.source,
            delivery_id=alert.delivery_id,
            dedupe_key=alert.dedupe_key,
            firing=alert.firing,
            title=alert.title,
            alert_json=alert.to_json(),
            channel_id=channel_id,
            posted_ts=ts,
        )
        return bool(await self.record([row]))
