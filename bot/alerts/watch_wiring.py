"""Building the watched channels from ``Settings`` (the composition root's part, issue #27).

Watched channels record their alerts in the alert registry and wake the alert taker
that ``build_alerts`` made (it runs whether or not the webhook is set up).
"""

from __future__ import annotations

from dataclasses import replace

from bot.alerts.wiring import Alerts
from bot.settings import Settings
from bot.slack.app import SlackDeps
from bot.slack.watch import Watch, WatchPolicy
from memory_store import AlertStore, Database, WatchedChannels


def with_watch(settings: Settings, deps: SlackDeps, db: Database, alerts: Alerts) -> SlackDeps:
    """``deps`` with the watched channels (``deps.watch``): ``WARROOM_WATCH_CHANNELS``
    watched by default, ``WARROOM_WATCH_SENDERS`` the senders that count, alerts recorded
    in ``db`` and taken by ``alerts.taker`` (start it with the app).

    Raises:
        ValueError: a malformed ``WARROOM_WATCH_CHANNELS``/``WARROOM_WATCH_SENDERS``
            (the settings' patterns refuse them first).
    """
    watch = Watch(
        channels=WatchedChannels(db),
        policy=WatchPolicy.parse(settings.watch_channels, settings.watch_senders),
        record=AlertStore(db).record,
        wake=alerts.taker.wake,
        own_bot_id=deps.bot_id,
    )
    return replace(deps, watch=watch)
