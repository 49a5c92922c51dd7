"""``WatchedChannels`` on both backends: a switch is kept per org and channel, the last
one wins, and ``off`` is remembered (a channel watched by default stays off)."""

from __future__ import annotations

import pytest

from memory_store import Database, WatchedChannels
from tests.memory_store.session_support import ManualClock


async def test_a_channel_nobody_switched_has_no_row(file_db: Database, org: str) -> None:
    assert await WatchedChannels(file_db).get(org, "C0ALERTS") is None
    assert await WatchedChannels(file_db).switched(org) == []


async def test_the_last_switch_wins_and_says_who_and_when(
    file_db: Database, org: str, clock: ManualClock
) -> None:
    # Given a channel switched on by alice
    channels = WatchedChannels(file_db, clock=clock)
    await channels.switch(org, "C0ALERTS", watching=True, actor="U0ALICE")
    # When bob switches it off later
    clock.advance(60)
    await channels.switch(org, "C0ALERTS", watching=False, actor="U0BOB")
    # Then it is off, by bob, at the later time
    found = await channels.get(org, "C0ALERTS")
    assert found is not None
    assert (found.watching, found.changed_by, found.changed_at) == (False, "U0BOB", clock())


async def test_switches_are_kept_per_org_and_channel(file_db: Database, org: str) -> None:
    channels = WatchedChannels(file_db)
    await channels.switch(org, "C0B", watching=True, actor="U1")
    await channels.switch(org, "C0A", watching=False, actor="U1")
    await channels.switch(f"{org}x", "C0A", watching=True, actor="U2")

    mine = await channels.switched(org)

    assert [(c.channel_id, c.watching) for c in mine] == [("C0A", False), ("C0B", True)]
    other = await channels.get(f"{org}x", "C0A")
    assert other is not None
    assert other.watching


async def test_an_empty_channel_id_is_refused(file_db: Database, org: str) -> None:
    with pytest.raises(ValueError, match="channel id"):
        await WatchedChannels(file_db).switch(org, "", watching=True, actor="U1")
