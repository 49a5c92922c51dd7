"""The claim/commit protocol: lease + epoch fencing + pending token (docs/architecture.md §5).

Each function is one short transaction's statements, run on a connection the caller
opened with ``Database.write()``. The fence is a single ``UPDATE … WHERE id = :id AND
epoch = :epoch AND pending_token = :token RETURNING …``: when it matches no row the
claim is stale and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, TextClause, case, literal, null, or_, true
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.errors import Fenced
from memory_store.sessions import event_log, inbox, one_statement, transcript
from memory_store.sessions.lease_time import LeaseTime
from memory_store.sessions.records import (
    Claim,
    Continue,
    InboxItem,
    NewEvent,
    Outcome,
    SessionKey,
    SessionOrigin,
    SessionStatus,
    TokenUsage,
    TranscriptDelta,
    TranscriptMark,
    Wait,
)
from memory_store.sessions.tables import at, sessions

_S = sessions.c
_RUNNING = SessionStatus.RUNNING.value


async def take(
    conn: AsyncConnection,
    session_id: str,
    token: str,
    *,
    worker_id: str,
    lease_s: float,
    now: datetime,
    lease_time: LeaseTime,
    origin: SessionOrigin | None = None,
) -> Row[Any] | None:
    """Take the step named by ``token`` if it is pending, no live lease holds it and
    the session is of ``origin`` (None: any) (leases by ``lease_time``: the database's
    clock on PostgreSQL): the session row's ``_CLAIM_COLUMNS``, or None. On PostgreSQL
    one statement (``one_statement.CLAIM``); ``claimed`` then reads what the claim
    carries (the transcript rows the claimer lacks: ``transcript.first_missing``)."""
    if _is_postgres(conn):
        params = {
            "id": session_id,
            "token": token,
            "worker_id": worker_id,
            "lease_s": lease_s,
            "now": now,
            "origin": None if origin is None else origin.value,
            **one_statement.lease_params(lease_time),
        }
        return await one_statement.run(conn, one_statement.CLAIM, params)
    same_origin = true() if origin is None else _S.origin == origin.value
    taken = await conn.execute(
        sessions.update()
        .where(
            same_origin,
            _S.id == session_id,
            _S.pending_token == token,
            _S.status == _RUNNING,
            or_(_S.lease_until.is_(None), _S.lease_until < lease_time.now()),
        )
        .values(
            epoch=_S.epoch + 1,
            lease_owner=worker_id,
            lease_until=lease_time.now(lease_s),
            crash_count=case((_S.claimed_token == token, _S.crash_count + 1), else_=_S.crash_count),
            claimed_token=token,
            updated_at=now,
        )
        .returning(*_CLAIM_COLUMNS)
    )
    return taken.one_or_none()


async def claimed(
    conn: AsyncConnection,
    row: Row[Any],
    session_id: str,
    token: str,
    worker_id: str,
    *,
    cached: TranscriptMark | None,
) -> Claim | None:
    """The ``Claim`` that ``take``'s ``row`` grants, with the transcript rows ``cached``
    lacks and the unconsumed inbox. None when fewer rows than the claim counted on are
    left: read after a committed ``take``, that means another claim or a stop has
    moved the session on (a compaction dropped them), and this claim is stale."""
    gen, length = row.transcript_generation, row.transcript_length
    start = transcript.first_missing(cached, epoch=row.epoch, generation=gen, length=length)
    rows: tuple[str, ...] = ()
    if start is not None and start < length:
        rows = await transcript.read(conn, session_id, generation=gen, from_position=start)
        if len(rows) < length - start:
            return None
    return await _claim_of(
        conn,
        row,
        session_id,
        token,
        worker_id,
        rows=rows,
        transcript_from=length if start is None else start,
    )


async def give_back(conn: AsyncConnection, session_id: str, *, epoch: int, worker_id: str) -> None:
    """Undo a committed ``take`` whose reads then failed (PostgreSQL): no lease, no
    claimed token, as if the step had not been taken (its crash count, raised only by a
    re-claim of a crashed step, stays). Nothing when the session moved on."""
    params = {"id": session_id, "epoch": epoch, "worker_id": worker_id}
    await one_statement.run_write(conn, one_statement.GIVE_BACK, params)


def _is_postgres(conn: AsyncConnection) -> bool:
    return conn.dialect.name == "postgresql"


async def _claim_of(
    conn: AsyncConnection,
    row: Row[Any],
    session_id: str,
    token: str,
    worker_id: str,
    *,
    rows: tuple[str, ...],
    transcript_from: int,
    checkpoint: str | None = None,
) -> Claim:
    """The ``Claim`` a claiming UPDATE's ``RETURNING`` row (``_CLAIM_COLUMNS``) grants,
    with the inbox items not yet consumed."""
    items: tuple[InboxItem, ...] = ()
    if row.inbox_seq > row.inbox_consumed:
        items = await inbox.read(
            conn, session_id, after_position=row.inbox_consumed, upto=row.inbox_seq
        )
    return Claim(
        session_id=session_id,
        key=SessionKey(row.org_id, row.channel_id, row.thread_ts),
        requester_id=row.requester_id,
        epoch=row.epoch,
        token=token,
        worker_id=worker_id,
        lease_until=row.lease_until,
        checkpoint=row.checkpoint if checkpoint is None else checkpoint,
        inbox=items,
        inbox_upto=row.inbox_seq,
        crash_count=row.crash_count,
        last_seq=row.last_seq,
        sandbox=row.sandbox,
        transcript_generation=row.transcript_generation,
        transcript_length=row.transcript_length,
        transcript=rows,
        transcript_from=transcript_from,
    )


_CLAIM_COLUMNS = (
    _S.epoch,
    _S.lease_until,
    _S.org_id,
    _S.channel_id,
    _S.thread_ts,
    _S.requester_id,
    _S.checkpoint,
    _S.crash_count,
    _S.last_seq,
    _S.inbox_seq,
    _S.inbox_consumed,
    _S.sandbox,
    _S.transcript_generation,
    _S.transcript_length,
)


def _fence(held: Claim) -> ColumnElement[bool]:
    return (_S.id == held.session_id) & (_S.epoch == held.epoch) & (_S.pending_token == held.token)


async def renew(
    conn: AsyncConnection, held: Claim, *, lease_s: float, lease_time: LeaseTime
) -> None:
    """Set the lease to ``lease_time``'s now + ``lease_s`` (negative: it is over). Raises
    Fenced."""
    result = await conn.execute(
        sessions.update()
        .where(_fence(held))
        .values(lease_until=lease_time.now(lease_s))
        .returning(_S.id)
    )
    if result.one_or_none() is None:
        raise Fenced(held.session_id, held.epoch)


async def set_sandbox(
    conn: AsyncConnection, held: Claim, sandbox: str | None, *, now: datetime
) -> None:
    """Record the session's sandbox handle (opaque JSON, or None). Raises Fenced."""
    result = await conn.execute(
        sessions.update().where(_fence(held)).values(sandbox=sandbox, updated_at=now)
    )
    if result.rowcount == 0:
        raise Fenced(held.session_id, held.epoch)


async def save(
    conn: AsyncConnection,
    held: Claim,
    *,
    checkpoint: str | None,
    events: Sequence[NewEvent],
    now: datetime,
    delta: TranscriptDelta | None = None,
) -> None:
    """Write the checkpoint (None: keep), the transcript delta and events; keep the lease."""
    if _is_postgres(conn):
        params = _write_params(held, checkpoint, events, now, delta)
        await _run_fenced(conn, held, one_statement.SAVE, params)
        return
    values: dict[str, Any] = {"last_seq": _S.last_seq + len(events), "updated_at": now}
    if checkpoint is not None:
        values["checkpoint"] = checkpoint
    await _write(conn, held, values, events, now=now, delta=delta)


async def commit(
    conn: AsyncConnection,
    held: Claim,
    *,
    checkpoint: str,
    events: Sequence[NewEvent],
    outcome: Outcome,
    consumed_inbox_upto: int | None,
    usage: TokenUsage,
    new_token: str,
    now: datetime,
    lease_time: LeaseTime,
    delta: TranscriptDelta | None = None,
) -> str | None:
    """End the step: checkpoint, transcript delta, events, inbox consumption, usage,
    release, next state.

    Returns ``new_token`` when the session stays runnable, else None.
    """
    if _is_postgres(conn):
        until, wake_at, wake_note, end_status = _ending(outcome)
        params = _write_params(held, checkpoint, events, now, delta) | {
            **one_statement.usage_params(usage),
            **one_statement.lease_params(lease_time),
            "consumed_upto": consumed_inbox_upto,
            "continues": isinstance(outcome, Continue),
            "end_status": end_status,
            "new_token": new_token,
            "until": until,
            "wake_at": wake_at,
            "wake_note": wake_note,
        }
        token: str | None = (
            await _run_fenced(conn, held, one_statement.COMMIT, params)
        ).pending_token
        return token
    consumed = _consumed(consumed_inbox_upto)
    # Input that arrived during the step and was not consumed keeps the session running:
    # its sender saw "a step is pending" and enqueued nothing.
    runnable = true() if isinstance(outcome, Continue) else _S.inbox_seq > consumed
    values: dict[str, Any] = {
        "checkpoint": checkpoint,
        "last_seq": _S.last_seq + len(events),
        "inbox_consumed": consumed,
        "lease_owner": null(),
        "lease_until": null(),
        "claimed_token": null(),
        "crash_count": 0,
        "updated_at": now,
        **_next_state(outcome, runnable, new_token, lease_time.now()),
        **_usage_sums(usage),
    }
    row = await _write(conn, held, values, events, now=now, returning=_S.pending_token, delta=delta)
    pending: str | None = row.pending_token
    return pending


async def commit_then_claim(
    conn: AsyncConnection,
    held: Claim,
    *,
    checkpoint: str,
    events: Sequence[NewEvent],
    consumed_inbox_upto: int | None,
    usage: TokenUsage,
    new_token: str,
    lease_s: float,
    now: datetime,
    lease_time: LeaseTime,
    delta: TranscriptDelta | None = None,
) -> Claim:
    """``commit`` with ``Continue``, and the claim of the next step by the same worker,
    in the one UPDATE: the next token is pending and claimed at once (epoch bumped, a
    fresh lease), so no message and no second claim are needed. ``enqueued_at`` is set,
    so once that lease runs out unrenewed the sweeper hands the token out again.

    The claim carries no transcript rows: its holder wrote them (``transcript_from`` is
    the stored length). Raises Fenced as ``commit``.
    """
    if _is_postgres(conn):
        params = _write_params(held, checkpoint, events, now, delta) | {
            **one_statement.usage_params(usage),
            **one_statement.lease_params(lease_time),
            "consumed_upto": consumed_inbox_upto,
            "worker_id": held.worker_id,
            "lease_s": lease_s,
            "new_token": new_token,
        }
        row = await _run_fenced(conn, held, one_statement.COMMIT_THEN_CLAIM, params)
    else:
        values: dict[str, Any] = {
            "checkpoint": checkpoint,
            "last_seq": _S.last_seq + len(events),
            "inbox_consumed": _consumed(consumed_inbox_upto),
            "epoch": _S.epoch + 1,
            "lease_owner": held.worker_id,
            "lease_until": lease_time.now(lease_s),
            "claimed_token": new_token,
            "pending_token": new_token,
            "enqueued_at": lease_time.now(),
            "crash_count": 0,
            "status": _RUNNING,
            "wait_until": null(),
            "wake_at": null(),
            "wake_note": null(),
            "updated_at": now,
            **_usage_sums(usage),
        }
        row = await _write(
            conn, held, values, events, now=now, returning=_CLAIM_COLUMNS, delta=delta
        )
    return await _claim_of(
        conn,
        row,
        held.session_id,
        new_token,
        held.worker_id,
        rows=(),
        transcript_from=row.transcript_length,
        checkpoint=checkpoint,
    )


def _write_params(
    held: Claim,
    checkpoint: str | None,
    events: Sequence[NewEvent],
    now: datetime,
    delta: TranscriptDelta | None,
) -> dict[str, Any]:
    return one_statement.write_params(
        session_id=held.session_id,
        epoch=held.epoch,
        token=held.token,
        events=events,
        now=now,
        delta=delta,
        checkpoint=checkpoint,
    )


async def _run_fenced(
    conn: AsyncConnection, held: Claim, statement: TextClause, params: dict[str, Any]
) -> Row[Any]:
    """Run a fenced single statement; its row. Raises Fenced when it matched none."""
    row = await one_statement.run(conn, statement, params)
    if row is None:
        raise Fenced(held.session_id, held.epoch)
    return row


def _ending(outcome: Outcome) -> tuple[datetime | None, datetime | None, str | None, str]:
    """A commit's ``until``, ``wake_at``, ``wake_note`` and the status it ends in when
    nothing keeps the session runnable."""
    if isinstance(outcome, Continue):
        return None, None, None, _RUNNING
    if isinstance(outcome, Wait):
        return outcome.until, outcome.wake_at, outcome.wake_note, SessionStatus.WAITING.value
    return None, None, None, outcome.status.value


def _consumed(consumed_inbox_upto: int | None) -> ColumnElement[Any]:
    """``inbox_consumed`` raised to ``consumed_inbox_upto`` (None: left as it is)."""
    if consumed_inbox_upto is None:
        return _S.inbox_consumed
    upto = literal(consumed_inbox_upto)
    return case((_S.inbox_consumed < upto, upto), else_=_S.inbox_consumed)


def _next_state(
    outcome: Outcome, runnable: ColumnElement[bool], new_token: str, now: ColumnElement[datetime]
) -> dict[str, Any]:
    wake_at, wake_note = None, None
    if isinstance(outcome, Continue):
        end_status = _RUNNING
        until = None
    elif isinstance(outcome, Wait):
        end_status, until = SessionStatus.WAITING.value, outcome.until
        wake_at, wake_note = outcome.wake_at, outcome.wake_note
    else:
        end_status, until = outcome.status.value, None
    return {
        "status": case((runnable, _RUNNING), else_=end_status),
        "pending_token": case((runnable, new_token), else_=null()),
        "enqueued_at": case((runnable, now), else_=null()),
        "wait_until": null() if until is None else case((runnable, null()), else_=at(until)),
        # kept while runnable too: the next step's wait rewrites them from its checkpoint
        "wake_at": null() if wake_at is None else at(wake_at),
        "wake_note": null() if wake_note is None else wake_note,
    }


def _usage_sums(usage: TokenUsage) -> dict[str, Any]:
    return {
        "input_tokens": _S.input_tokens + usage.input_tokens,
        "output_tokens": _S.output_tokens + usage.output_tokens,
        "cache_read_tokens": _S.cache_read_tokens + usage.cache_read_tokens,
        "cache_write_tokens": _S.cache_write_tokens + usage.cache_write_tokens,
    }


async def _write(
    conn: AsyncConnection,
    held: Claim,
    values: dict[str, Any],
    events: Sequence[NewEvent],
    *,
    now: datetime,
    returning: ColumnElement[Any] | Sequence[ColumnElement[Any]] | None = None,
    delta: TranscriptDelta | None = None,
) -> Any:
    """The fenced ``UPDATE … RETURNING last_seq`` (and ``returning``), then the transcript
    rows and the events at the reserved seqs, written under the claim's epoch. A delta
    whose base is not the stored transcript is fenced too. (SQLite; PostgreSQL runs
    ``one_statement``'s single statements instead.)"""
    columns: list[ColumnElement[Any]] = [_S.last_seq]
    if returning is not None:
        more = list(returning) if isinstance(returning, Sequence) else [returning]
        columns += [c for c in more if c is not _S.last_seq]
    fence = _fence(held)
    if delta is not None:
        fence = fence & transcript.holds(delta.base)
        values = {**values, **transcript.counters(delta)}
    result = await conn.execute(sessions.update().where(fence).values(values).returning(*columns))
    row = result.one_or_none()
    if row is None:
        raise Fenced(held.session_id, held.epoch)
    if delta is not None:
        await transcript.write(conn, held.session_id, delta, epoch=held.epoch, now=now)
    await event_log.append(
        conn, held.session_id, last_seq=row.last_seq, epoch=held.epoch, events=events, now=now
    )
    return row
