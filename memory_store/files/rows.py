"""SQL over the ``files`` table (current state per path) and row → value mapping.

Every statement filters by the whole namespace (org, scope, channel): tenant isolation
is enforced here, in one place. Hot-path statements are built once, with bind
parameters, so a call pays only for execution (building a statement costs more than a
local round trip). Ordering by path is done in Python, so both backends (and any
PostgreSQL collation) agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, and_, bindparam, false, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.db import Database
from memory_store.files import usage
from memory_store.files.summary import describe
from memory_store.files.tables import file_revisions, files
from memory_store.records import FileKey, FileVersion, Limits, Namespace, Origin, Scope

_f = files.c
_r = file_revisions.c


@dataclass(frozen=True)
class FileRow:
    """The current state of one path (``content`` is None when ``deleted`` or not loaded).

    ``prior_version`` is set by ``lock_file`` when the asked ``tool_use_id`` already
    made a revision of this file (that revision's version); so are the file's allowances
    of the org's quotas (``allowance``; 0 elsewhere).
    """

    id: int
    path: str
    version: int
    deleted: bool
    content: str | None
    size_bytes: int
    updated_at: datetime
    actor: str
    session_id: str | None
    prior_version: int | None = None
    summary: str = ""
    listed: bool = True
    mode: int = 0o644
    allowance_bytes: int = 0
    allowance_stored_bytes: int = 0


@dataclass(frozen=True)
class NewVersion:
    """One change to append: the new state of a file and who made it."""

    version: int
    base_version: int
    operation: str
    content: str | None
    replacements: int | None
    origin: Origin
    at: datetime

    @property
    def size_bytes(self) -> int:
        """The content's size in UTF-8 bytes (0 for a deletion)."""
        return 0 if self.content is None else len(self.content.encode())


def aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time we store is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def ns_params(ns: Namespace) -> dict[str, str]:
    """Bind parameters of ``IN_NAMESPACE``."""
    return {"ns_org": ns.org_id, "ns_scope": ns.scope.value, "ns_channel": ns.channel_id}


IN_NAMESPACE = and_(
    _f.org_id == bindparam("ns_org"),
    _f.scope == bindparam("ns_scope"),
    _f.channel_id == bindparam("ns_channel"),
)
_META = (
    _f.id,
    _f.path,
    _f.version,
    _f.deleted,
    _f.size_bytes,
    _f.updated_at,
    _f.actor,
    _f.session_id,
    _f.summary,
    _f.listed,
    _f.mode,
)
_PRIOR = (
    select(_r.version)
    .where(_r.file_id == _f.id, _r.tool_use_id == bindparam("tool_use_id"))
    .scalar_subquery()
    .label("prior_version")
)
_READ = select(*_META, _f.content).where(IN_NAMESPACE, _f.path == bindparam("path"))
_READ_CURRENT = select(_f.version, _f.content, _f.updated_at, _f.actor, _f.session_id).where(
    IN_NAMESPACE, _f.path == bindparam("path")
)
_LOCK = (
    select(*_META, _f.content, _PRIOR, _f.allowance_bytes, _f.allowance_stored_bytes)
    .where(IN_NAMESPACE, _f.path == bindparam("path"))
    .with_for_update(of=files)
)
_LIVE = select(*_META).where(IN_NAMESPACE, _f.deleted == false())
_LIVE_WITH_CONTENT = select(*_META, _f.content).where(IN_NAMESPACE, _f.deleted == false())
_LIVE_FOLDED = select(_f.path).where(
    IN_NAMESPACE,
    _f.deleted == false(),
    func.substr(_f.path_fold, 1, bindparam("fold_len")) == bindparam("fold_prefix"),
)
_INSERT = insert(files).returning(_f.id)
# Growth must fit the org's byte quota; shrinking always passes.
WITHIN_QUOTA = or_(
    _f.size_bytes >= bindparam("b_size"),
    usage.ORG_BYTES - _f.size_bytes + bindparam("b_size") <= bindparam("b_max_bytes"),
)
_UPDATE_FROM = update(files).where(
    _f.id == bindparam("b_id"), _f.version == bindparam("b_version"), WITHIN_QUOTA
)


def _file_row(row: Row[*tuple[Any, ...]]) -> FileRow:
    return file_row_of(row._mapping)


def file_row_of(values: Any) -> FileRow:
    """The ``FileRow`` of a row's values by column name: SQLAlchemy's ``Row._mapping`` or
    the driver's record (both have ``[name]`` and ``get(name, default)``)."""
    return FileRow(
        id=values["id"],
        path=values["path"],
        version=values["version"],
        deleted=values["deleted"],
        content=values.get("content"),
        size_bytes=values["size_bytes"],
        updated_at=aware(values["updated_at"]),
        actor=values["actor"],
        session_id=values["session_id"],
        prior_version=values.get("prior_version"),
        summary=values.get("summary", ""),
        listed=values.get("listed", True),
        mode=values.get("mode", 0o644),
        allowance_bytes=values.get("allowance_bytes", 0),
        allowance_stored_bytes=values.get("allowance_stored_bytes", 0),
    )


async def fetch_file(conn: AsyncConnection, ns: Namespace, path: str) -> FileRow | None:
    """The row of ``path`` (live or tombstone), or None."""
    row = (await conn.execute(_READ, {**ns_params(ns), "path": path})).first()
    return None if row is None else _file_row(row)


async def read_current_on_driver(db: Database, ns: Namespace, path: str) -> FileVersion | None:
    """PostgreSQL only: the current version of ``path``, or None when it is missing or
    deleted; one precompiled statement on the driver's connection (``Database.driver``),
    of only the columns a read returns: the read through which another session sees a
    write (``bench/memory_store.py``).

    Raises:
        DatabaseUnavailable: the database could not be reached or timed out.
    """
    statement = db.precompiled(_READ_CURRENT)
    params = {  # ns_params, inlined: the hot read
        "ns_org": ns.org_id,
        "ns_scope": ns.scope.value,
        "ns_channel": ns.channel_id,
        "path": path,
    }
    async with db.driver() as conn:
        row = await conn.fetchrow(statement.sql, *statement.args(params))
    if row is None or row["content"] is None:
        return None
    return FileVersion(
        path=path,
        version=row["version"],
        content=row["content"],
        updated_at=aware(row["updated_at"]),
        actor=row["actor"],
        session_id=row["session_id"],
    )


async def lock_file(
    conn: AsyncConnection, ns: Namespace, path: str, tool_use_id: str | None
) -> FileRow | None:
    """Like ``fetch_file``, locking the row (PostgreSQL ``FOR UPDATE``), and telling
    whether ``tool_use_id`` already made a revision of it (``prior_version``)."""
    params = {**ns_params(ns), "path": path, "tool_use_id": tool_use_id}
    row = (await conn.execute(_LOCK, params)).first()
    return None if row is None else _file_row(row)


async def fetch_live(
    conn: AsyncConnection, ns: Namespace, prefix: str, *, with_content: bool
) -> list[FileRow]:
    """Live files under directory ``prefix`` (or that one file), by path.

    ``content`` is None unless ``with_content``.
    """
    query = _LIVE_WITH_CONTENT if with_content else _LIVE
    if prefix != "/":
        query = query.where(
            or_(_f.path == prefix, func.substr(_f.path, 1, len(prefix) + 1) == prefix + "/")
        )
    rows = (await conn.execute(query, ns_params(ns))).all()
    return sorted((_file_row(row) for row in rows), key=lambda row: row.path)


async def live_paths_folded(conn: AsyncConnection, ns: Namespace, fold_prefix: str) -> list[str]:
    """Live paths whose case-folded form starts with ``fold_prefix`` (for case checks)."""
    params = {**ns_params(ns), "fold_len": len(fold_prefix), "fold_prefix": fold_prefix}
    return list((await conn.execute(_LIVE_FOLDED, params)).scalars())


async def insert_file(
    conn: AsyncConnection, ns: Namespace, path: str, path_fold: str, change: NewVersion
) -> int:
    """Create the row of a new path; returns its id."""
    values = _state(change, ns.scope, path) | {
        "org_id": ns.org_id,
        "scope": ns.scope.value,
        "channel_id": ns.channel_id,
        "path": path,
        "path_fold": path_fold,
    }
    return int((await conn.execute(_INSERT, values)).scalar_one())


async def update_from(
    conn: AsyncConnection, row: FileRow, change: NewVersion, limits: Limits, ns: Namespace
) -> bool:
    """Move a row to its new state if it is still at ``row.version`` and any growth fits
    the org's byte quota; False if not."""
    params = _state(change, ns.scope, row.path) | quota_params(change.size_bytes, limits, ns)
    params |= {"b_id": row.id, "b_version": row.version}
    return (await conn.execute(_UPDATE_FROM, params)).rowcount == 1


def quota_params(size_bytes: int, limits: Limits, ns: Namespace) -> dict[str, Any]:
    """Bind parameters of ``WITHIN_QUOTA`` for a new state of ``size_bytes`` in ``ns``."""
    return {"b_org": ns.org_id, "b_size": size_bytes, "b_max_bytes": limits.max_bytes(ns.scope)}


def _state(change: NewVersion, scope: Scope, path: str) -> dict[str, Any]:
    content = change.content
    found = describe(scope.value, path, content or "")
    gives_back = {"allowance_bytes": 0, "allowance_stored_bytes": 0} if content is None else {}
    return gives_back | {
        "summary": found.summary,
        "listed": found.listed,
        "version": change.version,
        "deleted": content is None,
        "content": content,
        "size_bytes": 0 if content is None else len(content.encode()),
        "updated_at": change.at,
        "actor": change.origin.actor,
        "session_id": change.origin.session_id,
    }


async def current_of(
    conn: AsyncConnection, keys: Sequence[tuple[FileKey, str]]
) -> dict[tuple[Namespace, str], FileRow]:
    """Current rows (without content) for (key, normalised path) pairs, in one statement."""
    wanted = [
        and_(
            _f.org_id == key.ns.org_id,
            _f.scope == key.ns.scope.value,
            _f.channel_id == key.ns.channel_id,
            _f.path == path,
        )
        for key, path in keys
    ]
    query = select(*_META, _f.org_id, _f.scope, _f.channel_id).where(or_(*wanted))
    found: dict[tuple[Namespace, str], FileRow] = {}
    for row in (await conn.execute(query)).all():
        ns = Namespace(row.org_id, Scope(row.scope), row.channel_id)
        found[(ns, row.path)] = _file_row(row)
    return found


_SET_MODE = (
    update(files)
    .where(IN_NAMESPACE, _f.path == bindparam("b_path"), _f.deleted == false())
    .values(mode=bindparam("b_mode"))
)


async def set_mode(conn: AsyncConnection, ns: Namespace, path: str, mode: int) -> bool:
    """Set the permission bits of a live file; False when there is none at ``path``."""
    params = {**ns_params(ns), "b_path": path, "b_mode": mode}
    return (await conn.execute(_SET_MODE, params)).rowcount == 1
