"""The ``org_usage`` counter: live files and bytes, and stored bytes, per org, for the quotas.

Every change on the locked path adds its difference to the org's row in its own
transaction (an upsert), so a quota check reads one row instead of summing the org's
files. The counter row is locked from that statement to the commit. ``stored_bytes`` is
the sum of the content bytes of every revision the org keeps (the live content is its
newest revision's). Both byte counters also count the org's files' allowances
(``allowance``): the one-statement write draws on its file's allowance and leaves this row
alone, so the counters are an upper bound of real use, and real use is the counters less
the allowances (``allowance.held``).
"""

from __future__ import annotations

from sqlalchemy import bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.files.tables import org_usage
from memory_store.upsert import insert

_u = org_usage.c
_READ = select(_u.files, _u.bytes).where(_u.org_id == bindparam("org"))
_STORED = select(_u.stored_bytes).where(_u.org_id == bindparam("org"))
_COUNTERS = select(_u.files, _u.bytes, _u.stored_bytes).where(_u.org_id == bindparam("org"))
ORG_BYTES = func.coalesce(
    select(_u.bytes).where(_u.org_id == bindparam("b_org")).scalar_subquery(), 0
)
"""The org's live bytes inside a statement (bind ``b_org``); 0 for an org with no row
(one index probe: an aggregate over the one row costs the hot write more)."""


async def read(conn: AsyncConnection, org_id: str) -> tuple[int, int]:
    """(live files, live bytes) of one org, across all scopes and channels."""
    row = (await conn.execute(_READ, {"org": org_id})).first()
    return (0, 0) if row is None else (int(row.files), int(row.bytes))


ORG_STORED = func.coalesce(
    select(_u.stored_bytes).where(_u.org_id == bindparam("b_org")).scalar_subquery(), 0
)
"""The org's stored bytes inside a statement (bind ``b_org``)."""


async def stored(conn: AsyncConnection, org_id: str) -> int:
    """The bytes of every revision the org keeps, across all scopes and channels."""
    return int((await conn.execute(_STORED, {"org": org_id})).scalar_one_or_none() or 0)


async def counters(conn: AsyncConnection, org_id: str) -> tuple[int, int, int]:
    """(live files, live bytes, stored bytes) of one org, as counted (allowances
    included), in one read; (0, 0, 0) for an org with no row."""
    row = (await conn.execute(_COUNTERS, {"org": org_id})).first()
    return (0, 0, 0) if row is None else (int(row.files), int(row.bytes), int(row.stored_bytes))


async def add(
    conn: AsyncConnection, org_id: str, *, files: int, size_bytes: int, stored_bytes: int = 0
) -> None:
    """Add ``files``, ``size_bytes`` and ``stored_bytes`` (any may be negative or 0) to
    the org's counter."""
    if not files and not size_bytes and not stored_bytes:
        return
    statement = insert(org_usage, is_postgres=conn.dialect.name == "postgresql")
    statement = statement.values(
        org_id=org_id, files=files, bytes=size_bytes, stored_bytes=stored_bytes
    )
    statement = statement.on_conflict_do_update(
        index_elements=[_u.org_id],
        set_={
            "files": _u.files + files,
            "bytes": _u.bytes + size_bytes,
            "stored_bytes": _u.stored_bytes + stored_bytes,
        },
    )
    await conn.execute(statement)
