"""Red team, promise 8: an org's stored bytes stay bounded, revisions included, whatever
way a misled agent writes (both backends). Each attempt measures what the database really
holds (every kept revision's content) against the quota, and the counter against that."""

from __future__ import annotations

from sqlalchemy import select

from memory_store import Database, FileStore, Limits, Namespace, QuotaExceeded, Scope
from memory_store.files.tables import file_revisions, files, org_usage
from tests.memory_store.file_support import books, who

LIMIT = 6_000
LIMITS = Limits(max_stored_bytes_per_org=LIMIT, incident_reserve_share=0.0)


async def _held(db: Database, org: str) -> tuple[int, int]:
    """(bytes of every revision content the database keeps for ``org``, its counter
    less its files' allowances)."""
    async with db.read() as conn:
        rows = await conn.execute(
            select(file_revisions.c.content)
            .join(files, files.c.id == file_revisions.c.file_id)
            .where(files.c.org_id == org)
        )
        held = sum(len((content or "").encode()) for (content,) in rows)
        counter = await conn.scalar(
            select(org_usage.c.stored_bytes).where(org_usage.c.org_id == org)
        )
    allowanced = (await books(db, org)).allowance_stored
    return held, int(counter or 0) - allowanced


async def _until_refused(attempts: int, step: object) -> bool:
    for i in range(attempts):
        try:
            await step(i)  # type: ignore[operator]
        except QuotaExceeded:
            return True
    return False


async def test_p8_many_small_files_cannot_store_past_the_quota(
    file_db: Database, memory: Namespace, org: str
) -> None:
    store = FileStore(file_db, LIMITS)

    async def step(i: int) -> None:
        await store.write(memory, f"/n/{i}.md", "x" * 100, who(), expected_version=0)

    assert await _until_refused(200, step)
    held, counter = await _held(file_db, org)
    assert held <= LIMIT
    assert counter == held


async def test_p8_creating_and_deleting_under_new_names_stays_bounded(
    file_db: Database, memory: Namespace, org: str
) -> None:
    # deletion frees the file count, so only the stored-bytes quota can stop this
    store = FileStore(file_db, LIMITS)

    async def step(i: int) -> None:
        await store.write(memory, f"/gone-{i}.md", "y" * 400, who(), expected_version=0)
        await store.delete(memory, f"/gone-{i}.md", who())

    await _until_refused(60, step)
    held, counter = await _held(file_db, org)
    assert held <= LIMIT
    assert counter == held


async def test_p8_other_namespaces_share_the_orgs_one_quota(file_db: Database, org: str) -> None:
    store = FileStore(file_db, LIMITS)
    spaces = [Namespace(org, Scope.INCIDENT, f"C{i}") for i in range(10)] + [
        Namespace(org, Scope.SKILLS),
        Namespace(org, Scope.MEMORY),
    ]

    async def step(i: int) -> None:
        space = spaces[i % len(spaces)]
        await store.write(space, f"/p{i}.md", "z" * 700, who(), expected_version=0)

    assert await _until_refused(60, step)
    held, counter = await _held(file_db, org)
    assert held <= LIMIT
    assert counter == held


async def test_p8_restoring_old_versions_again_and_again_stays_bounded(
    file_db: Database, memory: Namespace, org: str
) -> None:
    store = FileStore(file_db, LIMITS)
    await store.write(memory, "/r.md", "a" * 500, who(), expected_version=0)
    await store.write(memory, "/r.md", "b" * 500, who(), expected_version=1)

    async def step(i: int) -> None:
        await store.restore(memory, "/r.md", 1 + i % 2, who())

    await _until_refused(60, step)
    held, counter = await _held(file_db, org)
    assert held <= LIMIT
    assert counter == held


async def test_p8_one_statement_rewrites_and_edits_are_counted_exactly(
    file_db: Database, memory: Namespace, org: str
) -> None:
    store = FileStore(file_db, LIMITS)
    await store.write(memory, "/w.md", "0" * 200, who(), expected_version=0)

    async def step(i: int) -> None:
        await store.write(memory, "/w.md", str(i % 10) * 200, who(), expected_version=None)
        await store.edit(memory, "/w.md", str(i % 10) * 200, "e" * 210, who())

    await _until_refused(40, step)
    held, counter = await _held(file_db, org)
    # the one-statement write may overshoot by one file (README), never more
    assert held <= LIMIT + 210
    assert counter == held


async def test_p8_empty_files_under_long_names_meet_the_file_quota(
    file_db: Database, memory: Namespace
) -> None:
    store = FileStore(file_db, Limits(max_files_per_org=30, incident_reserve_share=0.0))
    name = "n" * 200

    async def step(i: int) -> None:
        await store.write(memory, f"/{name}{i}.md", "", who(), expected_version=0)

    # the 31st empty file is refused: names alone cannot grow the org without bound
    assert await _until_refused(31, step)
