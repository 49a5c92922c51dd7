"""Per-file allowances of the org's byte quotas, so that the hot write touches one row.

The one-statement write another session waits to see (``conditional``) changes the
file's row and appends its revision; it does not read or change the org's counter row
(``org_usage``). It draws instead on its file's allowance:

- ``allowance_bytes``: live bytes the file may grow by (a shrink adds what it frees);
- ``allowance_stored_bytes``: revision bytes it may append.

An allowance is given out of the org's room, and counted in the org's counters when it is
given, so the counters stay an upper bound of what is really used and no quota can be
passed (``tables``: counters = real use + allowances). When a conditional write finds its
file's allowance short, it takes the locked path, which counts that change in the org's
row directly and then tops the allowance up (``top_up``). A change that would be refused
for a quota first takes back every allowance of the org that no other transaction holds
(``reclaim``) and is judged again, so allowances never refuse a change that the org's
real use lets through, except for the allowances of files being written at that moment
(at most ``ALLOWANCE_BYTES`` and ``ALLOWANCE_STORED_BYTES`` each). A deletion gives its
file's allowance back (``commit``). A quota lowered by a new setting bounds an allowance
given before only once it is spent or taken back (each is at most the amounts above).

Only PostgreSQL has the one-statement write; on SQLite no allowance is ever given.
"""

from __future__ import annotations

from sqlalchemy import bindparam, false, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.files import usage
from memory_store.files.tables import files, org_usage
from memory_store.records import Limits, Namespace

ALLOWANCE_BYTES = 64 * 1024
"""Live bytes a file is topped up to: growth that one-statement writes may add."""
ALLOWANCE_STORED_BYTES = 1024 * 1024
"""Revision bytes a file is topped up to: ten writes of the largest file, or many
more of an ordinary note (a write that finds it short is topped up again)."""

_f = files.c
_u = org_usage.c
_COUNTER = select(_u.bytes, _u.stored_bytes).where(_u.org_id == bindparam("org")).with_for_update()
_GIVE = (
    update(files)
    .where(_f.id == bindparam("file_id"), _f.deleted == false())
    .values(
        allowance_bytes=_f.allowance_bytes + bindparam("give_bytes"),
        allowance_stored_bytes=_f.allowance_stored_bytes + bindparam("give_stored"),
    )
)
_RECLAIM = text(
    "WITH taken AS (SELECT id, allowance_bytes, allowance_stored_bytes FROM files"
    " WHERE org_id = :org AND (allowance_bytes > 0 OR allowance_stored_bytes > 0)"
    " FOR UPDATE SKIP LOCKED),"
    " cleared AS (UPDATE files SET allowance_bytes = 0, allowance_stored_bytes = 0"
    " FROM taken WHERE files.id = taken.id)"
    " SELECT coalesce(sum(allowance_bytes), 0), coalesce(sum(allowance_stored_bytes), 0)"
    " FROM taken"
)
_REAL_STORED = select(
    _u.stored_bytes
    - select(func.coalesce(func.sum(_f.allowance_stored_bytes), 0))
    .where(_f.org_id == bindparam("org"))
    .scalar_subquery()
).where(_u.org_id == bindparam("org"))
_REAL_USE = select(
    _u.files,
    _u.bytes
    - select(func.coalesce(func.sum(_f.allowance_bytes), 0))
    .where(_f.org_id == bindparam("org"))
    .scalar_subquery(),
).where(_u.org_id == bindparam("org"))


async def top_up(
    conn: AsyncConnection,
    limits: Limits,
    ns: Namespace,
    file_id: int,
    held: tuple[int, int],
) -> tuple[int, int]:
    """Top the allowance of live file ``file_id`` (now ``held``: bytes, stored bytes) up
    to ``ALLOWANCE_BYTES`` and ``ALLOWANCE_STORED_BYTES``, within the room the org's
    quotas for ``ns.scope`` leave; returns what was given (bytes, stored bytes).

    Call it inside the change's transaction, with the file's row locked: the org's
    counter row is locked here (``FOR UPDATE``), so what is given and what is counted
    are the same.
    """
    if conn.dialect.name != "postgresql":
        return 0, 0
    row = (await conn.execute(_COUNTER, {"org": ns.org_id})).first()
    if row is None:
        return 0, 0
    room_bytes = max(0, limits.max_bytes(ns.scope) - int(row.bytes))
    room_stored = max(0, limits.max_stored_bytes(ns.scope) - int(row.stored_bytes))
    give_bytes = min(max(0, ALLOWANCE_BYTES - held[0]), room_bytes)
    give_stored = min(max(0, ALLOWANCE_STORED_BYTES - held[1]), room_stored)
    if not give_bytes and not give_stored:
        return 0, 0
    params = {"file_id": file_id, "give_bytes": give_bytes, "give_stored": give_stored}
    if (await conn.execute(_GIVE, params)).rowcount != 1:
        return 0, 0
    await usage.add(conn, ns.org_id, files=0, size_bytes=give_bytes, stored_bytes=give_stored)
    return give_bytes, give_stored


async def reclaim(conn: AsyncConnection, org_id: str) -> tuple[int, int]:
    """Take back every allowance of the org's files that no other transaction holds and
    take it off the org's counters; returns what was taken back (bytes, stored bytes).

    The org's counter row is locked first (``FOR UPDATE``: this waits for a writer on
    the locked path), then the files' rows ``SKIP LOCKED`` (this never waits for a
    writer of a file, so it cannot deadlock with one). Both stay locked to the end of
    the transaction.
    """
    if conn.dialect.name != "postgresql":
        return 0, 0
    # the counter row first: the files' rows, once taken, are held only while this
    # transaction runs on, not while it waits for the counter behind another writer (a
    # one-statement write of one of those files would wait as long)
    await conn.execute(_COUNTER, {"org": org_id})
    taken = (await conn.execute(_RECLAIM, {"org": org_id})).one()
    freed_bytes, freed_stored = int(taken[0]), int(taken[1])
    await usage.add(conn, org_id, files=0, size_bytes=-freed_bytes, stored_bytes=-freed_stored)
    return freed_bytes, freed_stored


async def real_stored(conn: AsyncConnection, org_id: str) -> int:
    """The bytes of every revision the org keeps: its stored-bytes counter less its
    files' allowances, read in one statement. For reports, not hot paths."""
    found = (await conn.execute(_REAL_STORED, {"org": org_id})).scalar_one_or_none()
    return int(found or 0)


async def real_use(conn: AsyncConnection, org_id: str) -> tuple[int, int]:
    """(live files, live bytes) of the org: its counters less what its files hold in
    allowance, read in one statement (one snapshot). Sums the org's files' allowances: for
    reports, not hot paths."""
    row = (await conn.execute(_REAL_USE, {"org": org_id})).first()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))
