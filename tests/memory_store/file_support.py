"""Helpers for the file store tests."""

from __future__ import annotations

from sqlalchemy import func, select

from memory_store import Database, Origin
from memory_store.files.tables import files


def who(tool_use_id: str | None = None, *, actor: str = "agent", session: str = "S1") -> Origin:
    """An ``Origin``: the agent in session S1 unless told otherwise."""
    return Origin(actor=actor, session_id=session, tool_use_id=tool_use_id)


async def allowances(db: Database, org: str) -> tuple[int, int]:
    """The org's files' allowances of its quotas (bytes, stored bytes): the
    org's counters count these as used (``memory_store.files.allowance``)."""
    f = files.c
    query = select(
        func.coalesce(func.sum(f.allowance_bytes), 0),
        func.coalesce(func.sum(f.allowance_stored_bytes), 0),
    ).where(f.org_id == org)
    async with db.read() as conn:
        row = (await conn.execute(query)).one()
    return int(row[0]), int(row[1])
