"""The one-statement conditional write on PostgreSQL (the fast path of ``write``).

``write(expected_version=n)`` on a live file is the hot path that makes a session's
write visible to the others, so on PostgreSQL it is a single atomic statement run
outside an explicit transaction (no BEGIN/COMMIT round trips)::

    WITH changed AS (UPDATE files SET … FROM files AS old WHERE old.id = files.id
                     AND <namespace, path> AND version = :n AND NOT deleted
                     AND content <> :content AND <byte quota holds>
                     RETURNING files.id, old.size_bytes AS old_size),
         counted AS (UPDATE org_usage SET bytes = bytes + :size - changed.old_size …)
    INSERT INTO file_revisions (…) SELECT changed.id, … FROM changed

(The self-join gives the size before the update, for the org's byte counter.)

It writes nothing when any condition fails; the caller then takes the general,
locked path, which says why. SQLite cannot put an UPDATE in a CTE, and its writers
are serialised anyway, so there it always takes the general path.
"""

from __future__ import annotations

from sqlalchemy import (
    DateTime,
    Integer,
    String,
    Text,
    bindparam,
    exists,
    false,
    insert,
    select,
    update,
)

from memory_store.db import Database
from memory_store.files import rows
from memory_store.files.commit import Outcome, Target, new_version, outcome
from memory_store.files.summary import describe
from memory_store.files.tables import file_revisions, files, org_usage
from memory_store.records import Limits

_f = files.c
_old = files.alias("old")
_u = org_usage.c

_CHANGED = (
    update(files)
    .where(
        _old.c.id == _f.id,
        rows.IN_NAMESPACE,
        _f.path == bindparam("b_path"),
        _f.version == bindparam("b_version"),
        _f.deleted == false(),
        _f.content != bindparam("n_content"),
        rows.WITHIN_QUOTA,
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
    .returning(_f.id, _old.c.size_bytes.label("old_size"))
    .cte("changed")
)
_COUNTED = (
    update(org_usage)
    .where(_u.org_id == bindparam("b_org"), exists(select(_CHANGED.c.id)))
    .values(bytes=_u.bytes + bindparam("b_size") - select(_CHANGED.c.old_size).scalar_subquery())
    .cte("counted")
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
]
_WRITE_AND_LOG = (
    insert(file_revisions)
    .from_select(
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
        ),
    )
    .add_cte(_COUNTED)
)


async def conditional_write(
    db: Database, limits: Limits, target: Target, content: str, expected_version: int
) -> Outcome | None:
    """Replace a live file at ``expected_version`` with ``content`` in one statement.

    Returns the outcome, or None when nothing was written (not PostgreSQL; the file is
    missing, deleted, at another version, or already holds ``content``; or the org's
    byte quota would overflow).

    Raises:
        WriteConflict: this ``tool_use_id`` already changed the file (retry path answers).
        DatabaseUnavailable: the database could not be reached or timed out.
    """
    if not db.is_postgres:
        return None
    change = new_version(expected_version + 1, expected_version, "write", content, target.origin)
    params = rows.ns_params(target.ns) | rows.quota_params(change, limits, target.ns)
    found = describe(target.ns.scope.value, target.path, content)
    params |= {
        "n_summary": found.summary,
        "n_listed": found.listed,
        "b_path": target.path,
        "b_version": expected_version,
        "n_version": change.version,
        "n_content": content,
        "n_at": change.at,
        "n_actor": change.origin.actor,
        "n_session": change.origin.session_id,
        "r_operation": change.operation,
        "r_tool_use_id": change.origin.tool_use_id,
    }
    async with db.autocommit() as conn:
        written = (await conn.execute(_WRITE_AND_LOG, params)).rowcount
    return outcome(target.path, change, created=False) if written == 1 else None
