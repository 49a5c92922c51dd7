"""Files' allowances of the org's quotas (``memory_store.files.allowance``).

The hot write draws on its file's allowance instead of the org's counter row; these cases
check what that must keep true: the counters are always real use plus allowances, a hot
write touches no counter row, allowances never refuse what real use leaves room for, a
deletion gives its allowance back, and concurrent writers near a quota never pass it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Connection

from memory_store import Database, FileStore, Limits, Namespace, QuotaExceeded, Scope
from memory_store.files import allowance
from memory_store.migrate import alembic_config
from tests import pg_admin
from tests.conftest import PG_ADMIN_URL, require_service
from tests.memory_store.file_support import books, who


async def test_the_counters_are_use_plus_allowances_through_every_kind_of_change(
    file_db: Database, memory: Namespace, org: str
) -> None:
    store = FileStore(file_db, Limits(keep_revisions=3))
    incident = Namespace(org, Scope.INCIDENT, "C1")
    version = (await store.write(memory, "/a.md", "a" * 50, who(), expected_version=0)).version
    sizes = (60, 2000, 10, 10, 4000, 5, 700, 700, 30, 3000, 1, 90, 90, 90)
    for step, size in enumerate(sizes):
        body = f"{step}:" + "b" * size  # grows, shrinks, repeats: draws and gives back
        version = (
            await store.write(memory, "/a.md", body, who(), expected_version=version)
        ).version
        (await books(file_db, org)).balance()
    await store.edit(memory, "/a.md", "13:", "edited:", who())
    await store.write(incident, "/n.md", "n" * 900, who(), expected_version=None)
    await store.write(incident, "/n.md", "m" * 300, who(), expected_version=1)
    (await books(file_db, org)).balance()
    await store.delete(memory, "/a.md", who())
    after_delete = await books(file_db, org)
    after_delete.balance()
    await store.restore(memory, "/a.md", version, who())
    await store.write(memory, "/a.md", "again", who(), expected_version=version + 3)
    final = await books(file_db, org)
    final.balance()
    assert await store.usage(org) == (final.live_files, final.live_bytes)
    assert await store.stored_usage(org) == final.stored_bytes
    if not file_db.is_postgres:  # no one-statement write, so no allowance is ever given
        assert (final.allowance_bytes, final.allowance_stored) == (0, 0)


@pytest.mark.postgres
async def test_a_hot_write_draws_on_its_allowance_and_touches_no_counter_row(
    pg_db: Database, memory: Namespace, org: str
) -> None:
    store = FileStore(pg_db)
    await store.write(memory, "/hot.md", "first", who(), expected_version=0)
    # the first conditional write finds no allowance: the locked path tops it up
    await store.write(memory, "/hot.md", "second", who(), expected_version=1)
    before = await books(pg_db, org)
    assert before.allowance_stored == allowance.ALLOWANCE_STORED_BYTES
    assert before.allowance_bytes == allowance.ALLOWANCE_BYTES
    async with pg_db.read() as conn:
        row_version = (
            await conn.execute(
                text("SELECT xmin::text FROM org_usage WHERE org_id = :o"), {"o": org}
            )
        ).scalar_one()

    result = await store.write(memory, "/hot.md", "third, longer", who(), expected_version=2)

    assert result.version == 3
    after = await books(pg_db, org)
    async with pg_db.read() as conn:
        assert (
            await conn.execute(
                text("SELECT xmin::text FROM org_usage WHERE org_id = :o"), {"o": org}
            )
        ).scalar_one() == row_version  # the counter row was not written
    assert after.counter_bytes == before.counter_bytes
    assert after.counter_stored == before.counter_stored
    assert after.allowance_stored == before.allowance_stored - len("third, longer")
    assert after.allowance_bytes == before.allowance_bytes - (len("third, longer") - len("second"))
    after.balance()


@pytest.mark.postgres
async def test_allowances_held_by_other_files_do_not_refuse_a_change_that_fits(
    pg_db: Database, org: str
) -> None:
    # Given an org whose quotas leave room for the allowances of a few files only
    limits = Limits(
        max_bytes_per_org=200_000,
        max_stored_bytes_per_org=2_500_000,
        incident_reserve_share=0.0,
    )
    store = FileStore(pg_db, limits)
    ns = Namespace(org, Scope.MEMORY)
    for name in ("a", "b"):
        await store.write(ns, f"/{name}.md", "x", who(), expected_version=0)
        await store.write(ns, f"/{name}.md", "xy", who(), expected_version=1)  # allowance
    held = await books(pg_db, org)
    assert held.allowance_stored > 0
    room_left = limits.max_stored_bytes_per_org - held.counter_stored
    # When a third file takes more than the counters' room, though real use has room
    big = "z" * (room_left + 10_000)
    assert len(big) + held.stored_bytes < limits.max_stored_bytes_per_org
    result = await store.write(ns, "/c.md", big[:90_000], who(), expected_version=0)
    for i in range(1, 1 + (len(big) // 90_000)):  # grow its history past the room
        body = f"{i}" + big[: 90_000 - 1]
        result = await store.write(ns, "/c.md", body, who(), expected_version=result.version)
    # Then it is let through: the other files' allowances were taken back
    after = await books(pg_db, org)
    after.balance()
    assert after.stored_bytes <= limits.max_stored_bytes_per_org
    assert after.counter_stored <= limits.max_stored_bytes_per_org


@pytest.mark.postgres
async def test_a_deletion_gives_its_files_allowance_back(
    pg_db: Database, memory: Namespace, org: str
) -> None:
    store = FileStore(pg_db)
    await store.write(memory, "/gone.md", "one", who(), expected_version=0)
    await store.write(memory, "/gone.md", "two", who(), expected_version=1)
    assert (await books(pg_db, org)).allowance_stored > 0

    await store.delete(memory, "/gone.md", who())

    after = await books(pg_db, org)
    assert (after.allowance_bytes, after.allowance_stored) == (0, 0)
    assert after.counter_bytes == 0
    after.balance()


@pytest.mark.postgres
async def test_concurrent_hot_writers_near_the_quota_never_pass_it(
    pg_db: Database, org: str
) -> None:
    # Given a stored-bytes quota that eight writers of 40 kB revisions fill quickly
    limit = 3_000_000
    limits = Limits(max_stored_bytes_per_org=limit, incident_reserve_share=0.0, keep_revisions=50)
    store = FileStore(pg_db, limits)
    ns = Namespace(org, Scope.INCIDENT, "C-race")

    async def writer(n: int) -> int:
        written, version = 0, 0
        for i in range(41):  # a creation, then 40 rewrites (the others may fill it first)
            body = f"{n}.{i} " + "w" * 40_000 if i else "s"
            try:
                result = await store.write(ns, f"/w{n}.md", body, who(), expected_version=version)
            except QuotaExceeded:
                return written
            version, written = result.version, written + int(i > 0)
        return written

    # When they all write at once until refused
    async with asyncio.TaskGroup() as writers:  # (one failing ends the others, none left)
        running = [writers.create_task(writer(n)) for n in range(8)]
    written = [task.result() for task in running]

    # Then the quota stopped them, and what the database keeps never passed it
    assert sum(written) < 8 * 40
    final = await books(pg_db, org)
    final.balance()
    assert final.stored_bytes <= limit
    assert final.counter_stored <= limit + 40_010  # the locked path's one-change overshoot


@pytest.mark.postgres
def test_a_downgrade_past_0024_gives_every_allowance_back_to_the_counters(
    tmp_path: Path, org: str
) -> None:
    require_service("PostgreSQL", PG_ADMIN_URL)
    with pg_admin.throwaway_database(PG_ADMIN_URL) as url:
        asyncio.run(_down_and_up(url, tmp_path, org))


async def _down_and_up(url: str, tmp_path: Path, org: str) -> None:
    db = Database.from_url(url, data_dir=tmp_path)
    try:
        await db.migrate()
        store = FileStore(db)
        ns = Namespace(org, Scope.MEMORY)
        for name in ("a", "b"):
            await store.write(ns, f"/{name}.md", "x" * 10, who(), expected_version=0)
            await store.write(ns, f"/{name}.md", "y" * 20, who(), expected_version=1)
        held = await books(db, org)
        assert held.allowance_stored > 0
        held.balance()

        async with db.write() as conn:
            await conn.run_sync(_to("0023", down=True))

        async with db.read() as conn:
            counter = (
                await conn.execute(
                    text("SELECT bytes, stored_bytes FROM org_usage WHERE org_id = :o"),
                    {"o": org},
                )
            ).one()
        assert (counter.bytes, counter.stored_bytes) == (held.live_bytes, held.stored_bytes)
        async with db.write() as conn:
            await conn.run_sync(_to("head"))
        await store.write(ns, "/a.md", "z" * 30, who(), expected_version=2)
        (await books(db, org)).balance()
    finally:
        await db.dispose()


def _to(revision: str, *, down: bool = False) -> Callable[[Connection], None]:
    def run(connection: Connection) -> None:
        (command.downgrade if down else command.upgrade)(alembic_config(connection), revision)

    return run
