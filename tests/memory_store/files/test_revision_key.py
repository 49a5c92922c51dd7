"""Migrations 0020 and 0023: revisions keyed by (file, version), kept across the upgrade
and back.

Each case migrates a fresh database of each backend to 0019, writes history through the
store's own SQL of that schema, upgrades, and checks that every revision survived, that
the key is (file_id, version) with no surrogate column or foreign key left, that the
store still works over the history, and that a downgrade gives the old shape back. On
PostgreSQL the surrogate ``id`` stayed one release (0020 to 0022, for a rolling upgrade's
processes of the release before) and is dropped by 0023: a process of that release (0022)
still appends revisions after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection

from memory_store import Database, FileStore, Namespace, Origin, Scope
from memory_store.files.tables import file_revisions, files, org_usage
from memory_store.migrate import alembic_config
from tests import pg_admin
from tests.conftest import PG_ADMIN_URL, require_service

NS = Namespace("T-rev", Scope.INCIDENT, "C-rev")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None (SQLite under ``tmp_path``) or a throwaway, never-migrated PostgreSQL database."""
    if request.param == "sqlite":
        yield None
        return
    require_service("PostgreSQL", PG_ADMIN_URL)
    with pg_admin.throwaway_database(PG_ADMIN_URL) as url:
        yield url


def _to(revision: str, *, down: bool = False) -> Callable[[Connection], None]:
    def run(connection: Connection) -> None:
        (command.downgrade if down else command.upgrade)(alembic_config(connection), revision)

    return run


def _shape(connection: Connection) -> dict[str, Any]:
    inspector = sa.inspect(connection)
    return {
        "columns": [c["name"] for c in inspector.get_columns("file_revisions")],
        "primary_key": inspector.get_pk_constraint("file_revisions")["constrained_columns"],
        "foreign_keys": inspector.get_foreign_keys("file_revisions"),
        "unique": sorted(
            tuple(u["column_names"]) for u in inspector.get_unique_constraints("file_revisions")
        )
        + sorted(
            tuple(i["column_names"]) for i in inspector.get_indexes("file_revisions") if i["unique"]
        ),
    }


def _history(connection: Connection) -> list[tuple[Any, ...]]:
    rows = connection.exec_driver_sql(
        "SELECT file_id, version, content, tool_use_id FROM file_revisions"
        " ORDER BY file_id, version"
    )
    return [tuple(row) for row in rows]


def _drift(connection: Connection) -> list[Any]:
    """How the file store's tables differ from what ``tables.py`` declares (Alembic's
    autogenerate comparison, over those tables only)."""

    declared = sa.MetaData()
    for table in (files, file_revisions, org_usage):
        table.to_metadata(declared)

    def ours(name: str | None, type_: str, parent: Any) -> bool:
        if type_ == "schema":
            return True
        table = name if type_ == "table" else parent.get("table_name")
        return table in declared.tables

    context = MigrationContext.configure(connection, opts={"include_name": ours})
    return list(compare_metadata(context, declared))


_OLD_FILE = sa.text(
    "INSERT INTO files (org_id, scope, channel_id, path, path_fold, version, deleted, content,"
    " size_bytes, updated_at, actor, session_id) VALUES ('T-rev', 'incident', 'C-rev', :path,"
    " :path, :version, false, :content, :size, CURRENT_TIMESTAMP, 'U1', 'S1')"
)
_OLD_REVISION = sa.text(
    "INSERT INTO file_revisions (file_id, version, base_version, operation, content, actor,"
    " session_id, tool_use_id, created_at, size_bytes) SELECT id, :version, :base, 'write',"
    " :content, 'U1', 'S1', :tool_use_id, CURRENT_TIMESTAMP, :size FROM files WHERE path = :path"
)
_OLD_BUMP = sa.text(
    "UPDATE files SET version = :version, content = :content, size_bytes = :size WHERE path = :path"
)


def _old_history(connection: Connection, paths: tuple[str, ...], versions: int) -> None:
    """Write ``versions`` versions of each of ``paths`` as the store of an older schema
    did (rows and revisions; the counters are not what these cases look at)."""
    for path in paths:
        for version in range(1, versions + 1):
            content = f"{path} {version - 1}\n"
            values = {"path": path, "version": version, "content": content, "size": len(content)}
            connection.execute(_OLD_FILE if version == 1 else _OLD_BUMP, values)
            values |= {"base": version - 1, "tool_use_id": f"toolu_{path}_{version - 1}"}
            connection.execute(_OLD_REVISION, values)


async def _scenario(url: str | None, data_dir: Path) -> None:
    db = Database.from_url(url, data_dir=data_dir)
    try:
        # Given a database at 0019 with history in two files (the old schema's rows)
        async with db.write() as conn:
            await conn.run_sync(_to("0019"))
            await conn.run_sync(_old_history, ("/a.md", "/b.md"), 4)
        store = FileStore(db)
        async with db.read() as conn:
            before = await conn.run_sync(_history)
            old = await conn.run_sync(_shape)
        assert len(before) == 8
        assert "id" in old["columns"]
        assert old["primary_key"] == ["id"]
        assert len(old["foreign_keys"]) == 1

        # When it is upgraded
        async with db.write() as conn:
            await conn.run_sync(_to("head"))

        # Then every revision is kept, keyed by (file_id, version), with no foreign key and
        # no surrogate column (0023 dropped the one PostgreSQL kept a release)
        async with db.read() as conn:
            assert await conn.run_sync(_history) == before
            new = await conn.run_sync(_shape)
            assert await conn.run_sync(_drift) == []
        assert "id" not in new["columns"]
        assert new["primary_key"] == ["file_id", "version"]
        assert new["foreign_keys"] == []
        assert new["unique"] == [("file_id", "tool_use_id")]
        # And the store goes on over that history: a write, its retry, a stale write
        origin = Origin("U1", session_id="S1", tool_use_id="toolu_after")
        assert (await store.write(NS, "/a.md", "after\n", origin, expected_version=4)).version == 5
        again = await store.write(NS, "/a.md", "after\n", origin, expected_version=4)
        assert again.version == 5
        assert [r.version for r in await store.history(NS, "/a.md")] == [1, 2, 3, 4, 5]

        # And a downgrade gives the old shape back, with a distinct id for every revision
        async with db.write() as conn:
            await conn.run_sync(_to("0019", down=True))
        async with db.read() as conn:
            back = await conn.run_sync(_shape)
            ids = [r[0] for r in await conn.exec_driver_sql("SELECT id FROM file_revisions")]
        assert back["primary_key"] == ["id"]
        assert len(back["foreign_keys"]) == 1
        assert len(ids) == 9
        assert len(set(ids)) == 9
        assert None not in ids
    finally:
        await db.dispose()


def test_revisions_survive_the_new_key_and_the_way_back(
    fresh_url: str | None, tmp_path: Path
) -> None:
    asyncio.run(_scenario(fresh_url, tmp_path))


def _previous_release_revisions() -> sa.Table:
    """``file_revisions`` as the release before 0020 declares it (surrogate ``id``)."""
    return sa.Table(
        "file_revisions",
        sa.MetaData(),
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        *(sa.Column(c.name, c.type, nullable=c.nullable) for c in file_revisions.c),
    )


async def _previous_release_appends(url: str | None, data_dir: Path) -> None:
    db = Database.from_url(url, data_dir=data_dir)
    try:
        # Given a database upgraded to 0022 (the last schema keeping ``id``), with one file
        async with db.write() as conn:
            await conn.run_sync(_to("0022"))
            await conn.run_sync(_old_history, ("/a.md",), 1)
        # When a process of the previous release (still running during a rolling upgrade:
        # every process migrates at start) appends a revision as its store does
        old = _previous_release_revisions()
        async with db.write() as conn:
            file_id = (await conn.execute(sa.select(files.c.id))).scalar_one()
            await conn.execute(
                sa.insert(old).values(
                    file_id=file_id,
                    version=2,
                    base_version=1,
                    operation="write",
                    content="two\n",
                    actor="U1",
                    created_at=sa.func.now(),
                    size_bytes=4,
                )
            )
        # Then that works (its insert returns the ``id`` it declares)
        # And once 0023 drops the column, the history is whole and this release appends
        async with db.write() as conn:
            await conn.run_sync(_to("head"))
        async with db.read() as conn:
            assert [(r[1], r[2]) for r in await conn.run_sync(_history)] == [
                (1, "/a.md 0\n"),
                (2, "two\n"),
            ]
            assert "id" not in (await conn.run_sync(_shape))["columns"]
        again = Origin("U1", session_id="S1", tool_use_id="toolu_after")
        assert (
            await FileStore(db).write(NS, "/b.md", "b\n", again, expected_version=0)
        ).version == 1
    finally:
        await db.dispose()


@pytest.mark.postgres
def test_a_previous_release_still_running_can_append_revisions(tmp_path: Path) -> None:
    require_service("PostgreSQL", PG_ADMIN_URL)
    with pg_admin.throwaway_database(PG_ADMIN_URL) as url:
        asyncio.run(_previous_release_appends(url, tmp_path))
