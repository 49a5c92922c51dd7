"""Building the watched channels from ``Settings`` (the composition root's part, issue #27).

Watched channels record their alerts in the alert registry and wake the alert taker.
When the webhook is set up, its intake and taker serve both; without it (no token or
secret), watched channels get an intake and a taker of their own, started and stopped
here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

from bot.alerts.intake import AlertIntake
from bot.alerts.webhook import Taker
from bot.alerts.wiring import Alerts, org_budget, policy_of
from bot.settings import Settings
from bot.slack.app import SlackDeps
from bot.slack.watch import Watch, WatchPolicy
from memory_store import AlertStore, Database, ModelCallLog, WatchedChannels


@contextlib.asynccontextmanager
async def watching(
    settings: Settings, deps: SlackDeps, db: Database, alerts: Alerts | None
) -> AsyncIterator[SlackDeps]:
    """``deps`` with the watched channels (``deps.watch``), while their taker runs.

    Raises:
        ValueError: a malformed ``WARROOM_WATCH_CHANNELS``/``WARROOM_WATCH_SENDERS``
            (the settings' patterns refuse them first).
    """
    policy = WatchPolicy.parse(settings.watch_channels, settings.watch_senders)
    own = None
    if alerts is not None:
        taker = alerts.taker
    else:
        own = taker = Taker(
            AlertIntake(
                store=AlertStore(db),
                sessions=deps.sessions,
                client=deps.client,
                poster=deps.poster,
                enqueue=deps.enqueue,
                bot_user_id=deps.bot_user_id,
                policy=policy_of(settings),
                budget_left=org_budget(ModelCallLog(db), settings.max_org_day_cost_usd),
            )
        )
    watch = Watch(
        channels=WatchedChannels(db),
        policy=policy,
        record=AlertStore(db).record,
        wake=taker.wake,
        own_bot_id=deps.bot_id,
    )
    if own is not None:
        own.start()
    try:
        yield replace(deps, watch=watch)
    finally:
        if own is not None:
            await own.stop()
