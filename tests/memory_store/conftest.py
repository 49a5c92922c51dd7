"""Fixtures for the file store: one conformance suite, both backends.

``store`` is a ``FileStore`` over a migrated database: SQLite (a copy of a migrated
template file, so each test starts fresh and fast) or PostgreSQL (the run's database
from ``postgres_url``; skipped locally, failing under CI, when the server is down).
Tests stay isolated on the shared PostgreSQL database because each one works in its
own org (``org``), which is also what tenant isolation guarantees.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_store import Database, FileStore, Namespace, Scope
from tests.memory_store.session_support import ManualClock

SQLITE_FILE = "warroom.sqlite3"
_MIGRATED: set[str] = set()  # PostgreSQL URLs already migrated in this run
FILE_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database file, made once per run and copied by each test."""
    directory = tmp_path_factory.mktemp("sqlite-template")

    async def migrate() -> None:
        db = Database.from_url(None, data_dir=directory)
        try:
            await db.migrate()
        finally:
            await db.dispose()

    asyncio.run(migrate())
    return directory / SQLITE_FILE


@pytest.fixture(params=FILE_BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite; the run's PostgreSQL URL (resolved here, outside the event loop)."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


@pytest.fixture
async def file_db(
    database_url: str | None, tmp_path: Path, sqlite_template: Path
) -> AsyncIterator[Database]:
    """A migrated ``Database`` of each backend, disposed after the test."""
    if database_url is None:
        shutil.copyfile(sqlite_template, tmp_path / SQLITE_FILE)
    db = Database.from_url(database_url, data_dir=tmp_path)
    try:
        if database_url is not None and database_url not in _MIGRATED:
            await db.migrate()
            _MIGRATED.add(database_url)
        yield db
    finally:
        await db.dispose()


@pytest.fixture
async def pg_db(postgres_url: str, tmp_path: Path) -> AsyncIterator[Database]:
    """The run's PostgreSQL database, migrated (by whichever test of this worker is
    first), disposed after the test."""
    db = Database.from_url(postgres_url, data_dir=tmp_path)
    try:
        await db.migrate()
        yield db
    finally:
        await db.dispose()


@pytest.fixture
def store(file_db: Database) -> FileStore:
    """A ``FileStore`` with default limits."""
    return FileStore(file_db)


@pytest.fixture
def org() -> str:
    """An org id no other test uses."""
    return f"T{uuid.uuid4().hex[:12]}"


@pytest.fixture
def memory(org: str) -> Namespace:
    """The org's ``/memory`` namespace."""
    return Namespace(org, Scope.MEMORY)


@pytest.fixture
def skills(org: str) -> Namespace:
    """The org's ``/skills`` namespace."""
    return Namespace(org, Scope.SKILLS)


@pytest.fixture
def clock() -> ManualClock:
    """A clock for the session, outbox and dedupe stores that moves only when told to."""
    return ManualClock()
