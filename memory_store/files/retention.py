"""The retention rule of file history: which revisions a change drops, and their bytes.

Each file keeps its newest ``Limits.keep_revisions`` revisions, enough for History and
Restore over its recent changes. Deleting a file while the org's stored bytes are over
``PRESSURE`` of its quota keeps only the deletion and the version before it (``restore``
still brings its last content back): that is how people make room when a write is
refused for stored bytes. Older revisions are deleted in
the transaction (or, on PostgreSQL's one-statement write, the statement) that appends a
new one, and their bytes leave the org's ``stored_bytes`` counter in the same statement,
so the counter is always the sum of the org's kept revisions and of its files'
allowances (``allowance``).
"""

from __future__ import annotations

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.files import usage
from memory_store.files.tables import file_revisions

_r = file_revisions.c
DELETED_KEEPS = 2  # the deletion and the content before it
FAST_PATH_EVERY = 10
"""PostgreSQL's one-statement write drops old revisions at every tenth version only (then
all that are due at once): a file keeps up to ``keep_revisions + 9`` between two, and
every change on the locked path drops what is due."""
PRESSURE = 0.9
_OLDER = (_r.file_id == bindparam("file_id"), _r.version <= bindparam("oldest_dropped"))
_SIZE = select(func.coalesce(func.sum(_r.size_bytes), 0)).where(*_OLDER)
_DROP = delete(file_revisions).where(*_OLDER)


def keeps(keep_revisions: int, *, deleted: bool = False, pressed: bool = False) -> int:
    """How many of a file's newest revisions are kept (``deleted``: the change is a
    deletion; ``pressed``: the org's stored bytes are over ``PRESSURE`` of its quota)."""
    return DELETED_KEEPS if deleted and pressed else max(DELETED_KEEPS, keep_revisions)


async def drop_older(
    conn: AsyncConnection, org_id: str, file_id: int, version: int, keep: int
) -> int:
    """Delete the revisions of ``file_id`` older than the newest ``keep`` (``version`` is
    its newest) and take their bytes off the org's stored bytes; returns those bytes."""
    params = {"file_id": file_id, "oldest_dropped": version - keep}
    if version - keep < 1:
        return 0
    freed = int((await conn.execute(_SIZE, params)).scalar_one())
    await conn.execute(_DROP, params)
    await usage.add(conn, org_id, files=0, size_bytes=0, stored_bytes=-freed)
    return freed
