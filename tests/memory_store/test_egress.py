"""The egress audit log on both backends: rows written once, read back per session in order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memory_store import Database, EgressEntry, EgressLog, EgressTokens, SessionStore, TokenOwner
from tests.memory_store.session_support import new_key

T0 = datetime(2026, 12, 1, 14, 2, tzinfo=UTC)


def _entry(session: str, n: int, outcome: str = "injected") -> EgressEntry:
    return EgressEntry(
        session_id=session,
        tool_use_id=f"toolu_{n}",
        at=T0 + timedelta(seconds=n),
        method="GET",
        host="prometheus.internal",
        port=443,
        path="/api/v1/query?query",
        status=200,
        bytes=120 + n,
        duration_ms=3.5,
        rule="prometheus",
        outcome=outcome,
    )


async def test_the_last_requests_of_a_session_come_back_oldest_first(file_db: Database) -> None:
    log = EgressLog(file_db)
    for n in range(5):
        await log.record(_entry("s-a", n))
    await log.record(_entry("s-b", 9, "blocked"))

    recent = await log.recent("s-a", limit=3)

    assert [e.tool_use_id for e in recent] == ["toolu_2", "toolu_3", "toolu_4"]
    assert recent[-1] == _entry("s-a", 4)
    assert [e.outcome for e in await log.recent("s-b")] == ["blocked"]


async def test_an_unknown_outcome_is_refused(file_db: Database) -> None:
    with pytest.raises(ValueError, match="outcome"):
        await EgressLog(file_db).record(_entry("s-a", 1, "maybe"))


async def test_a_row_of_what_a_request_line_held_is_kept_whatever_its_bytes(
    file_db: Database,
) -> None:
    # Given the row of a request the gateway refused before parsing it (its request line as
    # sent: a NUL, a method past 16 characters, a CONNECT host past 255)
    log = EgressLog(file_db)
    sent = replace(
        _entry("s-refused", 1, "blocked"),
        method="P\x00ST" + "X" * 40,
        host="h\x00" + "a" * 300,
        path="/\x00b",
        rule=None,
    )
    # When it is recorded
    await log.record(sent)
    # Then it is kept, cut to the columns, the NULs shown as U+FFFD
    (kept,) = await log.recent("s-refused")
    assert kept.method == ("P\ufffdST" + "X" * 40)[:16]
    assert kept.host == ("h\ufffd" + "a" * 300)[:255]
    assert kept.path == "/\ufffdb"


async def live_session(db: Database, session_id: str) -> None:
    """A running session with this id (tokens work only while their session lives)."""
    await SessionStore(db).open_or_join(
        new_key(), requester_id="U1", initial_checkpoint="{}", text="look", source_ts="1.1",
        session_id=session_id,
    )  # fmt: skip


async def test_a_token_names_its_session_until_revoked(file_db: Database) -> None:
    tokens = EgressTokens(file_db)
    await live_session(file_db, "s-a")
    await live_session(file_db, "s-b")
    token = await tokens.issue("s-a", "C-1")
    other = await tokens.issue("s-b", "C-2")

    assert await tokens.owner(token) == TokenOwner("s-a", "C-1")
    assert await tokens.revoke("s-a") == 1
    assert await tokens.owner(token) is None
    assert await tokens.owner(other) == TokenOwner("s-b", "C-2")
    assert await tokens.owner("guessed") is None
    assert len(token) >= 40


async def test_a_token_is_inert_while_its_session_is_stopped(file_db: Database) -> None:
    tokens = EgressTokens(file_db)
    await live_session(file_db, "s-c")
    token = await tokens.issue("s-c", "C-1")
    await SessionStore(file_db).cancel("s-c")
    assert await tokens.owner(token) is None
    assert await tokens.owner(await tokens.issue("s-gone", "C-1")) is None


async def test_a_row_of_more_than_two_gibibytes_is_kept(file_db: Database) -> None:
    # Given the row of a tunnel that carried 5 GiB (past a 32-bit column's reach)
    log = EgressLog(file_db)
    big = replace(_entry("s-big", 1), bytes=5 * 2**30)
    # When it is recorded
    await log.record(big)
    # Then it reads back whole
    assert await log.recent("s-big") == [big]
