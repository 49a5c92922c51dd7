"""The schema probe (``warroom doctor --quick``'s) answers as SQLAlchemy and Alembic do.

Each case compares ``probe_schema`` with ``Database.schema_version`` on the same database,
before and after migrating, and the door's names with its lazy loading.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from alembic.script import ScriptDirectory

import memory_store
from memory_store import Database, DatabaseUnavailable, probe_schema
from memory_store.migrate import alembic_config
from memory_store.schema_probe import migrations_head
from tests import leaks, pg_admin
from tests.conftest import PG_ADMIN_URL, require_service


def test_the_head_read_from_the_files_is_alembics() -> None:
    assert migrations_head() == ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_a_broken_chain_of_migrations_is_refused(tmp_path: Path) -> None:
    for revision in ("a1", "b1"):
        (tmp_path / f"{revision}.py").write_text(f'revision = "{revision}"\ndown_revision = None\n')

    with pytest.raises(ValueError, match="heads"):
        migrations_head(tmp_path)


async def _both(url: str | None, data_dir: Path) -> tuple[object, object, str, str]:
    """The probe's and SQLAlchemy's answers, and how each names the database."""
    probed = await probe_schema(url, data_dir=data_dir)
    db = Database.from_url(url, data_dir=data_dir)
    try:
        version = await db.schema_version()
        where = db.engine.url.render_as_string(hide_password=True)
    finally:
        await db.dispose()
    return probed.version, version, probed.where, where


async def _migrate(url: str | None, data_dir: Path) -> None:
    db = Database.from_url(url, data_dir=data_dir)
    try:
        await db.migrate()
    finally:
        await db.dispose()


async def test_sqlite_before_and_after_migrating(tmp_path: Path) -> None:
    # Given an empty data directory
    data_dir = tmp_path / "data"
    # Then the probe finds no schema, as Alembic does, and names the file as SQLAlchemy does
    before, expected, where, expected_where = await _both(None, data_dir)
    assert before == expected
    assert where == expected_where
    assert (await probe_schema(None, data_dir=data_dir)).version.current is None
    # And once migrated, the schema at the head
    await _migrate(None, data_dir)
    after, expected, _, _ = await _both(None, data_dir)
    assert after == expected
    assert (await probe_schema(None, data_dir=data_dir)).version.at_head


@pytest.mark.postgres
def test_postgresql_before_and_after_migrating(tmp_path: Path) -> None:
    require_service("PostgreSQL", PG_ADMIN_URL)
    name = leaks.database_name()
    pg_admin.create_database(PG_ADMIN_URL, name)
    try:
        parts = urlsplit(PG_ADMIN_URL)
        # a password in the URL (trust auth ignores it) is hidden as SQLAlchemy hides it
        netloc = f"{parts.username}:s3cret@{parts.hostname}:{parts.port or 5432}"
        url = urlunsplit(parts._replace(netloc=netloc, path=f"/{name}"))

        async def scenario() -> None:
            before, expected, where, expected_where = await _both(url, tmp_path)
            assert before == expected
            assert before.current is None  # type: ignore[attr-defined]
            assert where == expected_where
            assert "s3cret" not in where
            await _migrate(url, tmp_path)
            after, expected, _, _ = await _both(url, tmp_path)
            assert after == expected
            assert after.at_head  # type: ignore[attr-defined]

        asyncio.run(scenario())
    finally:
        pg_admin.drop_database(PG_ADMIN_URL, name)


async def test_an_unreachable_server_and_another_database_kind(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUnavailable):
        await probe_schema("postgresql://postgres@127.0.0.1:9/warroom", data_dir=tmp_path)
    with pytest.raises(ValueError, match="mysql"):
        await probe_schema("mysql://u@db/w", data_dir=tmp_path)


def test_the_door_gives_every_name_and_loads_the_orm_only_when_asked() -> None:
    assert all(getattr(memory_store, name) is not None for name in memory_store.__all__)
    with pytest.raises(AttributeError):
        _ = memory_store.NoSuchName
    listing = (
        "import json, sys; import memory_store; from memory_store import probe_schema;"
        "first = 'sqlalchemy' in sys.modules; from memory_store import Database;"
        "print(json.dumps([first, 'sqlalchemy' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", listing], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == [False, True]
