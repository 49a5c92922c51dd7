"""The one-statement conditional write on PostgreSQL (the fast path of ``write``).

``write(expected_version=n)`` on a live file is the hot path that makes a session's
write visible to the others, so on PostgreSQL it is a single atomic statement run
outside an explicit transaction (no BEGIN/COMMIT round trips)::

    WITH changed AS (UPDATE files SET … WHERE <namespace, path> AND version = :n
                     AND NOT deleted AND content <> :content
                     AND <byte and stored-byte quotas hold> RETURNING files.id),
         [gone AS (DELETE FROM file_revisions WHERE file_id = changed.id
                   AND version <= :oldest_dropped RETURNING size_bytes),]
         counted AS (UPDATE org_usage SET bytes = bytes + :size - <the old size>,
                     stored_bytes = stored_bytes + :size [- sum(gone.size_bytes)] …)
    INSERT INTO file_revisions (…) SELECT changed.id, … FROM changed RETURNING file_id

The old size is read from the row as the statement's snapshot holds it (a subquery by
id: one index probe, cheaper than joining ``files`` to itself). ``gone`` is the retention
rule (``retention``), due at every tenth version past what the file keeps: that write
sends the statement with it, which drops the oldest revisions and takes their bytes off
``stored_bytes``; the other nine send the statement without it. (One statement whose
``gone`` is gated by a parameter costs every write about 5% of the floor: PostgreSQL
starts each plan node of a statement on every execution, gated or not.)

(The self-join gives the size before the update, for the org's byte counter.)

It writes nothing when any condition fails; the caller then takes the general,
locked path, which says why. SQLite cannot put an UPDATE in a CTE, and its writers
are serialised anyway, so there it always takes the general path.

The statement is compiled once and sent on the driver's connection
(``Database.driver``): a write that another session should see at once pays for one
round trip, not for SQLAlchemy's execution of it (``bench/memory_store.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    DateTime,
    Insert,
    Integer,
    String,
    Text,
    bindparam,
    delete,
    exists,
    false,
    func,
    insert,
    select,
    update,
)

from memory_store.db import Database
from memory_store.files import retention, rows, usage
from memory_store.files.summary import describe
from memory_store.files.tables import file_revisions, files, org_usage
from memory_store.records import Limits, Namespace, Origin

_f = files.c
_old = files.alias("old")
_u = org_usage.c
_r = file_revisions.c

_CHANGED = (
    update(files)
    .where(
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
    .returning(_f.id)
    .cte("changed")
)
_CHANGED_ID = select(_CHANGED.c.id).scalar_subquery()
# The size the file had: its row as the statement's snapshot holds it (a statement does
# not see its own changes). The row that ``changed`` updated is that one: a concurrent
# change moves the version, and then ``changed``'s recheck of it fails.
_OLD_SIZE = select(_old.c.size_bytes).where(_old.c.id == _CHANGED_ID).scalar_subquery()
_GONE = (
    delete(file_revisions)
    .where(_r.file_id == _CHANGED_ID, _r.version <= bindparam("r_oldest_dropped"))
    .returning(_r.size_bytes)
    .cte("gone")
)
_REVISION_COLUMNS = [
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
]


def _write_and_log(*, dropping: bool) -> Insert:
    """The one statement; ``dropping``: with the retention rule's ``gone``."""
    stored = _u.stored_bytes + bindparam("b_size")
    if dropping:
        stored = stored - select(func.coalesce(func.sum(_GONE.c.size_bytes), 0)).scalar_subquery()
    counted = (
        update(org_usage)
        .where(_u.org_id == bindparam("b_org"), exists(select(_CHANGED.c.id)))
        .values(bytes=_u.bytes + bindparam("b_size") - _OLD_SIZE, stored_bytes=stored)
        .cte("counted")
    )
    statement = insert(file_revisions).from_select(
        _REVISION_COLUMNS,
        select(
            _CHANGED.c.id,
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
    if dropping:
        statement = statement.add_cte(_GONE)
    return statement.add_cte(counted).returning(file_revisions.c.file_id)


_WRITE_AND_LOG = _write_and_log(dropping=False)
_WRITE_DROP_AND_LOG = _write_and_log(dropping=True)


async def conditional_write(
    db: Database,
    limits: Limits,
    ns: Namespace,
    path: str,
    content: str,
    origin: Origin,
    expected_version: int,
) -> int | None:
    """Replace the live file at normalised ``path`` in ``ns``, still at
    ``expected_version``, with ``content`` (already checked) in one statement; returns
    the new version.

    Returns None when nothing was written (not PostgreSQL; the file is missing,
    deleted, at another version, or already holds ``content``; or the org's byte quota
    would overflow): the caller's general path then says why. The parameters are built
    here, in one dict, without the general path's plan and outcome objects: this is the
    write another session waits to see (``bench/memory_store.py``).

    Raises:
        WriteConflict: this ``tool_use_id`` already changed the file (retry path answers).
        DatabaseUnavailable: the database could not be reached or timed out.
    """
    if not db.is_postgres:
        return None
    scope = ns.scope
    found = describe(scope.value, path, content)
    version = expected_version + 1
    oldest_dropped = version - retention.keeps(limits.keep_revisions)
    size = len(content.encode())
    params: dict[str, Any] = {  # rows.ns_params and rows.quota_params, inlined (hot)
        "ns_org": ns.org_id,
        "ns_scope": scope.value,
        "ns_channel": ns.channel_id,
        "b_org": ns.org_id,
        "b_size": size,
        "b_max_bytes": limits.max_bytes(scope),
        "b_max_stored": limits.max_stored_bytes(scope),
        "b_path": path,
        "b_version": expected_version,
        "n_version": version,
        "n_content": content,
        "n_summary": found.summary,
        "n_listed": found.listed,
        "n_at": datetime.now(UTC),
        "n_actor": origin.actor,
        "n_session": origin.session_id,
        "r_operation": "write",
        "r_tool_use_id": origin.tool_use_id,
        "r_oldest_dropped": oldest_dropped,
    }
    due = oldest_dropped >= 1 and oldest_dropped % retention.FAST_PATH_EVERY == 0
    write = db.precompiled(_WRITE_DROP_AND_LOG if due else _WRITE_AND_LOG)
    async with db.driver() as conn:  # no transaction: the statement commits on its own
        file_id = await conn.fetchval(write.sql, *write.args(params))
    return None if file_id is None else version
