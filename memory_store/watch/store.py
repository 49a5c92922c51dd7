"""``WatchedChannels``: the ``watched_channels`` rows (``/agent watch on|off|status``).

A switch is one ``INSERT … ON CONFLICT DO UPDATE`` (the last switch wins; who and when
are kept). Reads are one indexed ``SELECT``: the Slack edge asks once per top-level
bot message, before the event's ack.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from memory_store.clock import Clock, utc_now
from memory_store.db import Database
from memory_store.upsert import insert
from memory_store.watch.tables import watched_channels

_W = watched_channels.c


@dataclass(frozen=True)
class ChannelWatch:
    """One channel's switch.

    Attributes:
        org_id, channel_id: the channel (``enterprise_id or team_id``, ``C…``/``G…``).
        watching: True: alerting apps' top-level messages there start sessions.
        changed_by: the Slack user id who switched it last.
        changed_at: when (aware UTC).
    """

    org_id: str
    channel_id: str
    watching: bool
    changed_by: str
    changed_at: datetime


class WatchedChannels:
    """The watched-channel switches over ``Database`` (migrated); times from ``clock``."""

    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        self._db = db
        self._clock = clock

    async def switch(
        self, org_id: str, channel_id: str, *, watching: bool, actor: str
    ) -> ChannelWatch:
        """Switch the channel's watch on or off (again: updates who and when).

        Raises:
            ValueError: an empty org or channel id.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if not org_id or not channel_id:
            raise ValueError("a watched channel needs an org id and a channel id")
        now = self._clock()
        values = {"watching": watching, "changed_by": actor, "changed_at": now}
        stmt = (
            insert(watched_channels, is_postgres=self._db.is_postgres)
            .values(org_id=org_id, channel_id=channel_id, **values)
            .on_conflict_do_update(index_elements=["org_id", "channel_id"], set_=values)
        )
        async with self._db.write() as conn:
            await conn.execute(stmt)
        return ChannelWatch(org_id, channel_id, watching, actor, now)

    async def get(self, org_id: str, channel_id: str) -> ChannelWatch | None:
        """The channel's switch; None when nobody switched it (the default applies).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(watched_channels).where(_W.org_id == org_id, _W.channel_id == channel_id)
                )
            ).one_or_none()
        return None if row is None else ChannelWatch(**row._mapping)

    async def switched(self, org_id: str) -> list[ChannelWatch]:
        """Every switched channel of the org (on or off), by channel id.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(watched_channels).where(_W.org_id == org_id).order_by(_W.channel_id)
            )
            return [ChannelWatch(**row._mapping) for row in rows]
