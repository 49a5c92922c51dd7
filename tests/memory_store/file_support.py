"""Helpers for the file store tests."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from memory_store import Database, Origin
from memory_store.files.tables import file_revisions, files, org_usage


def who(tool_use_id: str | None = None, *, actor: str = "agent", session: str = "S1") -> Origin:
    """An ``Origin``: the agent in session S1 unless told otherwise."""
    return Origin(actor=actor, session_id=session, tool_use_id=tool_use_id)


@dataclass(frozen=True)
class Books:
    """An org's counters, its files' allowances of its quotas
    (``memory_store.files.allowance``), and its real use, counted afresh from the
    contents the database keeps (UTF-8 bytes, on either backend)."""

    counter_bytes: int
    counter_stored: int
    allowance_bytes: int
    allowance_stored: int
    live_files: int
    live_bytes: int
    stored_bytes: int

    @property
    def drift(self) -> tuple[int, int]:
        """(bytes counter - (live + allowances), stored counter - (kept + allowances)):
        (0, 0) when the invariant holds."""
        return (
            self.counter_bytes - self.live_bytes - self.allowance_bytes,
            self.counter_stored - self.stored_bytes - self.allowance_stored,
        )

    def balance(self) -> None:
        """Assert the invariant: counters = real use + allowances."""
        assert self.drift == (0, 0), self


async def books(db: Database, org: str) -> Books:
    """The org's ``Books``, read from ``db``."""
    f, r, u = files.c, file_revisions.c, org_usage.c
    async with db.read() as conn:
        counter = (
            await conn.execute(select(u.bytes, u.stored_bytes).where(u.org_id == org))
        ).first()
        live = (
            await conn.execute(
                select(f.content, f.allowance_bytes, f.allowance_stored_bytes).where(
                    f.org_id == org
                )
            )
        ).all()
        kept = (
            await conn.execute(
                select(r.content).join(files, f.id == r.file_id).where(f.org_id == org)
            )
        ).scalars()
        stored = sum(len((content or "").encode()) for content in kept)
    return Books(
        counter_bytes=0 if counter is None else int(counter.bytes),
        counter_stored=0 if counter is None else int(counter.stored_bytes),
        allowance_bytes=sum(row.allowance_bytes for row in live),
        allowance_stored=sum(row.allowance_stored_bytes for row in live),
        live_files=sum(row.content is not None for row in live),
        live_bytes=sum(len((row.content or "").encode()) for row in live),
        stored_bytes=stored,
    )
