"""An org's stored bytes are bounded, revisions included (issue #24, item 8): each file keeps
its newest revisions only, and the bytes of every kept revision count against the org's
storage quota; a write past it is refused with a tool error that says how to make room.
Through the Write tool, on both backends (PostgreSQL's one-statement write included)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from memory_store import Database, FileStore, Limits, Namespace, Origin, Scope
from memory_store.files.tables import file_revisions, files, org_usage
from tests.harness.tool_support import JailWorkspace, SessionDriver
from tests.memory_store.file_support import books

KB = 1000
HUMAN = Origin("U-HUMAN")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite; the run's PostgreSQL URL (resolved here, outside the event loop)."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


@pytest.fixture
async def database(database_url: str | None, tmp_path: Path) -> AsyncIterator[Database]:
    """A migrated database of either backend."""
    url = database_url
    db = Database.from_url(url, data_dir=tmp_path, pool_size=2, max_overflow=2)
    await db.migrate()
    try:
        yield db
    finally:
        await db.dispose()


def agent(db: Database, tmp_path: Path, limits: Limits) -> SessionDriver:
    """A session of a new org over ``db`` whose store enforces ``limits``."""
    org = f"T-STORE-{uuid.uuid4().hex[:8]}"
    return SessionDriver(FileStore(db, limits), JailWorkspace(tmp_path), org_id=org)


async def stored_bytes(db: Database, org: str) -> tuple[int, int]:
    """(the org's stored-bytes counter less its files' allowances, the bytes of
    its revisions' contents counted afresh)."""
    r, f = file_revisions.c, files.c
    length = func.octet_length(r.content) if db.is_postgres else func.length(r.content)
    counted = (
        select(func.coalesce(func.sum(func.coalesce(length, 0)), 0))
        .join_from(file_revisions, files, r.file_id == f.id)
        .where(f.org_id == org)
    )
    counter = select(org_usage.c.stored_bytes).where(org_usage.c.org_id == org)
    allowanced = (await books(db, org)).allowance_stored
    async with db.read() as conn:
        return (
            int((await conn.execute(counter)).scalar_one_or_none() or 0) - allowanced,
            int((await conn.execute(counted)).scalar_one()),
        )


async def test_300_rewrites_of_a_100_kb_file_keep_only_its_last_revisions(
    database: Database, tmp_path: Path
) -> None:
    # Given the default retention (20 revisions a file)
    session = agent(database, tmp_path, Limits())
    # When the agent rewrites one 100 kB memory file 300 times (the red team's example)
    for i in range(300):
        content = f"{i:05d}" + "x" * (100 * KB - 5)
        outcome = await session.call("Write", {"file_path": "/memory/big.md", "content": content})
        assert not outcome.is_error, outcome.content

    # Then 20 revisions are kept, and the org's counter is their exact size: 2 MB, not 30 MB
    counter, counted = await stored_bytes(database, session.org_id)
    print(
        f"stored bytes after 300 rewrites of 100 kB: {counted} (every revision: {300 * 100 * KB})"
    )
    assert counted == 20 * 100 * KB
    assert counter == counted
    history = await session.store.history(Namespace(session.org_id, Scope.MEMORY), "/big.md")
    assert [r.version for r in history] == list(range(281, 301))


async def test_a_write_past_the_storage_quota_is_refused_and_says_how_to_make_room(
    database: Database, tmp_path: Path
) -> None:
    # Given an org allowed 1 MB of stored bytes, revisions included
    limits = Limits(max_stored_bytes_per_org=1_000 * KB, incident_reserve_share=0.0)
    session = agent(database, tmp_path, limits)
    memory = Namespace(session.org_id, Scope.MEMORY)
    # When the agent keeps rewriting a 100 kB file
    outcomes = []
    for i in range(12):
        content = f"{i:05d}" + "y" * (100 * KB - 5)
        outcomes.append(
            await session.call("Write", {"file_path": "/memory/notes.md", "content": content})
        )

    # Then the write that would pass 1 MB is refused, nothing is written, and the error
    # says which quota and how to free space
    assert [o.is_error for o in outcomes] == [False] * 10 + [True] * 2
    refusal = outcomes[10].content
    assert "over their stored bytes quota (1000000 of 1000000)" in refusal
    assert "/agent memory rm /memory/<path>" in refusal
    assert (await session.store.read(memory, "/notes.md")).version == 10
    counter, counted = await stored_bytes(database, session.org_id)
    assert counter == counted == 10 * 100 * KB
    # When a person deletes the file (what /agent memory rm does), its older versions go
    await session.store.delete(memory, "/notes.md", HUMAN)
    counter, counted = await stored_bytes(database, session.org_id)
    assert counter == counted == 100 * KB  # its last content, still restorable
    # Then the agent can write again
    again = await session.call("Write", {"file_path": "/memory/other.md", "content": "z" * 1000})
    assert not again.is_error, again.content
    await session.store.restore(memory, "/notes.md", 10, HUMAN)


async def test_the_stored_bytes_counter_stays_exact_through_every_kind_of_change(
    database: Database, tmp_path: Path
) -> None:
    # Given a short history (3 revisions a file) and every way a file changes
    session = agent(database, tmp_path, Limits(keep_revisions=3))
    memory = Namespace(session.org_id, Scope.MEMORY)
    incident = Namespace(session.org_id, Scope.INCIDENT, "C1")
    for i in range(5):  # the one-statement write on PostgreSQL, after the first
        await session.call("Write", {"file_path": "/memory/a.md", "content": f"line {i}\n" * 50})
    await session.call("Read", {"file_path": "/memory/a.md"})
    edited = await session.call(
        "Edit", {"file_path": "/memory/a.md", "old_string": "line 4\n" * 50, "new_string": "b"}
    )
    assert not edited.is_error, edited.content
    await session.store.write(incident, "/notes.md", "n" * 5000, HUMAN, expected_version=None)
    await session.store.delete(memory, "/a.md", HUMAN)  # not under pressure: history kept
    await session.store.restore(memory, "/a.md", 5, HUMAN)

    # Then the counter is the sum of what is kept, /incident included, and history is
    # the newest 3 revisions
    counter, counted = await stored_bytes(database, session.org_id)
    assert counter == counted > 5000
    history = await session.store.history(memory, "/a.md")
    assert [(r.version, r.operation) for r in history] == [
        (6, "edit"),
        (7, "delete"),
        (8, "restore"),
    ]
