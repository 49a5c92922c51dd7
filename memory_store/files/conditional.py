"""The one-statement conditional write on PostgreSQL (the fast path of ``write``).

``write(expected_version=n)`` on a live file is the hot path that makes a session's
write visible to the others, so on PostgreSQL it is a single atomic statement run
outside an explicit transaction (no BEGIN/COMMIT round trips)::

    WITH changed AS (UPDATE files SET …, allowance_bytes = allowance_bytes + size_bytes
                     - :size, allowance_stored_bytes = allowance_stored_bytes - :size
                     WHERE <namespace, path> AND version = :n AND NOT deleted
                     AND content <> :content AND allowance_bytes + size_bytes >= :size
                     AND allowance_stored_bytes >= :size
                     [AND <the org's counters within the scope's limits>]
                     RETURNING files.id),
         [gone AS (DELETE FROM file_revisions WHERE file_id = changed.id
                   AND version <= :oldest_dropped RETURNING size_bytes),
          counted AS (UPDATE org_usage SET stored_bytes = stored_bytes - sum(gone…))]
    INSERT INTO file_revisions (…) SELECT changed.id, … FROM changed RETURNING file_id

It touches the file's row and its history only: the org's quotas are kept by the
file's allowance, room of both quotas already counted in the org's counters
(``allowance``). Growth and the new revision's bytes are drawn from it; what a shrink
frees goes back to it. (Checking both quotas against the org's counter row and adding
to it took two subqueries and an UPDATE of another table, about 14% of the statement
against an UPDATE of one row.) A file of ``/memory`` or ``/skills``, whose scope may
fill the org's quotas only up to its own limits (``Limits.incident_reserve_share``), also
needs the org's counters within those: they count its allowance, so that bounds the
write too, and an allowance given before the org filled up is not spent past them.

``gone`` is the retention rule (``retention``), due at every tenth version past what
the file keeps: that write sends the statement with it, the other nine without (a
statement whose ``gone`` were gated by a parameter would cost every write: PostgreSQL
starts each plan node on every execution, gated or not). The bytes it frees leave the
org's counter (``counted``) as its ``DELETE`` returns them: exact even when another
statement drops some of them at the same time (a process of the previous release
drops revisions in a statement of its own, without the file's row).

It writes nothing when any condition fails (the file is missing, deleted, at another
version or already holds the content, or its allowance is short); the caller then takes
the general, locked path, which says why, or counts the change in the org's row and
tops the allowance up. SQLite cannot put an UPDATE in a CTE, and its writers are
serialised anyway, so there it always takes the general path.

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
from memory_store.records import Limits, Namespace, Origin, Scope

_f = files.c
_r = file_revisions.c
_u = org_usage.c
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


def _write_and_log(*, dropping: bool, below_org: bool) -> Insert:
    """The one statement. ``dropping``: with the retention rule's ``gone``, whose bytes
    leave the org's stored-bytes counter; ``below_org``: a scope that may fill the
    org's quotas only up to its own limits (``Limits.incident_reserve_share``), so the
    write also needs the org's counters within them."""
    size = bindparam("b_size", type_=Integer)
    conditions = [
        rows.IN_NAMESPACE,
        _f.path == bindparam("b_path"),
        _f.version == bindparam("b_version"),
        _f.deleted == false(),
        _f.content != bindparam("n_content"),
        _f.allowance_bytes + _f.size_bytes >= size,
        _f.allowance_stored_bytes >= size,
    ]
    if below_org:  # the counters count this file's allowance: within them, so is the write
        conditions += [
            bindparam("b_max_bytes") >= usage.ORG_BYTES,
            bindparam("b_max_stored") >= usage.ORG_STORED,
        ]
    changed = (
        update(files)
        .where(*conditions)
        .values(
            version=bindparam("n_version"),
            content=bindparam("n_content"),
            size_bytes=size,
            updated_at=bindparam("n_at"),
            actor=bindparam("n_actor"),
            session_id=bindparam("n_session"),
            summary=bindparam("n_summary"),
            listed=bindparam("n_listed"),
            allowance_bytes=_f.allowance_bytes + _f.size_bytes - size,
            allowance_stored_bytes=_f.allowance_stored_bytes - size,
        )
        .returning(_f.id)
        .cte("changed")
    )
    statement = insert(file_revisions).from_select(
        _REVISION_COLUMNS,
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
            size,
        ),
    )
    if dropping:
        gone = (
            delete(file_revisions)
            .where(
                _r.file_id == select(changed.c.id).scalar_subquery(),
                _r.version <= bindparam("r_oldest_dropped"),
            )
            .returning(_r.size_bytes)
            .cte("gone")
        )
        freed = select(func.coalesce(func.sum(gone.c.size_bytes), 0)).scalar_subquery()
        counted = (
            update(org_usage)
            .where(_u.org_id == bindparam("ns_org"), exists(select(changed.c.id)))
            .values(stored_bytes=_u.stored_bytes - freed)
            .cte("counted")
        )
        statement = statement.add_cte(gone).add_cte(counted)
    return statement.returning(file_revisions.c.file_id)


_STATEMENTS = {
    (dropping, below_org): _write_and_log(dropping=dropping, below_org=below_org)
    for dropping in (False, True)
    for below_org in (False, True)
}


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
    deleted, at another version, or already holds ``content``; or its allowance of either
    byte quota is short, ``allowance``): the caller's general path then says why, or
    writes it and tops the allowance up. The parameters are built
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
    params: dict[str, Any] = {  # rows.ns_params, inlined (hot)
        "ns_org": ns.org_id,
        "ns_scope": scope.value,
        "ns_channel": ns.channel_id,
        "b_size": size,
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
    below_org = scope is not Scope.INCIDENT
    if below_org:
        params["b_org"] = ns.org_id
        params["b_max_bytes"] = limits.max_bytes(scope)
        params["b_max_stored"] = limits.max_stored_bytes(scope)
    write = db.precompiled(_STATEMENTS[due, below_org])
    async with db.driver() as conn:  # no transaction: the statement commits on its own
        file_id = await conn.fetchval(write.sql, *write.args(params))
    return None if file_id is None else version
