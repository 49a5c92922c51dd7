"""Durable sessions: one row per Slack thread, advanced one fenced step at a time (§3, §5).

The database is the source of truth; a queue message is only a wake-up naming a
*pending token*. Life of a step::

    open_or_join / add_input ──► token ──► (enqueue) ──► claim(token) ──► Claim
        save(claim, …)*          intent before side effect; fenced by epoch
        commit(claim, outcome)   ──► next token (Continue) or None (Wait / Finish)

Every claim bumps ``epoch``; every write carries the claim's epoch and token and is
refused (``Fenced``) once either moved on, so a zombie worker's late write changes
nothing. A duplicate or stale wake-up claims nothing (``claim`` returns None).
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Row, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.clock import Clock, utc_now
from memory_store.db import Database, WriteConflict
from memory_store.errors import DatabaseUnavailable, Fenced
from memory_store.sessions import claims, event_log, inbox, sweeper, transcript
from memory_store.sessions import rows as session_rows
from memory_store.sessions.lease_time import LeaseTime
from memory_store.sessions.records import (
    Cancelled,
    Claim,
    Event,
    InboxItem,
    IoCounters,
    NewEvent,
    Opened,
    Outcome,
    Session,
    SessionKey,
    SessionOrigin,
    SweepResult,
    TokenUsage,
    TranscriptDelta,
    TranscriptMark,
)
from memory_store.sessions.tables import UTC_DATETIME, sessions

_T = TypeVar("_T")


def new_token() -> str:
    """A fresh random id (32 hex chars) for sessions and pending tokens."""
    return uuid.uuid4().hex


class SessionStore:
    """Sessions, their event log and inbox, over ``Database`` (PostgreSQL or SQLite).

    Every method is one short transaction; no lock outlives a call. Times come from
    ``clock`` (aware UTC), except leases: on PostgreSQL they are granted, renewed and
    judged expired by the database's clock (``now()``), so hosts' clocks need not
    agree (``lease_time``).
    """

    def __init__(
        self, db: Database, *, clock: Clock = utc_now, lease_clock: Clock | None = None
    ) -> None:
        """Use ``db`` (migrated) and ``clock`` (returns aware UTC ``datetime``s).

        ``lease_clock`` replaces the database's clock for leases (tests that move
        time on); None: ``now()`` on PostgreSQL, ``clock`` on SQLite (embedded, one host).
        """
        self._db = db
        self._clock = clock
        self.io = IoCounters()
        self._lease_clock = lease_clock

    async def open_or_join(
        self,
        key: SessionKey,
        *,
        requester_id: str,
        initial_checkpoint: str,
        text: str,
        source_ts: str,
        session_id: str | None = None,
        origin: SessionOrigin = SessionOrigin.SLACK,
    ) -> Opened:
        """Start the thread's session, or join it, and record ``text`` in its inbox.

        One session per ``key`` even under concurrent opens (a unique key; the loser
        joins). ``initial_checkpoint`` (opaque JSON) is used only when creating. The
        text is recorded once per ``(session, source_ts)``; a repeat is a no-op
        (``token`` None). A session that is not running becomes runnable.
        ``session_id`` (≤ 64 chars) is the id a new session gets (default: a fresh
        ``new_token()``), so a caller can put it in ``initial_checkpoint``.

        Returns:
            ``Opened(session_id, created, token)``: enqueue ``token`` unless None.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now, token, lease = self._clock(), new_token(), self._lease_time()
        session_id = session_id or new_token()
        message = inbox.Message(requester_id, text, source_ts)
        new = session_rows.NewSession(
            session_id, requester_id, initial_checkpoint, token, now, origin, lease.bound
        )
        try:
            if self._pg:  # before Slack's ack: on the driver's connection
                # the common case, a new thread, in one statement and round trip
                if await session_rows.create_with_input(self._db, key, new, message):
                    return Opened(session_id, created=True, token=token)
                joined = await inbox.join_on_driver(
                    self._db, key, message, new_token=token, now=now, lease_now=lease.bound
                )
                if joined is not None:
                    return Opened(joined[0], created=False, token=joined[1])
            async with self._db.write() as conn:
                if not self._pg and await session_rows.create(conn, key, new, is_postgres=False):
                    await inbox.insert_item(
                        conn, session_id, 1, message, now=now, is_postgres=False
                    )
                    return Opened(session_id, created=True, token=token)
                session_id = await session_rows.id_of(conn, key)
                woke = await inbox.record(
                    conn,
                    session_id,
                    message,
                    new_token=token,
                    now=now,
                    lease=lease,
                    is_postgres=self._pg,
                )
                return Opened(session_id, created=False, token=woke)
        except inbox.DuplicateInput as repeat:
            return Opened(repeat.session_id or session_id, created=False, token=None)

    async def add_input(
        self, session_id: str, *, user_id: str, text: str, source_ts: str
    ) -> str | None:
        """Record a steering reply in the inbox (once per ``source_ts``).

        A session that is not running (waiting, done, failed, cancelled) becomes
        runnable with a new pending token; a running one takes the text at its next
        step boundary.

        Returns:
            The token to enqueue, or None (a step is pending, or a duplicate message).

        Raises:
            SessionNotFound: no such session.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        message = inbox.Message(user_id, text, source_ts)
        if not self._pg:
            return await self._record(session_id, message)
        try:  # before Slack's ack: on the driver's connection
            return await inbox.record_on_driver(
                self._db,
                session_id,
                message,
                new_token=new_token(),
                now=self._clock(),
                lease_now=self._lease_time().bound,
            )
        except inbox.DuplicateInput:
            return None

    async def notify(self, session_id: str, *, kind: str, text: str, source_key: str) -> str | None:
        """Record a system input for the session (a finished background command, a
        decision on an approval…) and wake it as a reply would (``add_input``).

        Args:
            kind: what the harness is told (not ``user``; at most 16 characters).
            text: the input's text (its meaning is the harness's, by ``kind``).
            source_key: unique per session: a repeat is a no-op, so a doubled
                notification or a second click is recorded once.

        Returns:
            The token to enqueue, or None (a step is pending, or a repeat).

        Raises:
            ValueError: ``kind`` is ``user`` or longer than 16 characters.
            SessionNotFound: no such session.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if kind == "user" or not 0 < len(kind) <= 16:
            raise ValueError(f"a system input's kind must be 1-16 characters, not user: {kind!r}")
        if not 0 < len(source_key) <= 64:
            raise ValueError(f"source_key must be 1-64 characters: {source_key!r}")
        return await self._record(session_id, inbox.Message("", text, source_key, kind=kind))

    async def _record(self, session_id: str, message: inbox.Message) -> str | None:
        """``inbox.record`` in a write transaction of its own, at this store's clocks; the
        token to enqueue, or None (a step is pending, or a repeat)."""
        now, lease = self._clock(), self._lease_time()
        try:
            async with self._db.write() as conn:
                return await inbox.record(
                    conn,
                    session_id,
                    message,
                    new_token=new_token(),
                    now=now,
                    lease=lease,
                    is_postgres=self._pg,
                )
        except inbox.DuplicateInput:
            return None

    async def claim(
        self,
        session_id: str,
        token: str,
        *,
        worker_id: str,
        lease_s: float,
        cached: TranscriptMark | None = None,
        origin: SessionOrigin | None = None,
    ) -> Claim | None:
        """Take the step ``token`` names: bump ``epoch``, lease it to ``worker_id``.

        Succeeds only if ``token`` is the pending token, the session is running and no
        unexpired lease holds it; otherwise None (a duplicate, stale or parked wake-up:
        drop it). Re-claiming a token whose earlier claim never committed (its worker
        died, the lease ran out) succeeds with ``crash_count`` one higher. With
        ``origin``, a session of another origin is never claimed (a worker without a
        Slack poster must not run a Slack session).

        The claim holds the transcript's rows from ``Claim.transcript_from`` on: all of
        them, unless ``cached`` (the mark of a transcript the caller decoded earlier) is
        of the current generation, when only the rows after it are read — none when the
        claim's epoch directly follows the mark's (nobody wrote in between).

        Raises:
            ValueError: ``lease_s`` is not positive.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        _check_positive(lease_s=lease_s)
        now = self._clock()
        take = functools.partial(
            claims.take,
            session_id=session_id,
            token=token,
            worker_id=worker_id,
            lease_s=lease_s,
            now=now,
            lease_time=self._lease_time(),
            origin=origin,
        )
        if self._pg:
            held = await self._claim_in_autocommit(take, session_id, token, worker_id, cached)
        else:
            async with self._db.write() as conn:  # SQLite: the claim and its reads, one transaction
                row = await take(conn)
                held = None
                if row is not None:
                    held = await claims.claimed(
                        conn, row, session_id, token, worker_id, cached=cached
                    )
        if held is not None:
            texts = (held.checkpoint, *held.transcript, *(i.text for i in held.inbox))
            self.io.read_bytes += _size(*texts)
        return held

    async def _claim_in_autocommit(
        self,
        take: Callable[[AsyncConnection], Awaitable[Row[Any] | None]],
        session_id: str,
        token: str,
        worker_id: str,
        cached: TranscriptMark | None,
    ) -> Claim | None:
        """PostgreSQL: the claiming statement commits on its own; the reads that follow
        it run after. When they fail the claim is given back (best effort: if that fails
        too, the lease runs out as a crashed worker's would) before the error is raised,
        so the message's retry can take the step again."""
        row: Row[Any] | None = None
        try:
            async with self._db.autocommit() as conn:
                row = await take(conn)
                if row is None:
                    return None
                return await claims.claimed(conn, row, session_id, token, worker_id, cached=cached)
        except DatabaseUnavailable:
            if row is not None:
                with contextlib.suppress(DatabaseUnavailable):
                    async with self._db.autocommit() as conn:
                        await claims.give_back(
                            conn, session_id, epoch=row.epoch, worker_id=worker_id
                        )
            raise

    async def renew(self, claim: Claim, *, lease_s: float) -> None:
        """Extend the claim's lease to now + ``lease_s`` (call well within the lease).

        Raises:
            Fenced: the claim is no longer current.
            ValueError: ``lease_s`` is not positive.
        """
        _check_positive(lease_s=lease_s)
        async with self._db.write() as conn:
            await claims.renew(conn, claim, lease_s=lease_s, lease_time=self._lease_time())

    async def release(self, claim: Claim) -> None:
        """End the claim's lease now (its step failed): its next attempt may claim the
        step at once (the lease ends a millisecond in the past, so a claim made in the
        same millisecond finds it over).

        Raises:
            Fenced: the claim is no longer current.
        """
        async with self._db.write() as conn:
            await claims.renew(conn, claim, lease_s=-0.001, lease_time=self._lease_time())

    async def set_sandbox(self, claim: Claim, sandbox: str | None) -> None:
        """Record the session's sandbox handle (opaque JSON from sandbox_client, or None).

        Raises:
            Fenced: the claim is no longer current.
        """
        now = self._clock()
        async with self._db.write() as conn:
            await claims.set_sandbox(conn, claim, sandbox, now=now)

    async def save(
        self,
        claim: Claim,
        *,
        checkpoint: str | None,
        events: Sequence[NewEvent] = (),
        transcript: TranscriptDelta | None = None,
    ) -> None:
        """Commit mid-step (intent before side effect); the claim stays held.

        Writes ``checkpoint`` (None: keep) and the ``transcript`` delta, and appends
        ``events`` at consecutive seqs after the log's last, atomically. Lease and token
        are unchanged.

        Raises:
            Fenced: the claim is no longer current, or the delta's base is not the
                stored transcript; nothing was written.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        async with self._fenced(claim, alone=True) as conn:
            await claims.save(
                conn, claim, checkpoint=checkpoint, events=events, now=now, delta=transcript
            )
        self._count_written(checkpoint, events, transcript)

    async def commit(
        self,
        claim: Claim,
        *,
        checkpoint: str,
        outcome: Outcome,
        events: Sequence[NewEvent] = (),
        consumed_inbox_upto: int | None = None,
        usage: TokenUsage | None = None,
        transcript: TranscriptDelta | None = None,
    ) -> str | None:
        """End the step in one transaction and release the claim.

        Writes ``checkpoint`` and the ``transcript`` delta, appends ``events``, marks
        inbox positions up to ``consumed_inbox_upto`` consumed, adds ``usage`` to the
        session's totals, and clears the lease. Then: ``Continue`` → a new pending
        token; ``Wait(until)`` → ``waiting`` (no token; the sweeper ends it after
        ``until``); ``Finish(status)`` → that status. If inbox input arrived that this
        step did not consume, the session stays ``running`` with a new token whatever
        the outcome (its sender enqueued nothing, trusting this step). Committing the
        same claim twice is refused.

        Returns:
            The token to enqueue after this returns, or None.

        Raises:
            Fenced: the claim is no longer current, or the delta's base is not the
                stored transcript; nothing was written.
            ValueError: ``consumed_inbox_upto`` is beyond ``claim.inbox_upto``.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        step = functools.partial(
            claims.commit,
            outcome=outcome,
            new_token=new_token(),
            lease_time=self._lease_time(),
        )
        return await self._end_step(
            step, claim, checkpoint, events, consumed_inbox_upto, usage, transcript, alone=True
        )

    async def commit_then_claim(
        self,
        claim: Claim,
        *,
        checkpoint: str,
        lease_s: float,
        events: Sequence[NewEvent] = (),
        consumed_inbox_upto: int | None = None,
        usage: TokenUsage | None = None,
        transcript: TranscriptDelta | None = None,
    ) -> Claim:
        """``commit`` a step whose outcome is ``Continue`` and claim the next step for the
        same worker in the same transaction (a worker running its session's next step
        itself, with no queue message between: docs/architecture.md §5).

        The returned claim has a new token and epoch, a lease of ``lease_s`` and the
        unconsumed inbox; it carries no transcript rows (the caller wrote them). If its
        holder dies, the sweeper re-enqueues the token once the lease runs out.

        Raises:
            Fenced, ValueError, DatabaseUnavailable: as ``commit``.
        """
        _check_positive(lease_s=lease_s)
        step = functools.partial(
            claims.commit_then_claim,
            new_token=new_token(),
            lease_s=lease_s,
            lease_time=self._lease_time(),
        )
        return await self._end_step(
            step, claim, checkpoint, events, consumed_inbox_upto, usage, transcript
        )

    async def _end_step(
        self,
        step: Callable[..., Awaitable[_T]],
        claim: Claim,
        checkpoint: str,
        events: Sequence[NewEvent],
        consumed_inbox_upto: int | None,
        usage: TokenUsage | None,
        transcript: TranscriptDelta | None,
        *,
        alone: bool = False,
    ) -> _T:
        """Run ``step`` (``claims.commit`` or ``commit_then_claim``, with its own arguments
        bound) in one fenced transaction, after checking what it may mark consumed
        (``alone``: the step is a single statement with nothing after it)."""
        if consumed_inbox_upto is not None and consumed_inbox_upto > claim.inbox_upto:
            raise ValueError(f"consumed_inbox_upto {consumed_inbox_upto} > {claim.inbox_upto}")
        now = self._clock()
        async with self._fenced(claim, alone=alone) as conn:
            result = await step(
                conn,
                claim,
                checkpoint=checkpoint,
                events=events,
                consumed_inbox_upto=consumed_inbox_upto,
                usage=usage or TokenUsage(),
                now=now,
                delta=transcript,
            )
        self._count_written(checkpoint, events, transcript)
        return result

    async def cancel(self, session_id: str, *, actor: str | None = None) -> Cancelled | None:
        """Cancel a running or waiting session (``stop``), fencing off its running step.

        Sets ``cancelled``, clears token and lease, bumps ``epoch`` and appends a
        ``notice`` event naming ``actor``. A later reply revives the session.

        Returns:
            What the caller needs to kill the step's sandbox process, or None when the
            session does not exist or has already ended.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        async with self._db.write() as conn:
            return await session_rows.cancel(conn, session_id, actor=actor, now=now)

    async def get(self, session_id: str) -> Session | None:
        """The session row, or None. Raises DatabaseUnavailable."""
        async with self._db.read() as conn:
            return await session_rows.read(conn, sessions.c.id == session_id)

    async def find(self, key: SessionKey) -> Session | None:
        """The session of a Slack thread, or None. Raises DatabaseUnavailable."""
        if self._pg:
            return await session_rows.find(self._db, key)
        async with self._db.read() as conn:
            return await session_rows.read(conn, *session_rows.key_is(key))

    async def latest(self, org_id: str, channel_id: str) -> Session | None:
        """The channel's most recently active session (the last one updated), or None.

        Raises DatabaseUnavailable.
        """
        async with self._db.read() as conn:
            return await session_rows.latest(conn, org_id, channel_id)

    async def transcript(self, session_id: str) -> tuple[str, ...]:
        """The session's current transcript: its messages' JSON, oldest first.

        Empty for an unknown session. Raises DatabaseUnavailable.
        """
        async with self._db.read() as conn:
            session = await session_rows.read(conn, sessions.c.id == session_id)
            if session is None or session.transcript_length == 0:
                return ()
            rows = await transcript.read(conn, session_id, generation=session.transcript_generation)
        self.io.read_bytes += _size(*rows)
        return rows

    async def events(
        self, session_id: str, after_seq: int = 0, *, limit: int | None = None
    ) -> list[Event]:
        """Logged events with ``seq > after_seq``, in seq order (at most ``limit``)."""
        async with self._db.read() as conn:
            return await event_log.read(conn, session_id, after_seq=after_seq, limit=limit)

    async def inbox(self, session_id: str, *, after_position: int = 0) -> list[InboxItem]:
        """Inbox items (consumed or not) with ``position > after_position``, in order."""
        async with self._db.read() as conn:
            return list(await inbox.read(conn, session_id, after_position=after_position))

    async def sweep(
        self,
        now: datetime | None = None,
        *,
        max_crashes: int,
        stale_after_s: float,
        sent_before: datetime | None = None,
        origin: SessionOrigin | None = None,
        session_ids: Collection[str] | None = None,
    ) -> SweepResult:
        """Recover what crashes and lost messages left behind; one sweep at a time.

        In one transaction: fails running sessions whose lease expired for the
        ``max_crashes``-th time on the same token (status ``failed``, a ``notice``
        event, epoch bumped); returns running sessions nobody holds for re-enqueueing
        with their existing token — lease expired since their last enqueue, or last
        enqueued more than ``stale_after_s`` ago (a lost message); moves ``waiting``
        sessions past ``wait_until`` to ``done`` (with a ``notice`` event); wakes
        ``waiting`` sessions whose ``wake_at`` passed (``Wait``), recording their note
        as an inbox item of kind ``wake`` and returning them with a new token in
        ``woken`` (re-enqueue and wake only in scope). On
        PostgreSQL a sweep that finds another holding the advisory lock returns an
        empty result at once.

        Args:
            now: the sweep's time (default: the store's clock; leases are judged by
                the database's clock on PostgreSQL unless ``lease_clock`` was given).
            max_crashes: crashes of one step that fail the session (≥ 1).
            stale_after_s: seconds after which an unclaimed token is enqueued again.
            sent_before: also enqueue again an unclaimed token sent before this moment, on
                the lease clock (``lease_now``): after a queue lost its messages.
            origin, session_ids: re-enqueue and fail only sessions of this origin, and
                among these ids (None: any); waits end whatever the origin.

        Raises:
            ValueError: ``max_crashes`` < 1 or ``stale_after_s`` not positive.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if max_crashes < 1:
            raise ValueError("max_crashes must be at least 1")
        _check_positive(stale_after_s=stale_after_s)
        at = now or self._clock()
        async with self._db.write() as conn:
            return await sweeper.sweep(
                conn,
                now=at,
                lease_time=self._lease_time(now),
                max_crashes=max_crashes,
                stale_after_s=stale_after_s,
                sent_before=sent_before,
                is_postgres=self._pg,
                new_token=new_token,
                scope=sweeper.scope(origin, session_ids),
            )

    async def lease_now(self, at: float | None = None) -> datetime:
        """The time on the clock leases and wake-ups' send times are judged by (the
        database's on PostgreSQL, else the store's) now, or at ``at``, an earlier
        ``time.monotonic()`` instant (a queue's loss): read by one statement once a
        connection is held, ``at`` placed from the middle of that statement alone (a wait
        for the connection before it does not move the instant later).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        lease_time = self._lease_time()
        if not lease_time.from_database:
            found, read_at = lease_time.instant, time.monotonic()
        else:
            async with self._db.read() as conn:
                asked = time.monotonic()  # the clock as read now, not the transaction's start
                clock = select(func.clock_timestamp(type_=UTC_DATETIME))
                found = (await conn.execute(clock)).scalar_one()  # aware UTC
                read_at = (asked + time.monotonic()) / 2  # within half a round trip
        return found if at is None else found - timedelta(seconds=read_at - at)

    def _count_written(
        self, checkpoint: str | None, events: Sequence[NewEvent], delta: TranscriptDelta | None
    ) -> None:
        messages = delta.messages if delta is not None else ()
        payloads = (e.payload_json for e in events)
        self.io.written_bytes += _size(checkpoint or "", *messages, *payloads)

    def _lease_time(self, now: datetime | None = None) -> LeaseTime:
        """Lease times: the database's ``now()`` on PostgreSQL, else the given/lease clock."""
        from_database = self._pg and self._lease_clock is None and now is None
        instant = now or (self._lease_clock or self._clock)()
        return LeaseTime(instant, from_database)

    @property
    def _pg(self) -> bool:
        return self._db.is_postgres

    @asynccontextmanager
    async def _fenced(self, claim: Claim, *, alone: bool) -> AsyncIterator[AsyncConnection]:
        """A connection for a fenced write, where a refused row (the event log's or the
        transcript's primary key, the last line of defence) means another writer got
        there: ``Fenced``. With ``alone`` on PostgreSQL, an autocommit connection: the
        write is one statement (``one_statement``), atomic on its own, with nothing after
        it; otherwise a transaction, so a read after the write fails with it."""
        try:
            async with self._db.autocommit() if alone and self._pg else self._db.write() as conn:
                yield conn
        except WriteConflict as exc:
            raise Fenced(claim.session_id, claim.epoch) from exc


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")


def _size(*texts: str) -> int:
    """UTF-8 bytes of ``texts``: joined and encoded at C speed (a long transcript's rows
    are not walked in Python)."""
    return len("".join(texts).encode())
