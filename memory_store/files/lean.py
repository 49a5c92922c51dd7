"""Lean reads of live files for Glob, Grep and the prompt's indexes (no row objects).

Each returns plain tuples from one statement over the namespace; ordering and
matching are left to the caller (off the event loop). Grep may narrow its rows in SQL
by a literal every match must contain (``LIKE``, run by the database in C), so only
candidate contents cross the wire.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Select,
    bindparam,
    false,
    func,
    or_,
    select,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.files.rows import IN_NAMESPACE, aware, ns_params
from memory_store.files.tables import files
from memory_store.records import IndexEntry, Namespace

_f = files.c
_LIVE = (IN_NAMESPACE, _f.deleted == false())
_PATHS = select(_f.path, _f.version, _f.size_bytes, _f.updated_at, _f.mode).where(*_LIVE)
_CONTENTS = select(_f.path, _f.content, _f.updated_at).where(*_LIVE)
_INDEX = select(
    _f.path, _f.summary, _f.version, _f.updated_at, _f.listed, _f.mode, _f.size_bytes
).where(*_LIVE)

PathRow = tuple[str, int, int, datetime, int]
"""(path, version, size_bytes, updated_at, mode)"""


def _under(prefix: str) -> ColumnElement[bool] | None:
    if prefix == "/":
        return None
    return or_(_f.path == prefix, func.substr(_f.path, 1, len(prefix) + 1) == prefix + "/")


def _within(query: Select[Any], prefix: str) -> Select[Any]:
    under = _under(prefix)
    return query if under is None else query.where(under)


async def paths(conn: AsyncConnection, ns: Namespace, prefix: str) -> list[PathRow]:
    """Live files under directory ``prefix`` (or that one file), unordered."""
    found = await conn.execute(_within(_PATHS, prefix), ns_params(ns))
    return [(r[0], r[1], r[2], aware(r[3]), r[4]) for r in found.all()]


async def paths_matching(
    conn: AsyncConnection, ns: Namespace, prefix: str, regex: str, limit: int
) -> list[PathRow]:
    """PostgreSQL only: live files under ``prefix`` whose path matches ``regex`` (an ARE
    that PostgreSQL runs as a finite automaton), the ``limit`` most recently modified."""
    query = (
        _within(_PATHS, prefix)
        .where(_f.path.regexp_match(regex))
        .order_by(_f.updated_at.desc(), _f.path)
        .limit(limit)
    )
    found = await conn.execute(query, ns_params(ns))
    return [(r[0], r[1], r[2], aware(r[3]), r[4]) for r in found.all()]


async def contents(
    conn: AsyncConnection,
    ns: Namespace,
    prefix: str,
    *,
    containing: str | None = None,
    ignore_case: bool = False,
) -> list[tuple[str, str, datetime]]:
    """(path, content, updated_at) of live files under ``prefix``, unordered.

    ``containing``: only files whose content holds this text (letter case ignored
    when ``ignore_case``; SQLite's LIKE may also ignore it: a superset is fine).
    """
    query = _within(_CONTENTS, prefix)
    if containing:
        column = _f.content
        query = query.where(
            column.icontains(containing, autoescape=True)
            if ignore_case
            else column.contains(containing, autoescape=True)
        )
    found = await conn.execute(query, ns_params(ns))
    return [(r[0], r[1] or "", aware(r[2])) for r in found.all()]


async def versions_of(
    conn: AsyncConnection, namespaces: Sequence[Namespace]
) -> list[dict[str, int]]:
    """Path → version of every live file of each of ``namespaces``, in their order, in
    one statement."""
    params: dict[str, str] = {}
    for i, ns in enumerate(namespaces):
        params |= {f"org{i}": ns.org_id, f"scope{i}": ns.scope.value, f"channel{i}": ns.channel_id}
    found: dict[tuple[str, str, str], dict[str, int]] = {
        (ns.org_id, ns.scope.value, ns.channel_id): {} for ns in namespaces
    }
    if namespaces:
        for org_id, scope, channel_id, path, version in await conn.execute(
            _versions_in(len(namespaces)), params
        ):
            found[(org_id, scope, channel_id)][path] = version
    return [found[(ns.org_id, ns.scope.value, ns.channel_id)] for ns in namespaces]


@functools.cache
def _versions_in(count: int) -> CompoundSelect[Any]:
    """The statement of ``versions_of`` for ``count`` namespaces (built once per count):
    one ``SELECT`` a namespace under ``UNION ALL``, so each is an index range of its own
    (an ``OR`` of namespaces is planned as a scan of the whole org's files)."""
    live = select(_f.org_id, _f.scope, _f.channel_id, _f.path, _f.version)
    return union_all(
        *(
            live.where(
                _f.org_id == bindparam(f"org{i}"),
                _f.scope == bindparam(f"scope{i}"),
                _f.channel_id == bindparam(f"channel{i}"),
                _f.deleted == false(),
            )
            for i in range(count)
        )
    )


async def index(conn: AsyncConnection, ns: Namespace) -> list[IndexEntry]:
    """Every live file of ``ns`` with its stored summary, by path."""
    found = (await conn.execute(_INDEX, ns_params(ns))).all()
    entries = [
        IndexEntry(
            path=r[0],
            summary=r[1],
            version=r[2],
            updated_at=aware(r[3]),
            listed=bool(r[4]),
            mode=r[5],
            size_bytes=r[6],
        )
        for r in found
    ]
    entries.sort(key=lambda e: e.path)
    return entries
