"""Red team of per-file allowances of the org's byte quotas (migration 0024, ``allowance``).

Each finding's test is named ``test_finding_*`` and fails on the code it attacks; each
attack that held is named ``test_held_*`` and passes. Every check measures what the
database really holds (live contents, kept revisions' contents, allowances) against the
org's counters and quotas:

    org_usage.bytes        = Σ live size_bytes + Σ allowance_bytes
    org_usage.stored_bytes = Σ kept revisions' size_bytes + Σ allowance_stored_bytes
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from memory_store import Database, FileStore, Limits, Namespace, QuotaExceeded, Scope
from memory_store.errors import DatabaseUnavailable, StaleVersion
from memory_store.files import allowance
from memory_store.files.tables import file_revisions, files, org_usage
from tests.memory_store.file_support import Books, books, who

_f = files.c
_r = file_revisions.c
_u = org_usage.c


ON_POSTGRES = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
"""For the cases about allowances, which PostgreSQL alone gives (``file_db`` there only)."""


def _asyncpg_dsn(db: Database) -> str:
    url = db.engine.url.set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


async def _wait_until_blocked(probe: asyncpg.Connection, pid: int) -> None:
    """Wait (by polling the server's own view, not by sleeping a guessed time) until
    backend ``pid`` waits for a lock."""
    for _ in range(2_000):
        waiting = await probe.fetchval(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
        )
        if waiting:
            return
        await asyncio.sleep(0)  # yield to the statement in flight (no time-based guess)
        await probe.fetchval("SELECT pg_sleep(0.005)")
    raise AssertionError(f"backend {pid} never waited for a lock")


async def _give_allowance(store: FileStore, ns: Namespace, path: str, body: str) -> int:
    """Create ``path`` and make one conditional write of it, which finds its allowance
    short and so tops it up (``allowance.top_up``); returns the file's version (2)."""
    await store.write(ns, path, body, who(), expected_version=0)
    return (await store.write(ns, path, body + "!", who(), expected_version=1)).version


# --------------------------------------------------------------------------------------
# Finding 1: growth of a live file on the locked path, refused by the counter only
# because of allowances, retries until DatabaseUnavailable instead of reclaiming.
# --------------------------------------------------------------------------------------


@ON_POSTGRES
async def test_finding_growth_judged_over_only_by_allowances_is_not_refused_nor_lost(
    file_db: Database, org: str
) -> None:
    limits = Limits(max_bytes_per_org=100_000, incident_reserve_share=0.0)
    store = FileStore(file_db, limits)
    ns = Namespace(org, Scope.INCIDENT, "C1")
    # Given a file holding an allowance (64 KiB of the org's 100 kB, counted as used)
    await _give_allowance(store, ns, "/held.md", "a")
    assert (await books(file_db, org)).allowance_bytes == allowance.ALLOWANCE_BYTES
    # and another small file
    await store.write(ns, "/grow.md", "b", who(), expected_version=0)
    # When that other file grows to 50 kB: real use (50 kB) is well inside the quota,
    # the counter (64 KiB of allowance + 50 kB) is not
    result = await store.edit(ns, "/grow.md", "b", "b" * 50_000, who())
    # Then the edit lands (the allowance is taken back), it does not fail
    assert result.version == 2
    t = await books(file_db, org)
    assert t.drift == (0, 0)
    assert t.counter_bytes <= limits.max_bytes(Scope.INCIDENT)


# --------------------------------------------------------------------------------------
# Finding 2: a /memory file's allowance, given while the org was below the memory limit,
# lets its one-statement writes grow /memory after the org passed that limit: the room
# kept for /incident notes is taken by /memory.
# --------------------------------------------------------------------------------------


@ON_POSTGRES
async def test_finding_memory_allowance_outlives_the_memory_limit(
    file_db: Database, org: str
) -> None:
    limits = Limits(max_bytes_per_org=200_000, incident_reserve_share=0.5)
    store = FileStore(file_db, limits)
    memory = Namespace(org, Scope.MEMORY)
    incident = Namespace(org, Scope.INCIDENT, "C1")
    memory_limit = limits.max_bytes(Scope.MEMORY)  # 100 000: the rest is for notes
    # Given a /memory file given an allowance while the org was nearly empty
    version = await _give_allowance(store, memory, "/m.md", "m")
    # And incident notes that (rightly) fill the org past the memory limit
    await store.write(incident, "/n1.md", "n" * 90_000, who(), expected_version=0)
    await store.write(incident, "/n2.md", "n" * 40_000, who(), expected_version=0)
    before = await books(file_db, org)
    assert before.live_bytes > memory_limit
    # When /memory grows by a conditional write
    grown = "m" * 60_000
    with contextlib.suppress(QuotaExceeded):  # refused, as it must be
        await store.write(memory, "/m.md", grown, who(), expected_version=version)
    # Then no /memory change took the org's live bytes past the memory limit
    after = await books(file_db, org)
    assert after.live_bytes <= max(before.live_bytes, memory_limit), (
        f"/memory grew the org to {after.live_bytes} bytes, past its limit {memory_limit}"
    )


# --------------------------------------------------------------------------------------
# The previous release (c72172b), still running during a rolling upgrade: its
# one-statement write and its retention statement, rebuilt here as that release's
# ``files/conditional.py`` builds them (the helpers they use are unchanged).
# --------------------------------------------------------------------------------------


def _previous_release_statements() -> tuple[object, object]:
    from sqlalchemy import (
        DateTime,
        Integer,
        String,
        Text,
        bindparam,
        delete,
        exists,
        false,
        insert,
        update,
    )

    from memory_store.files import rows, usage

    old = files.alias("old")
    changed = (
        update(files)
        .where(
            old.c.id == _f.id,
            rows.IN_NAMESPACE,
            _f.path == bindparam("b_path"),
            _f.version == bindparam("b_version"),
            _f.deleted == false(),
            _f.content != bindparam("n_content"),
            rows.WITHIN_QUOTA,
            usage.ORG_STORED + bindparam("b_size") <= bindparam("b_max_stored"),
        )
        .values(
            version=bindparam("n_version"),
            content=bindparam("n_content"),
            size_bytes=bindparam("b_size"),
            updated_at=bindparam("n_at"),
            actor=bindparam("n_actor"),
            session_id=bindparam("n_session"),
            summary=bindparam("n_summary"),
            listed=bindparam("n_listed"),
        )
        .returning(_f.id, old.c.size_bytes.label("old_size"))
        .cte("changed")
    )
    counted = (
        update(org_usage)
        .where(_u.org_id == bindparam("b_org"), exists(select(changed.c.id)))
        .values(
            bytes=_u.bytes + bindparam("b_size") - select(changed.c.old_size).scalar_subquery(),
            stored_bytes=_u.stored_bytes + bindparam("b_size"),
        )
        .cte("counted")
    )
    write = (
        insert(file_revisions)
        .from_select(
            [
                "file_id",
                "version",
                "base_version",
                "operation",
                "content",
                "actor",
                "session_id",
                "tool_use_id",
                "created_at",
                "size_bytes",
            ],
            select(
                changed.c.id,
                bindparam("n_version", type_=Integer),
                bindparam("b_version", type_=Integer),
                bindparam("r_operation", type_=String),
                bindparam("n_content", type_=Text),
                bindparam("n_actor", type_=String),
                bindparam("n_session", type_=String),
                bindparam("r_tool_use_id", type_=String),
                bindparam("n_at", type_=DateTime(timezone=True)),
                bindparam("b_size", type_=Integer),
            ),
        )
        .add_cte(counted)
        .returning(file_revisions.c.file_id)
    )
    gone = (
        delete(file_revisions)
        .where(_r.file_id == bindparam("file_id"), _r.version <= bindparam("oldest_dropped"))
        .returning(_r.size_bytes)
        .cte("gone")
    )
    drop_older = (
        update(org_usage)
        .where(_u.org_id == bindparam("b_org"))
        .values(
            stored_bytes=_u.stored_bytes
            - select(func.coalesce(func.sum(gone.c.size_bytes), 0)).scalar_subquery()
        )
        .add_cte(gone)
    )
    return write, drop_older


async def _previous_release_write(
    db: Database, limits: Limits, ns: Namespace, path: str, content: str, expected: int
) -> int | None:
    """The previous release's one-statement write (its statement 1 only: the retention
    statement it sends next is left to the caller); returns the file id or None."""
    from datetime import UTC, datetime

    write, _ = _previous_release_statements()
    params = {
        "ns_org": ns.org_id,
        "ns_scope": ns.scope.value,
        "ns_channel": ns.channel_id,
        "b_org": ns.org_id,
        "b_size": len(content.encode()),
        "b_max_bytes": limits.max_bytes(ns.scope),
        "b_max_stored": limits.max_stored_bytes(ns.scope),
        "b_path": path,
        "b_version": expected,
        "n_version": expected + 1,
        "n_content": content,
        "n_summary": "",
        "n_listed": True,
        "n_at": datetime.now(UTC),
        "n_actor": "old-release",
        "n_session": "S-old",
        "r_operation": "write",
        "r_tool_use_id": None,
    }
    statement = db.precompiled(write)  # type: ignore[arg-type]
    async with db.driver() as conn:
        found = await conn.fetchval(statement.sql, *statement.args(params))
    return None if found is None else int(found)


# --------------------------------------------------------------------------------------
# Finding 3: during a rolling upgrade, the previous release's retention statement (sent
# after its write, without the file's row) and this release's due one-statement write
# free the same revisions twice: ``_FREED`` sums them from the statement's snapshot, so
# the file's stored allowance is credited with bytes the old statement already took off
# the counter. The counter then says less than the org keeps: the stored quota leaks.
# --------------------------------------------------------------------------------------


@ON_POSTGRES
async def test_finding_previous_release_drop_and_due_write_free_revisions_twice(
    file_db: Database, org: str
) -> None:
    keep = 3  # due at versions 13, 23, … (oldest dropped 10, 20, …)
    limits = Limits(keep_revisions=keep)
    store = FileStore(file_db, limits)
    ns = Namespace(org, Scope.INCIDENT, "C1")

    def body(v: int) -> str:
        return f"version {v} " + "x" * 100

    # Given a file given an allowance, written by this release up to version 12
    await store.write(ns, "/f.md", body(1), who(), expected_version=0)
    for v in range(2, 13):
        await store.write(ns, "/f.md", body(v), who(), expected_version=v - 1)
    # And version 13 written by a process of the previous release, whose retention
    # statement (due: oldest dropped 10) is held up on the org's counter row, which this
    # release's one-statement writes no longer touch, so they go on
    file_id = await _previous_release_write(file_db, limits, ns, "/f.md", body(13), 12)
    assert file_id is not None
    for v in range(14, 23):
        await store.write(ns, "/f.md", body(v), who(), expected_version=v - 1)
    assert (await books(file_db, org)).drift == (0, 0)

    dsn = _asyncpg_dsn(file_db)
    holder = await asyncpg.connect(dsn)
    old = await asyncpg.connect(dsn)
    probe = await asyncpg.connect(dsn)
    try:
        _, drop_older = _previous_release_statements()
        drop = file_db.precompiled(drop_older)  # type: ignore[arg-type]
        hold = holder.transaction()
        await hold.start()
        await holder.execute("SELECT 1 FROM org_usage WHERE org_id = $1 FOR UPDATE", org)
        old_pid = await old.fetchval("SELECT pg_backend_pid()")
        dropping = asyncio.create_task(
            old.execute(
                drop.sql,
                *drop.args({"file_id": file_id, "oldest_dropped": 13 - keep, "b_org": org}),
            )
        )
        await _wait_until_blocked(probe, old_pid)  # its revisions 1..10 deleted, uncommitted
        # When this release's due write (version 23: oldest dropped 20) runs meanwhile
        writing = asyncio.create_task(
            store.write(ns, "/f.md", body(23), who(), expected_version=22)
        )
        for _ in range(2_000):
            others = await probe.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND pid <> $1",
                old_pid,
            )
            if others or writing.done():
                break
            await probe.fetchval("SELECT pg_sleep(0.005)")
        await hold.commit()
        await dropping
        assert (await writing).version == 23
    finally:
        for conn in (holder, old, probe):
            await conn.close()
    # Then the counters still equal what the org keeps plus its allowances
    kept = [v for (v,) in (await _versions(file_db, org))]
    assert kept == [21, 22, 23]
    assert (await books(file_db, org)).drift == (0, 0)


async def _versions(db: Database, org: str) -> list[tuple[int]]:
    async with db.read() as conn:
        found = await conn.execute(
            select(_r.version)
            .select_from(file_revisions.join(files, _f.id == _r.file_id))
            .where(_f.org_id == org)
            .order_by(_r.version)
        )
        return [tuple(row) for row in found.all()]


# --------------------------------------------------------------------------------------
# Attacks that held (these pass).
# --------------------------------------------------------------------------------------


async def _check(db: Database, org: str, limits: Limits, slack: int = 0) -> Books:
    """The invariant, and the quotas (``slack``: what concurrent locked writers may
    overshoot by, each by its own size: their checks read the counter without a lock,
    as before this change, ``commit._check_quota``)."""
    t = await books(db, org)
    assert t.drift == (0, 0), t
    assert t.live_bytes <= limits.max_bytes(Scope.INCIDENT) + slack, t
    assert t.stored_bytes <= limits.max_stored_bytes(Scope.INCIDENT) + slack, t
    if not db.is_postgres:
        assert (t.allowance_bytes, t.allowance_stored) == (0, 0), t
    return t


async def test_held_every_kind_of_change_keeps_the_invariant_and_the_quotas(
    file_db: Database, org: str
) -> None:
    import random

    from memory_store.errors import StoreError

    limits = Limits(
        max_bytes_per_org=150_000,
        max_stored_bytes_per_org=600_000,
        keep_revisions=3,
        incident_reserve_share=0.2,
    )
    store = FileStore(file_db, limits)
    spaces = [Namespace(org, Scope.INCIDENT, "C1"), Namespace(org, Scope.MEMORY)]
    names = ["/a.md", "/A.md", "/b.md", "/c/d.md"]
    rng = random.Random(5)
    unavailable: list[str] = []
    for step in range(400):
        ns = rng.choice(spaces)
        path = rng.choice(names)
        size = rng.choice([0, 1, 10, 500, 5_000, 30_000, 60_000])
        body = f"{step}:" + "q" * size
        op = rng.choice(["cw", "cw", "cw", "w", "edit", "delete", "restore", "retry"])
        try:
            if op in ("cw", "retry"):
                try:
                    current = (await store.read(ns, path)).version
                except StoreError:
                    current = 0
                origin = who(f"toolu_{step if op == 'cw' else 'same'}")
                await store.write(ns, path, body, origin, expected_version=current)
            elif op == "w":
                await store.write(ns, path, body, who(), expected_version=None)
            elif op == "edit":
                current_body = (await store.read(ns, path)).content
                await store.edit(ns, path, current_body[:3] or "", body, who())
            elif op == "delete":
                await store.delete(ns, path, who())
            else:
                history = await store.history(ns, path)
                if history:
                    await store.restore(ns, path, rng.choice(history).version, who())
        except DatabaseUnavailable as exc:
            unavailable.append(f"{op} {path}: {exc}")
        except StoreError:
            pass
        await _check(file_db, org, limits)
    print("unavailable:", unavailable)
    # only finding 1's retries ("kept conflicting") may end a change here
    assert [m for m in unavailable if "kept conflicting" not in m] == []


@ON_POSTGRES
async def test_held_a_retried_tool_call_is_answered_without_drawing_twice(
    file_db: Database, org: str
) -> None:
    store = FileStore(file_db)
    ns = Namespace(org, Scope.INCIDENT, "C1")
    version = await _give_allowance(store, ns, "/r.md", "r")
    origin = who("toolu_retry")
    first = await store.write(ns, "/r.md", "r" * 1_000, origin, expected_version=version)
    before = await books(file_db, org)
    again = await store.write(ns, "/r.md", "r" * 1_000, origin, expected_version=version)
    assert again.version == first.version
    after = await books(file_db, org)
    assert after == before
    assert after.drift == (0, 0)


@ON_POSTGRES
async def test_held_deleting_a_file_gives_its_allowance_back_and_restoring_works(
    file_db: Database, org: str
) -> None:
    store = FileStore(file_db)
    ns = Namespace(org, Scope.INCIDENT, "C1")
    version = await _give_allowance(store, ns, "/d.md", "d")
    assert (await books(file_db, org)).allowance_bytes > 0
    await store.delete(ns, "/d.md", who())
    t = await books(file_db, org)
    assert (t.allowance_bytes, t.allowance_stored) == (0, 0)
    assert t.drift == (0, 0)
    assert await store.usage(org) == (0, 0)
    await store.restore(ns, "/d.md", version, who())
    # a case-only twin created after a deletion is its own row, with no allowance
    await store.delete(ns, "/d.md", who())
    await store.write(ns, "/D.md", "D", who(), expected_version=0)
    assert (await books(file_db, org)).drift == (0, 0)


@ON_POSTGRES
async def test_held_concurrent_hot_writes_reclaims_and_locked_writers_settle(
    file_db: Database, org: str
) -> None:
    """Many files with allowances written by one-statement writes, while other writers
    create and grow files near the quota (each reclaims, ``SKIP LOCKED``) and delete:
    no deadlock, no lock timeout, counters exact, quotas kept."""
    from memory_store.errors import StoreError

    limits = Limits(
        max_bytes_per_org=600_000,
        max_stored_bytes_per_org=3_000_000,
        keep_revisions=2,
        incident_reserve_share=0.0,
    )
    store = FileStore(file_db, limits)
    ns = Namespace(org, Scope.INCIDENT, "C1")
    hot = [f"/hot{i}.md" for i in range(6)]
    for path in hot:
        await _give_allowance(store, ns, path, path)
    errors: list[BaseException] = []
    unavailable: list[str] = []

    async def hot_writer(path: str) -> None:
        for i in range(40):
            try:
                current = (await store.read(ns, path)).version
                await store.write(
                    ns, path, f"{i}" * (i * 50 % 3_000 + 1), who(), expected_version=current
                )
            except (StaleVersion, QuotaExceeded):
                pass
            except DatabaseUnavailable as exc:
                unavailable.append(str(exc))
            except Exception as exc:
                errors.append(exc)

    async def filler(k: int) -> None:
        for i in range(20):
            path = f"/fill{k}-{i % 5}.md"
            try:
                await store.write(
                    ns, path, "f" * (20_000 + 1_000 * i), who(), expected_version=None
                )
                if i % 3 == 2:
                    await store.delete(ns, path, who())
            except DatabaseUnavailable as exc:
                unavailable.append(str(exc))
            except (QuotaExceeded, StoreError):
                pass
            except Exception as exc:
                errors.append(exc)

    await asyncio.gather(*(hot_writer(p) for p in hot), *(filler(k) for k in range(4)))
    assert errors == []
    print("unavailable:", unavailable)
    # no deadlock and no lock timeout; "kept conflicting" is finding 1, tolerated here
    assert [m for m in unavailable if "kept conflicting" not in m] == []
    await _check(file_db, org, limits, slack=4 * 40_000)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """None (SQLite under ``tmp_path``) or a throwaway, never-migrated PostgreSQL database."""
    from tests import pg_admin
    from tests.conftest import PG_ADMIN_URL, require_service

    if request.param == "sqlite":
        yield None
        return
    require_service("PostgreSQL", PG_ADMIN_URL)
    with pg_admin.throwaway_database(PG_ADMIN_URL) as url:
        yield url


def _migrate(revision: str, *, down: bool = False):  # type: ignore[no-untyped-def]
    from alembic import command

    from memory_store.migrate import alembic_config

    def run(connection):  # type: ignore[no-untyped-def]
        (command.downgrade if down else command.upgrade)(alembic_config(connection), revision)

    return run


def _live_fold_index(connection: Connection) -> str:
    if connection.dialect.name == "sqlite":
        return str(
            connection.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'uq_files_live_fold'"
            ).scalar_one()
        )
    return str(
        connection.exec_driver_sql(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'uq_files_live_fold'"
        ).scalar_one()
    )


async def test_held_migrations_0024_and_0023_down_and_up_keep_counters_exact(
    fresh_url: str | None, tmp_path: Path
) -> None:
    from sqlalchemy import text

    db = Database.from_url(fresh_url, data_dir=tmp_path)
    org = "T-mig"
    ns = Namespace(org, Scope.INCIDENT, "C1")
    try:
        await db.migrate()
        store = FileStore(db, Limits(keep_revisions=3))
        version = await _give_allowance(store, ns, "/a.md", "a" * 100)
        for v in range(version, version + 12):
            await store.write(ns, "/a.md", f"{v}" * 50, who(), expected_version=v)
        await _give_allowance(store, ns, "/gone.md", "g")
        await store.delete(ns, "/gone.md", who())
        t = await books(db, org)
        assert t.drift == (0, 0)
        assert (t.allowance_bytes > 0) == db.is_postgres
        async with db.read() as conn:
            index_before = await conn.run_sync(_live_fold_index)
        # When 0024 is undone: the allowances go back to the counters
        async with db.write() as conn:
            await conn.run_sync(_migrate("0023", down=True))
        async with db.read() as conn:
            counter = (await conn.execute(text("SELECT bytes, stored_bytes FROM org_usage"))).one()
            index_after = await conn.run_sync(_live_fold_index)
        assert (counter[0], counter[1]) == (t.live_bytes, t.stored_bytes)
        assert index_after == index_before  # the partial unique index is still partial
        # And 0023 too, and back up to head
        async with db.write() as conn:
            await conn.run_sync(_migrate("0022", down=True))
        async with db.write() as conn:
            await conn.run_sync(_migrate("head"))
        t = await books(db, org)
        assert t.drift == (0, 0)
        assert (t.allowance_bytes, t.allowance_stored) == (0, 0)
        # the store goes on: a case twin may be created beside the deleted one
        await store.write(ns, "/GONE.md", "G", who(), expected_version=0)
        current = (await store.read(ns, "/a.md")).version
        await store.write(ns, "/a.md", "after", who(), expected_version=current)
        await store.write(ns, "/a.md", "after again", who(), expected_version=current + 1)
        assert (await books(db, org)).drift == (0, 0)
    finally:
        await db.dispose()


# --------------------------------------------------------------------------------------
# Finding 4: a reclaim locks every allowance-holding file of the org and then queues for the
# org's counter row, holding those rows: one-statement writes of unrelated files, which
# no longer touch the counter row, wait behind whoever holds it (and fail after
# ``lock_timeout`` as DatabaseUnavailable, instead of taking the locked path).
# --------------------------------------------------------------------------------------


@ON_POSTGRES
async def test_finding_reclaim_makes_hot_writes_wait_for_the_counter_row(
    file_db: Database, org: str
) -> None:
    limits = Limits(max_bytes_per_org=100_000, incident_reserve_share=0.0)
    store = FileStore(file_db, limits)
    ns = Namespace(org, Scope.INCIDENT, "C1")
    # Given a file with an allowance, written by one-statement writes
    version = await _give_allowance(store, ns, "/hot.md", "h")
    version = (await store.write(ns, "/hot.md", "hh", who(), expected_version=version)).version
    dsn = _asyncpg_dsn(file_db)
    holder = await asyncpg.connect(dsn)
    probe = await asyncpg.connect(dsn)
    try:
        # And a locked-path change holding the org's counter row (between its count and
        # its commit, as every locked-path change does)
        hold = holder.transaction()
        await hold.start()
        await holder.execute("SELECT 1 FROM org_usage WHERE org_id = $1 FOR UPDATE", org)
        # And a creation the counter (not real use) would refuse: it reclaims, then
        # queues for the counter row
        creating = asyncio.create_task(
            store.write(ns, "/big.md", "b" * 50_000, who(), expected_version=0)
        )
        for _ in range(2_000):
            if await probe.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"
            ):
                break
            await probe.fetchval("SELECT pg_sleep(0.005)")
        # When the hot file is written at its version (one statement, one row)
        writing = asyncio.create_task(
            store.write(ns, "/hot.md", "hhh", who(), expected_version=version)
        )
        waited = False
        for _ in range(2_000):
            if writing.done():
                break
            waited = bool(
                await probe.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND query LIKE 'WITH changed AS%'"
                )
            )
            if waited:
                break
            await probe.fetchval("SELECT pg_sleep(0.005)")
        await hold.commit()
        await creating
        await writing
    finally:
        await holder.close()
        await probe.close()
    # Then it did not wait for the counter row it does not touch
    assert not waited, "a one-statement write waited behind the org's counter row"
    assert (await books(file_db, org)).drift == (0, 0)


# --------------------------------------------------------------------------------------
# Finding 5 (rolling upgrade): a process of the previous release judges quotas on the
# counters, which now count allowances as used, and never reclaims them: it refuses a
# change that the org's real use lets through, as long as this release's files hold
# allowances (its locked path refuses on the same counter, ``rows.WITHIN_QUOTA``).
# --------------------------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason="left: only while a rolling upgrade runs, a process of the previous release judges"
    " quotas on counters that count this release's allowances as used, and may refuse a change"
    " real use allows by at most the allowances held (migration 0024 says so)",
)
@ON_POSTGRES
async def test_finding_previous_release_refuses_what_real_use_allows(
    file_db: Database, org: str
) -> None:
    limits = Limits(max_bytes_per_org=100_000, incident_reserve_share=0.0)
    store = FileStore(file_db, limits)
    ns = Namespace(org, Scope.INCIDENT, "C1")
    await _give_allowance(store, ns, "/held.md", "a")  # 64 KiB of allowance, counted
    await store.write(ns, "/grow.md", "b", who(), expected_version=0)
    t = await books(file_db, org)
    assert t.live_bytes + 50_000 <= limits.max_bytes(Scope.INCIDENT)
    # When a process of the previous release grows /grow.md to 50 kB
    written = await _previous_release_write(file_db, limits, ns, "/grow.md", "b" * 50_000, 1)
    # Then it lands: the org's real use leaves room for it
    assert written is not None, "the previous release refused a change real use allows"
