"""SQL over ``file_revisions``: the history of every file (bounded by ``retention``).

Revisions are reached only through a file row found in its namespace (``rows``), so
one org can never read another's history.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Row, bindparam, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.files.rows import IN_NAMESPACE, NewVersion, aware, ns_params
from memory_store.files.tables import file_revisions, files
from memory_store.records import Namespace, Revision

_f = files.c
_r = file_revisions.c

_SELECT = select(
    _f.path,
    _r.version,
    _r.base_version,
    _r.operation,
    _r.content,
    _r.replacements,
    _r.actor,
    _r.session_id,
    _r.tool_use_id,
    _r.created_at,
).join_from(file_revisions, files, _r.file_id == _f.id)
_OF_PATH = _SELECT.where(IN_NAMESPACE, _f.path == bindparam("path"))
_CONTENTS_AT = (
    select(_r.version, _r.content)
    .join_from(file_revisions, files, _r.file_id == _f.id)
    .where(
        IN_NAMESPACE,
        _f.path == bindparam("path"),
        _r.version.in_(bindparam("vs", expanding=True)),
    )
)
_AT_VERSION = _SELECT.where(
    IN_NAMESPACE, _f.path == bindparam("path"), _r.version == bindparam("v")
)
_BY_FILE = _SELECT.where(_r.file_id == bindparam("file_id"), _r.version == bindparam("v"))
_BY_TOOL_USE = _SELECT.where(
    _r.file_id == bindparam("file_id"), _r.tool_use_id == bindparam("tool_use_id")
)
_INSERT = insert(file_revisions)


def _revision(row: Row[*tuple[Any, ...]]) -> Revision:
    return Revision(
        path=row.path,
        version=row.version,
        base_version=row.base_version,
        operation=row.operation,
        content=row.content,
        actor=row.actor,
        session_id=row.session_id,
        tool_use_id=row.tool_use_id,
        created_at=aware(row.created_at),
        replacements=row.replacements,
    )


async def history(
    conn: AsyncConnection,
    ns: Namespace,
    path: str,
    *,
    before_version: int | None = None,
    limit: int | None = None,
) -> list[Revision]:
    """Revisions of ``path`` older than ``before_version`` (None: all), the newest
    ``limit`` of them (None: all), oldest first; read through ``(file_id, version)``."""
    query = _OF_PATH
    if before_version is not None:
        query = query.where(_r.version < before_version)
    if limit is None:
        query = query.order_by(_r.version)
    else:
        query = query.order_by(_r.version.desc()).limit(limit)
    result = await conn.execute(query, {**ns_params(ns), "path": path})
    found = [_revision(row) for row in result.all()]
    return found if limit is None else found[::-1]


async def contents_at(
    conn: AsyncConnection, ns: Namespace, path: str, versions: Collection[int]
) -> dict[int, str | None]:
    """The content of each existing one of ``versions`` (None for a deletion)."""
    if not versions:
        return {}
    params = {**ns_params(ns), "path": path, "vs": sorted(set(versions))}
    return {row.version: row.content for row in (await conn.execute(_CONTENTS_AT, params)).all()}


async def at_version(
    conn: AsyncConnection, ns: Namespace, path: str, version: int
) -> Revision | None:
    """One revision of ``path``, or None."""
    result = await conn.execute(_AT_VERSION, {**ns_params(ns), "path": path, "v": version})
    row = result.first()
    return None if row is None else _revision(row)


async def of_file(conn: AsyncConnection, file_id: int, version: int) -> Revision:
    """The revision ``version`` of a file row already found in its namespace."""
    row = (await conn.execute(_BY_FILE, {"file_id": file_id, "v": version})).one()
    return _revision(row)


async def by_tool_use(conn: AsyncConnection, file_id: int, tool_use_id: str) -> Revision | None:
    """The revision a tool call made on a file row already found in its namespace, or None."""
    params = {"file_id": file_id, "tool_use_id": tool_use_id}
    row = (await conn.execute(_BY_TOOL_USE, params)).first()
    return None if row is None else _revision(row)


async def append(conn: AsyncConnection, file_id: int, change: NewVersion) -> None:
    """Append the immutable revision row of a change."""
    await conn.execute(
        _INSERT,
        {
            "file_id": file_id,
            "version": change.version,
            "base_version": change.base_version,
            "operation": change.operation,
            "content": change.content,
            "replacements": change.replacements,
            "actor": change.origin.actor,
            "session_id": change.origin.session_id,
            "tool_use_id": change.origin.tool_use_id,
            "created_at": change.at,
            "size_bytes": change.size_bytes,
        },
    )
