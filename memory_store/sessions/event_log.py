"""A session's append-only event log: append rows at given seqs, read them back in order.

Callers reserve seqs by bumping ``sessions.last_seq`` in the same transaction (a locked
row), so appends never race; the ``(session_id, seq)`` primary key refuses any that do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.sessions.records import Event, NewEvent
from memory_store.sessions.tables import session_events


async def append(
    conn: AsyncConnection,
    session_id: str,
    *,
    last_seq: int,
    epoch: int,
    events: Sequence[NewEvent],
    now: datetime,
) -> None:
    """Insert ``events`` at seqs ``last_seq - len(events) + 1 … last_seq`` (one executemany).

    ``last_seq`` is the session's counter *after* the caller reserved the seqs.
    """
    first = last_seq - len(events) + 1
    await _insert(conn, [_row(session_id, first + i, epoch, e, now) for i, e in enumerate(events)])


async def append_to_each(
    conn: AsyncConnection, reserved: Sequence[Reserved], event: NewEvent, *, now: datetime
) -> None:
    """Insert the same ``event`` into several sessions, each at its reserved seq."""
    await _insert(conn, [_row(r.session_id, r.seq, r.epoch, event, now) for r in reserved])


@dataclass(frozen=True)
class Reserved:
    """One reserved log slot: ``seq`` in ``session_id``, written under ``epoch``."""

    session_id: str
    seq: int
    epoch: int


def _row(session_id: str, seq: int, epoch: int, event: NewEvent, now: datetime) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "seq": seq,
        "kind": event.kind,
        "payload": event.payload_json,
        "epoch": epoch,
        "created_at": now,
    }


async def _insert(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(session_events.insert(), rows)


async def read(
    conn: AsyncConnection, session_id: str, *, after_seq: int, limit: int | None
) -> list[Event]:
    """Events with ``seq > after_seq``, oldest first, at most ``limit`` (None: all)."""
    query = (
        select(session_events)
        .where(session_events.c.session_id == session_id, session_events.c.seq > after_seq)
        .order_by(session_events.c.seq)
        .limit(limit)
    )
    return [_event(row) for row in await conn.execute(query)]


def _event(row: Row[Any]) -> Event:
    m = row._mapping
    return Event(
        session_id=m["session_id"],
        seq=m["seq"],
        kind=m["kind"],
        payload_json=m["payload"],
        epoch=m["epoch"],
        created_at=m["created_at"],
    )
