"""The database: URLs, the embedded default, migrations, and unreachable servers."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text

from memory_store import (
    Database,
    DatabaseUnavailable,
    FileStore,
    InboundDedupe,
    Namespace,
    Scope,
    SessionKey,
    SessionStore,
    normalise_url,
)
from memory_store.db import WriteConflict
from memory_store.migrate import alembic_config
from tests.memory_store.file_support import who
from tests.ports import free_port


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@db:5432/w", "postgresql+asyncpg://u:p@db:5432/w"),
        ("postgres://u@db/w", "postgresql+asyncpg://u@db/w"),
        ("postgresql+asyncpg://u@db/w", "postgresql+asyncpg://u@db/w"),
        ("sqlite:///data/w.sqlite3", "sqlite+aiosqlite:///data/w.sqlite3"),
        ("sqlite+aiosqlite:////abs/w.sqlite3", "sqlite+aiosqlite:////abs/w.sqlite3"),
    ],
)
def test_database_urls_are_normalised_to_async_drivers(url: str, expected: str) -> None:
    assert normalise_url(url).render_as_string(hide_password=False) == expected


@pytest.mark.parametrize("url", ["mysql://u@db/w", "not a url"])
def test_other_databases_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="database"):
        normalise_url(url)


async def test_without_a_url_the_store_is_an_sqlite_file_in_wal_mode_under_the_data_dir(
    tmp_path: Path,
) -> None:
    # Given no DATABASE_URL and a data directory that does not exist yet
    data_dir = tmp_path / "data" / "nested"
    db = Database.from_url(None, data_dir=data_dir)
    try:
        # When it is migrated and used
        await db.migrate()
        ns = Namespace("T1", Scope.MEMORY)
        await FileStore(db).write(ns, "/a.md", "x", who(), expected_version=0)
    finally:
        await db.dispose()

    # Then the rows live in warroom.sqlite3 there, journaled with WAL
    with sqlite3.connect(data_dir / "warroom.sqlite3") as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert raw.execute("SELECT path, version FROM files").fetchall() == [("/a.md", 1)]


async def test_migrating_twice_is_harmless(file_db: Database, org: str) -> None:
    await file_db.migrate()
    await file_db.migrate()

    result = await FileStore(file_db).write(
        Namespace(org, Scope.MEMORY), "/a.md", "x", who(), expected_version=0
    )
    assert result.version == 1


def test_migrations_form_one_chain_starting_at_the_files_revision() -> None:
    script = ScriptDirectory.from_config(alembic_config())

    assert len(script.get_heads()) == 1
    assert script.get_base() == "0001"


async def test_an_unreachable_server_raises_database_unavailable(tmp_path: Path) -> None:
    db = Database.from_url(f"postgresql://postgres@127.0.0.1:{free_port()}/w", data_dir=tmp_path)
    try:
        with pytest.raises(DatabaseUnavailable):
            await FileStore(db).read(Namespace("T1", Scope.MEMORY), "/a.md")
        with pytest.raises(DatabaseUnavailable):
            await db.migrate()
        # the ack path's statements, sent on the driver's own connection, say the same
        with pytest.raises(DatabaseUnavailable):
            await SessionStore(db).find(SessionKey("T1", "C1", "1.0"))
        with pytest.raises(DatabaseUnavailable):
            await InboundDedupe(db).seen("ts:C1:1.0")
    finally:
        await db.dispose()


@pytest.mark.postgres
async def test_a_statement_refused_on_the_drivers_connection_leaves_the_pool_usable(
    postgres_url: str, tmp_path: Path
) -> None:
    db = Database.from_url(postgres_url, data_dir=tmp_path, pool_size=1, max_overflow=0)
    try:
        await db.migrate()
        with pytest.raises(DatabaseUnavailable):
            async with db.driver() as conn:
                await conn.fetchval("SELECT no_such_column FROM sessions")
        assert await SessionStore(db).find(SessionKey("T1", "C1", "1.0")) is None
    finally:
        await db.dispose()


@pytest.mark.postgres
async def test_a_row_refused_by_a_constraint_on_the_drivers_connection_is_a_write_conflict(
    postgres_url: str, tmp_path: Path
) -> None:
    db = Database.from_url(postgres_url, data_dir=tmp_path, pool_size=1, max_overflow=0)
    try:
        async with db.driver() as conn:
            await conn.execute("CREATE TEMPORARY TABLE once (k text PRIMARY KEY)")
            await conn.execute("INSERT INTO once VALUES ('a')")
        with pytest.raises(WriteConflict):  # as ``write``'s IntegrityError is
            async with db.driver() as conn:
                await conn.execute("INSERT INTO once VALUES ('a')")
        async with db.driver() as conn:  # the pool's one connection is still good
            assert await conn.fetchval("SELECT count(*) FROM once") == 1
    finally:
        await db.dispose()


async def test_the_drivers_connection_is_for_postgresql_only(tmp_path: Path) -> None:
    db = Database.from_url(None, data_dir=tmp_path)
    try:
        with pytest.raises(RuntimeError):
            async with db.driver():
                pass
    finally:
        await db.dispose()


@pytest.fixture
async def keeping(postgres_url: str, tmp_path: Path) -> AsyncIterator[Database]:
    """A database whose pool is large enough for ``driver`` to keep a connection."""
    db = Database.from_url(postgres_url, data_dir=tmp_path, pool_size=2, max_overflow=2)
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
async def admin(postgres_url: str, tmp_path: Path) -> AsyncIterator[Database]:
    """Another database object over the same server, to look at its processes."""
    db = Database.from_url(postgres_url, data_dir=tmp_path, pool_size=1, max_overflow=0)
    try:
        yield db
    finally:
        await db.dispose()


async def _backend_pid(db: Database) -> int:
    """The server process of the connection ``db.driver()`` hands out."""
    async with db.driver() as conn:
        return int(await conn.fetchval("SELECT pg_backend_pid()"))


async def _until_gone(admin: Database, pid: int) -> None:
    """Wait (at most 5 s) until the server process ``pid`` has ended."""
    alive = "SELECT count(*) FROM pg_stat_activity WHERE pid = $1"
    for _ in range(500):
        async with admin.driver() as conn:
            if await conn.fetchval(alive, pid) == 0:
                return
        await asyncio.sleep(0.01)
    raise AssertionError(f"server process {pid} still runs")


@pytest.mark.postgres
async def test_the_drivers_connection_is_kept_for_the_next_statement_and_closed_at_dispose(
    keeping: Database, admin: Database
) -> None:
    # Given a database with a pool large enough to keep one connection for ``driver``
    first_pid = await _backend_pid(keeping)
    # When the next hot statement runs
    second_pid = await _backend_pid(keeping)
    # Then it runs on the same connection, which the pool does not count as idle
    assert second_pid == first_pid
    assert keeping.engine.pool.checkedout() == 1  # type: ignore[attr-defined]
    # and dispose closes it: its server process ends
    await keeping.dispose()
    await _until_gone(admin, first_pid)


@pytest.mark.postgres
async def test_a_connection_left_in_a_transaction_or_broken_is_not_kept(keeping: Database) -> None:
    # Given a statement that leaves its connection inside a transaction
    async with keeping.driver() as conn:
        open_pid = await conn.fetchval("SELECT pg_backend_pid()")
        await conn.execute("BEGIN")
    # Then the next statement is not inside it (that connection is closed: the pool's
    # reset on return does not end a transaction begun on the driver)
    async with keeping.driver() as conn:
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SELECT pg_backend_pid()") != open_pid
    # And a statement that failed does not leave its connection kept either
    with pytest.raises(DatabaseUnavailable):
        async with keeping.driver() as conn:
            await conn.fetchval("SELECT no_such_column FROM no_such_table")
    async with keeping.driver() as conn:
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SELECT 1") == 1


@pytest.mark.postgres
async def test_after_a_restart_is_seen_the_kept_connection_does_not_fail_the_next_hot_statement(
    keeping: Database, admin: Database
) -> None:
    # Given a database whose driver keeps a connection, and another pooled connection
    kept_pid = await _backend_pid(keeping)
    async with keeping.read() as sa_conn:
        read_pid = (await sa_conn.execute(text("SELECT pg_backend_pid()"))).scalar()
    # When the server drops every connection (a restart), and a read has seen it
    # (SQLAlchemy then invalidates the whole pool: the next checkouts reconnect)
    async with admin.driver() as conn:
        for pid in (kept_pid, read_pid):  # each waited for (at most 5 s) until it ended
            assert await conn.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
    with pytest.raises(DatabaseUnavailable):  # the first read after it fails
        async with keeping.read() as sa_conn:
            await sa_conn.execute(text("SELECT 1"))
    async with keeping.read() as sa_conn:
        assert (await sa_conn.execute(text("SELECT 1"))).scalar() == 1
    # Then the next hot statement runs too: the kept connection, which asyncpg already
    # knows is closed, is dropped for another
    async with keeping.driver() as conn:
        assert await conn.fetchval("SELECT 1") == 1


@pytest.mark.postgres
async def test_a_database_dropped_without_dispose_ends_its_kept_connection_quietly(
    postgres_url: str, tmp_path: Path, admin: Database
) -> None:
    # Given a database whose driver keeps a connection
    db = Database.from_url(postgres_url, data_dir=tmp_path, pool_size=2, max_overflow=2)
    kept_pid = await _backend_pid(db)
    # When it is dropped without ``dispose`` (the pool would warn of a connection never
    # checked in: an error here, where warnings are errors)
    del db
    gc.collect()
    # Then its connection ends: the server process goes away
    await _until_gone(admin, kept_pid)


def test_a_precompiled_statement_refuses_a_missing_parameter_and_keeps_its_literals(
    tmp_path: Path,
) -> None:
    # Given a statement with a bound parameter and a literal, compiled for PostgreSQL
    from sqlalchemy import Integer, bindparam, func, literal, select

    db = Database.from_url("postgresql://nobody@127.0.0.1:1/none", data_dir=tmp_path)
    compiled = db.precompiled(select(func.coalesce(bindparam("given", type_=Integer), literal(7))))
    # Then the literal is held and the given value is used
    assert compiled.names == ("given", "param_1")
    assert compiled.args({"given": 3}) == [3, 7]
    # And a parameter left out is an error, not a NULL sent to the server
    with pytest.raises(KeyError, match="given"):
        compiled.args({})
    asyncio.run(db.dispose())
