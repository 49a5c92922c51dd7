"""Migration 0021 (the egress audit's byte counts past 32 bits) on a large audit, and rows
from before it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy.engine import Connection

from memory_store import Database, EgressLog, Limits
from memory_store.migrate import alembic_config
from tests import pg_admin
from tests.conftest import PG_ADMIN_URL, require_service

pytestmark = pytest.mark.postgres

ROWS = 250_000
STATEMENT_TIMEOUT_MS = 100
"""Every process's ``db.migrate()`` runs under the store's per-statement timeout
(``Limits.statement_timeout_ms``, 10 s). Changing the column's type would rewrite the
audit table (never pruned) in one statement: about 2 s per million rows on an idle local
server (red team), so a 5-million-row audit would keep every process from starting.
The test keeps that ratio at a 40th of the size: 250 000 rows against 100 ms."""


@pytest.fixture
def fresh_pg() -> Iterator[str]:
    require_service("PostgreSQL", PG_ADMIN_URL)
    with pg_admin.throwaway_database(PG_ADMIN_URL) as url:
        yield url


def _to(revision: str) -> Callable[[Connection], None]:
    def run(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    return run


async def test_migration_0021_of_a_large_audit_is_not_cut_by_the_statement_timeout(
    fresh_pg: str, tmp_path: Path
) -> None:
    # Given a database at 0020 whose audit holds many rows
    setup = Database.from_url(fresh_pg, data_dir=tmp_path)
    try:
        async with setup.write() as conn:
            await conn.run_sync(_to("0020"))
        async with setup.write() as conn:
            await conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
            await conn.exec_driver_sql(
                "INSERT INTO egress_requests (session_id, tool_use_id, at, method, host, port,"
                " path, status, bytes, duration_ms, rule, outcome)"
                " SELECT 's-' || (g % 500), 'toolu_01abcdefghijklmnopqrstuv', now(), 'GET',"
                " 'api.example.com', 443, '/v1/things/' || g, 200, g % 100000, 12.5, 'r',"
                f" 'allowed' FROM generate_series(1, {ROWS}) g"
            )
    finally:
        await setup.dispose()
    # When a process of this release starts and migrates, under the store's limits
    db = Database.from_url(
        fresh_pg, data_dir=tmp_path, limits=Limits(statement_timeout_ms=STATEMENT_TIMEOUT_MS)
    )
    try:
        # Then the migration completes within it (nothing is rewritten)
        await db.migrate()
        assert (await db.schema_version()).at_head
    finally:
        await db.dispose()


async def test_a_row_written_before_0021_reads_back_its_bytes(
    fresh_pg: str, tmp_path: Path
) -> None:
    # Given a row the previous release wrote (no ``body_bytes``)
    db = Database.from_url(fresh_pg, data_dir=tmp_path)
    try:
        async with db.write() as conn:
            await conn.run_sync(_to("0020"))
            await conn.exec_driver_sql(
                "INSERT INTO egress_requests (session_id, tool_use_id, at, method, host, port,"
                " path, status, bytes, duration_ms, rule, outcome) VALUES ('s-old', NULL,"
                " now(), 'GET', 'h', 443, '/', 200, 1234, 1.5, NULL, 'allowed')"
            )
        # When this release migrates and reads it
        await db.migrate()
        [entry] = await EgressLog(db).recent("s-old")
        # Then its count is the one it was written with
        assert entry.bytes == 1234
    finally:
        await db.dispose()
