"""Concurrency: no lost update, exactly one winner, race-free case checks.

PostgreSQL runs the issue's sizes (20 sessions × 25 edits); the embedded SQLite backend
runs a smaller version of the same tests (it serialises writers).
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import asyncpg
import pytest

from memory_store import (
    CaseConflict,
    Database,
    DatabaseUnavailable,
    FileStore,
    Limits,
    Namespace,
    StaleVersion,
    WriteResult,
)
from tests.memory_store.file_support import who


def sizes(db: Database) -> tuple[int, int]:
    """(sessions, edits per session) for the backend."""
    return (20, 25) if db.is_postgres else (5, 10)


def line(session: int, edit: int, state: str) -> str:
    return f"session {session:02d} item {edit:02d}: {state}\n"


async def test_concurrent_edits_to_different_lines_all_land(
    file_db: Database, memory: Namespace
) -> None:
    # Given one file with a line for every edit every session will make
    sessions, edits = sizes(file_db)
    store = FileStore(file_db, Limits(keep_revisions=10_000))  # every version kept
    cells = [(s, e) for s in range(sessions) for e in range(edits)]
    await store.write(
        memory,
        "/board.md",
        "".join(line(s, e, "todo") for s, e in cells),
        who(),
        expected_version=0,
    )

    # When every session edits its own lines at the same time
    async def session(s: int) -> None:
        for e in range(edits):
            await store.edit(
                memory,
                "/board.md",
                line(s, e, "todo"),
                line(s, e, "done"),
                who(f"s{s}-e{e}", session=f"S{s}"),
            )

    await asyncio.gather(*(session(s) for s in range(sessions)))

    # Then every edit is present, each made exactly one version, and nothing else changed
    current = await store.read(memory, "/board.md")
    assert current.content == "".join(line(s, e, "done") for s, e in cells)
    history = await store.history(memory, "/board.md")
    assert [r.version for r in history] == list(range(1, len(cells) + 2))
    assert sorted(str(r.tool_use_id) for r in history[1:]) == sorted(f"s{s}-e{e}" for s, e in cells)
    assert all(r.base_version == r.version - 1 for r in history[1:])


async def test_concurrent_writes_from_one_stale_version_have_exactly_one_winner(
    file_db: Database, memory: Namespace
) -> None:
    # Given a file every writer read at version 1
    writers, _ = sizes(file_db)
    store = FileStore(file_db)
    await store.write(memory, "/plan.md", "v1", who(), expected_version=0)

    # When they all write their own whole-file version at once
    outcomes = await asyncio.gather(
        *(
            store.write(
                memory, "/plan.md", f"plan of {w}", who(session=f"S{w}"), expected_version=1
            )
            for w in range(writers)
        ),
        return_exceptions=True,
    )

    # Then exactly one lands; every other writer is told the file is now at version 2
    wins = [o for o in outcomes if isinstance(o, WriteResult)]
    stale = [o for o in outcomes if isinstance(o, StaleVersion)]
    assert len(wins) == 1
    assert len(stale) == writers - 1
    assert {e.current_version for e in stale} == {2}
    winner = outcomes.index(wins[0])
    assert {e.changed_by_session for e in stale} == {f"S{winner}"}
    assert (await store.read(memory, "/plan.md")).content == f"plan of {winner}"
    assert len(await store.history(memory, "/plan.md")) == 2


async def test_concurrent_creators_of_one_path_have_exactly_one_winner(
    file_db: Database, memory: Namespace
) -> None:
    writers, _ = sizes(file_db)
    store = FileStore(file_db)

    outcomes = await asyncio.gather(
        *(
            store.write(memory, "/new.md", f"{w}", who(), expected_version=0)
            for w in range(writers)
        ),
        return_exceptions=True,
    )

    assert sum(isinstance(o, WriteResult) for o in outcomes) == 1
    assert all(isinstance(o, WriteResult | StaleVersion) for o in outcomes)


async def test_concurrent_creators_of_case_twins_have_exactly_one_winner(
    file_db: Database, memory: Namespace
) -> None:
    store = FileStore(file_db)
    spellings = ["/Case.md", "/case.md", "/CASE.md", "/cAse.md", "/caSe.md", "/casE.md"]

    outcomes = await asyncio.gather(
        *(store.write(memory, path, "x", who(), expected_version=0) for path in spellings),
        return_exceptions=True,
    )

    wins = [o for o in outcomes if isinstance(o, WriteResult)]
    assert len(wins) == 1
    assert all(isinstance(o, CaseConflict) for o in outcomes if o is not wins[0])
    assert [e.path for e in await store.index(memory)] == [wins[0].path]


@pytest.mark.postgres
async def test_a_row_lock_held_elsewhere_times_out_as_database_unavailable(
    postgres_url: str, tmp_path: Path, memory: Namespace
) -> None:
    # Given a file whose row another connection keeps locked
    db = Database.from_url(postgres_url, data_dir=tmp_path, limits=Limits(lock_timeout_ms=100))
    store = FileStore(db)
    try:
        await store.write(memory, "/locked.md", "x", who(), expected_version=0)
        holder = await asyncpg.connect(postgres_url.replace("+asyncpg", ""))
        try:
            async with holder.transaction():
                await holder.execute(
                    "SELECT 1 FROM files WHERE org_id = $1 AND path = $2 FOR UPDATE",
                    memory.org_id,
                    "/locked.md",
                )
                # When this store edits it, Then it gives up after the lock timeout
                with pytest.raises(DatabaseUnavailable):
                    await store.edit(memory, "/locked.md", "x", "y", who())
        finally:
            await holder.close()
        # And once the lock is gone the edit goes through
        assert (await store.edit(memory, "/locked.md", "x", "y", who())).version == 2
    finally:
        await db.dispose()


async def test_a_sqlite_write_lock_held_elsewhere_times_out_as_database_unavailable(
    tmp_path: Path, sqlite_template: Path, memory: Namespace
) -> None:
    # Given the embedded database, whose write lock another process holds
    shutil.copyfile(sqlite_template, tmp_path / "warroom.sqlite3")
    db = Database.from_url(None, data_dir=tmp_path, limits=Limits(lock_timeout_ms=100))
    store = FileStore(db)
    other = sqlite3.connect(tmp_path / "warroom.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        # When this store writes, Then it gives up after the lock timeout
        with pytest.raises(DatabaseUnavailable):
            await store.write(memory, "/a.md", "x", who(), expected_version=0)
        other.execute("ROLLBACK")
        # And once the lock is gone the write goes through
        assert (await store.write(memory, "/a.md", "x", who(), expected_version=0)).created
    finally:
        other.close()
        await db.dispose()
