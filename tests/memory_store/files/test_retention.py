"""The retention rule on the hot path: writes at an expected version (PostgreSQL's
one-statement write; SQLite's locked path) keep a file's history bounded, and the org's
stored-bytes counter equal to the bytes of the revisions the database really keeps
(both backends)."""

from __future__ import annotations

from sqlalchemy import select

from memory_store import Database, FileStore, Limits, Namespace
from memory_store.files import retention
from memory_store.files.tables import file_revisions, files, org_usage
from tests.memory_store.file_support import books, who

KEEP = 3


async def _kept(db: Database, org: str) -> tuple[list[int], int, int]:
    """(versions the database keeps, their content's bytes, the org's counter less what
    its files' allowances)."""
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(file_revisions.c.version, file_revisions.c.content)
                .join(files, files.c.id == file_revisions.c.file_id)
                .where(files.c.org_id == org)
                .order_by(file_revisions.c.version)
            )
        ).all()
        counter = await conn.scalar(
            select(org_usage.c.stored_bytes).where(org_usage.c.org_id == org)
        )
    held = sum(len((content or "").encode()) for _, content in rows)
    allowanced = (await books(db, org)).allowance_stored
    return [version for version, _ in rows], held, int(counter or 0) - allowanced


async def test_writes_at_an_expected_version_drop_old_revisions_and_their_bytes(
    file_db: Database, memory: Namespace, org: str
) -> None:
    store = FileStore(file_db, Limits(keep_revisions=KEEP))
    version = 0
    most = KEEP + retention.FAST_PATH_EVERY - 1
    for i in range(60):
        body = f"revision {i}\n" + "x" * (i * 7)  # sizes differ: the counter must follow
        result = await store.write(memory, "/r.md", body, who(), expected_version=version)
        version = result.version
        kept, held, counter = await _kept(file_db, org)
        # Then the history never grows past what the rule lets through between two drops
        assert len(kept) <= most, kept
        assert kept == list(range(version - len(kept) + 1, version + 1))
        assert counter == held
    # And the drops happened: the oldest 40-odd revisions are gone
    kept, _, _ = await _kept(file_db, org)
    assert kept[0] > 60 - most
    assert [r.version for r in await store.history(memory, "/r.md")] == kept
