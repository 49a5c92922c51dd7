"""A session's transcript, stored append-only: one opaque JSON message per row, written once.

A step appends the messages it added (``TranscriptDelta``) in the transaction of its
fenced ``save``/``commit``, so its cost follows the step, not the session. Compaction
rewrites the transcript: its delta names the next *generation*, whose rows start at
position 0, and the older generations' rows are deleted in the same transaction. The
session row's ``transcript_generation``/``transcript_length`` say which rows are
current; the ``(session_id, generation, position)`` primary key refuses a second
writer of a row.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.sessions.records import TranscriptDelta, TranscriptMark
from memory_store.sessions.tables import session_transcript, sessions

_S = sessions.c
_T = session_transcript.c


def holds(base: TranscriptMark) -> ColumnElement[bool]:
    """WHERE criteria: the stored transcript is still where the writer's ``base`` says."""
    return (_S.transcript_generation == base.generation) & (_S.transcript_length == base.length)


def counters(delta: TranscriptDelta) -> dict[str, Any]:
    """The session row's transcript counters once ``delta`` is stored."""
    return {
        "transcript_generation": delta.generation,
        "transcript_length": delta.start + len(delta.messages),
    }


async def write(
    conn: AsyncConnection, session_id: str, delta: TranscriptDelta, *, epoch: int, now: datetime
) -> None:
    """Insert the delta's rows (one executemany); a new generation drops the older ones."""
    if delta.generation != delta.base.generation:
        await conn.execute(
            delete(session_transcript).where(
                _T.session_id == session_id, _T.generation < delta.generation
            )
        )
    rows = [
        {
            "session_id": session_id,
            "generation": delta.generation,
            "position": delta.start + i,
            "message": message,
            "epoch": epoch,
            "created_at": now,
        }
        for i, message in enumerate(delta.messages)
    ]
    if rows:
        await conn.execute(session_transcript.insert(), rows)


async def read(
    conn: AsyncConnection, session_id: str, *, generation: int, from_position: int = 0
) -> tuple[str, ...]:
    """The messages of ``generation`` at ``from_position`` and after, in order.

    On PostgreSQL the rows come back as one ``text[]`` (``array_agg``), decoded by the
    driver: one result row instead of one per message, so a claim reading a long
    history does not pay the result machinery per message."""
    where = (
        _T.session_id == session_id,
        _T.generation == generation,
        _T.position >= from_position,
    )
    if conn.dialect.name == "postgresql":
        aggregated = select(func.array_agg(aggregate_order_by(_T.message, _T.position)))
        messages = (await conn.execute(aggregated.where(*where))).scalar_one()
        return tuple(messages or ())
    query = select(_T.message).where(*where).order_by(_T.position)
    return tuple((await conn.execute(query)).scalars())


def first_missing(
    cached: TranscriptMark | None, *, epoch: int, generation: int, length: int
) -> int | None:
    """The first position a claimer holding ``cached`` must read, or None (it has all).

    Rows are immutable once written, so a cache of the same generation is a valid
    prefix; when the claim's ``epoch`` directly follows the cache's, nobody wrote in
    between and nothing need be read.

    >>> first_missing(TranscriptMark(4, 1, 30), epoch=5, generation=1, length=30) is None
    True
    >>> first_missing(TranscriptMark(4, 1, 30), epoch=9, generation=1, length=32)
    30
    >>> first_missing(TranscriptMark(4, 1, 30), epoch=5, generation=2, length=2)
    0
    """
    if cached is None or cached.generation != generation or cached.length > length:
        return 0
    if cached.epoch + 1 == epoch and cached.length == length:
        return None
    return cached.length
