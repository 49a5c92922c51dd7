"""A step's claim and fenced writes as single PostgreSQL statements (docs/architecture.md §5).

``claims`` builds these writes with SQLAlchemy Core on every call, and on SQLite runs
them as several statements in one transaction. On PostgreSQL, the hot path of every
step, each is instead one fixed statement, written once below and bound per call:

- the fenced ``UPDATE sessions … RETURNING``, then, as data-modifying CTEs that all
  read its row, the deletion of older transcript generations (compaction), the
  transcript rows the step added and the step's events at the seqs the update
  reserved. A fenced-off claim (no row) writes nothing; a refused row (the event log's
  or the transcript's key) fails the whole statement;
- empty arrays and NULLs stand for "no delta", "no events", "keep the checkpoint", so
  one statement serves every call of its kind and is compiled once.

``CLAIM``, ``SAVE`` and ``COMMIT`` run on an autocommit connection: one round trip each,
atomic (PostgreSQL runs a statement as its own transaction), no ``BEGIN``/``COMMIT``.
A claim whose reads then fail (transcript rows, inbox items) is undone by ``GIVE_BACK``.
``COMMIT_THEN_CLAIM`` runs in a transaction with the inbox read that follows it. None is
built on the client. Measured by ``bench/session_step.py`` and ``bench/durable.py``.
The semantics are those of the Core form in ``claims`` (the conformance tests run both).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    Integer,
    Row,
    String,
    Text,
    TextClause,
    bindparam,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.types import TypeEngine

from memory_store.sessions.lease_time import LeaseTime
from memory_store.sessions.records import NewEvent, TokenUsage, TranscriptDelta
from memory_store.sessions.tables import UtcDateTime

CLAIM_COLUMNS = (
    "epoch, lease_until, org_id, channel_id, thread_ts, requester_id, checkpoint, "
    "crash_count, last_seq, inbox_seq, inbox_consumed, sandbox, transcript_generation, "
    "transcript_length"
)
"""What a claim reads of the session row (``claims._claim_of``)."""

_LEASE_NOW = "COALESCE(:lease_now, now())"
"""The lease clock: the database's ``now()``, unless the store was given a clock."""

_FENCE = """id = :id AND epoch = :epoch AND pending_token = :token
      AND (:base_generation IS NULL
           OR (transcript_generation = :base_generation
               AND transcript_length = :base_length))"""

_COUNTERS = """last_seq = last_seq + :n_events,
      transcript_generation = COALESCE(:generation, transcript_generation),
      transcript_length = COALESCE(:length, transcript_length),
      updated_at = :now"""

_USAGE = """input_tokens = input_tokens + :input_tokens,
      output_tokens = output_tokens + :output_tokens,
      cache_read_tokens = cache_read_tokens + :cache_read_tokens,
      cache_write_tokens = cache_write_tokens + :cache_write_tokens"""

_CONSUMED = "GREATEST(inbox_consumed, COALESCE(:consumed_upto, inbox_consumed))"
_RUNNABLE = f"(:continues OR inbox_seq > {_CONSUMED})"

_ENDING = f"""checkpoint = :checkpoint,
      {_COUNTERS},
      {_USAGE},
      inbox_consumed = {_CONSUMED}"""
"""What every end of a step sets: its checkpoint, counters, usage and consumed inbox."""

_WRITES = """,
dropped AS (
  DELETE FROM session_transcript
  WHERE session_id = :id AND generation < :generation AND :generation <> :base_generation
    AND EXISTS (SELECT FROM stepped)),
stored AS (
  INSERT INTO session_transcript (session_id, generation, position, message, epoch, created_at)
  SELECT :id, :generation, :start + added.ord - 1, added.message, :epoch, :now
  FROM stepped, unnest(:messages) WITH ORDINALITY AS added(message, ord)),
logged AS (
  INSERT INTO session_events (session_id, seq, kind, payload, epoch, created_at)
  SELECT :id, stepped.last_seq - :n_events + e.ord, e.kind, e.payload, :epoch, :now
  FROM stepped, unnest(:kinds, :payloads) WITH ORDINALITY AS e(kind, payload, ord))
SELECT * FROM stepped"""

_TYPES: dict[str, TypeEngine[Any] | type[TypeEngine[Any]]] = {
    "id": String,
    "epoch": BigInteger,
    "token": String,
    "base_generation": Integer,
    "base_length": Integer,
    "generation": Integer,
    "length": Integer,
    "start": Integer,
    "n_events": Integer,
    "now": UtcDateTime,
    "lease_now": UtcDateTime,
    "lease_s": Float,
    "checkpoint": Text,
    "messages": ARRAY(Text),
    "kinds": ARRAY(Text),
    "payloads": ARRAY(Text),
    "consumed_upto": Integer,
    "continues": Boolean,
    "end_status": String,
    "new_token": String,
    "until": UtcDateTime,
    "wake_at": UtcDateTime,
    "wake_note": Text,
    "worker_id": String,
    "origin": String,
    "input_tokens": BigInteger,
    "output_tokens": BigInteger,
    "cache_read_tokens": BigInteger,
    "cache_write_tokens": BigInteger,
}


def _statement(sql: str) -> TextClause:
    """``sql`` with its parameters typed (so the driver binds them as PostgreSQL expects)."""
    names = [name for name in _TYPES if f":{name}" in sql]
    return text(sql).bindparams(*(bindparam(name, type_=_TYPES[name]) for name in names))


CLAIM = _statement(
    f"""UPDATE sessions SET
      epoch = epoch + 1,
      lease_owner = :worker_id,
      lease_until = {_LEASE_NOW} + make_interval(secs => :lease_s),
      crash_count = CASE WHEN claimed_token = :token THEN crash_count + 1 ELSE crash_count END,
      claimed_token = :token,
      updated_at = :now
    WHERE id = :id AND pending_token = :token AND status = 'running'
      AND (:origin IS NULL OR origin = :origin)
      AND (lease_until IS NULL OR lease_until < {_LEASE_NOW})
    RETURNING {CLAIM_COLUMNS}"""
)
"""Take a pending step (``claims.claim``)."""

GIVE_BACK = _statement(
    """UPDATE sessions SET lease_owner = NULL, lease_until = NULL, claimed_token = NULL
    WHERE id = :id AND epoch = :epoch AND lease_owner = :worker_id"""
)
"""Undo a claim whose reads failed after it was committed (``claims.give_back``)."""

SAVE = _statement(
    f"""WITH stepped AS (
    UPDATE sessions SET
      checkpoint = COALESCE(:checkpoint, checkpoint),
      {_COUNTERS}
    WHERE {_FENCE}
    RETURNING last_seq){_WRITES}"""
)
"""Commit mid-step, keeping the claim (``claims.save``)."""

COMMIT = _statement(
    f"""WITH stepped AS (
    UPDATE sessions SET
      {_ENDING},
      lease_owner = NULL, lease_until = NULL, claimed_token = NULL, crash_count = 0,
      status = CASE WHEN {_RUNNABLE} THEN 'running' ELSE :end_status END,
      pending_token = CASE WHEN {_RUNNABLE} THEN :new_token END,
      enqueued_at = CASE WHEN {_RUNNABLE} THEN {_LEASE_NOW} END,
      wait_until = CASE WHEN {_RUNNABLE} THEN NULL ELSE :until END,
      wake_at = :wake_at,
      wake_note = :wake_note
    WHERE {_FENCE}
    RETURNING last_seq, pending_token){_WRITES}"""
)
"""End the step and release the claim (``claims.commit``)."""

COMMIT_THEN_CLAIM = _statement(
    f"""WITH stepped AS (
    UPDATE sessions SET
      {_ENDING},
      epoch = epoch + 1,
      lease_owner = :worker_id,
      lease_until = {_LEASE_NOW} + make_interval(secs => :lease_s),
      claimed_token = :new_token, pending_token = :new_token,
      enqueued_at = {_LEASE_NOW},
      crash_count = 0, status = 'running',
      wait_until = NULL, wake_at = NULL, wake_note = NULL
    WHERE {_FENCE}
    RETURNING {CLAIM_COLUMNS}){_WRITES}"""
)
"""End the step and claim the next one for the same worker (``claims.commit_then_claim``)."""


def lease_params(lease_time: LeaseTime) -> dict[str, Any]:
    """``lease_now``: None for the database's clock, else the store's instant."""
    return {"lease_now": None if lease_time.from_database else lease_time.instant}


def write_params(
    *,
    session_id: str,
    epoch: int,
    token: str,
    events: Sequence[NewEvent],
    now: datetime,
    delta: TranscriptDelta | None,
    checkpoint: str | None,
) -> dict[str, Any]:
    """The parameters every fenced write binds (``SAVE``, ``COMMIT``, ``COMMIT_THEN_CLAIM``)."""
    params: dict[str, Any] = {
        "id": session_id,
        "epoch": epoch,
        "token": token,
        "n_events": len(events),
        "kinds": [e.kind for e in events],
        "payloads": [e.payload_json for e in events],
        "now": now,
        "checkpoint": checkpoint,
        "base_generation": None,
        "base_length": None,
        "generation": None,
        "length": None,
        "start": 0,
        "messages": [],
    }
    if delta is not None:
        params |= {
            "base_generation": delta.base.generation,
            "base_length": delta.base.length,
            "generation": delta.generation,
            "length": delta.start + len(delta.messages),
            "start": delta.start,
            "messages": list(delta.messages),
        }
    return params


def usage_params(usage: TokenUsage) -> dict[str, Any]:
    """The token counts a commit adds to the session's totals."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }


async def run(
    conn: AsyncConnection, statement: TextClause, params: dict[str, Any]
) -> Row[Any] | None:
    """Execute one of the statements above; its row, or None (fenced off: nothing written).

    Raises:
        sqlalchemy.exc.IntegrityError: a transcript or event row already exists
            (``Database`` maps it to ``WriteConflict``); nothing was written.
    """
    return (await conn.execute(statement, params)).one_or_none()


async def run_write(conn: AsyncConnection, statement: TextClause, params: dict[str, Any]) -> None:
    """Execute one of the statements above that returns no row (``GIVE_BACK``)."""
    await conn.execute(statement, params)
