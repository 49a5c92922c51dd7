"""The alert registry (``AlertStore``): deliveries recorded once, decided once, each in a thread.

``record`` writes a delivery's alerts in one transaction (a retry's are skipped by the
unique ``(org, source, delivery_id)``). ``decide`` takes one recorded alert: in ONE
transaction it finds or opens its problem's thread (or the org's storm summary thread),
counts it, and marks the delivery taken with the thread it went to, so an alert is
either untaken (``pending`` returns it) or accounted for, never half-done. Decisions of
one org are serialised (PostgreSQL: a transaction-scoped advisory lock on the org;
SQLite: its single writer), so the open-thread cap holds across processes.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.alerts.tables import alert_deliveries, alert_threads
from memory_store.clock import Clock, utc_now
from memory_store.db import Database
from memory_store.sessions.records import SessionStatus
from memory_store.sessions.tables import sessions
from memory_store.upsert import insert

_D = alert_deliveries.c
_T = alert_threads.c
SUMMARY_KEY = "~summary"
"""A storm summary thread's ``open_key`` is ``~summary:<channel>``: one per channel."""
SUMMARY_REUSE_S = 3600.0
"""A storm summary thread takes folded alerts while its last one is younger than this."""
OPEN_STATES = ("opening", "open")


@dataclass(frozen=True)
class NewAlert:
    """One alert to record (``AlertStore.record``).

    ``delivery_id`` is unique per ``(org_id, source)``: a retry repeats it.
    ``channel_id`` is where a new thread would go; ``posted_ts`` the Slack message
    that is the alert (watched channels), else None.
    """

    org_id: str
    source: str
    delivery_id: str
    dedupe_key: str
    firing: bool
    title: str
    alert_json: str
    channel_id: str | None = None
    posted_ts: str | None = None


@dataclass(frozen=True)
class PendingAlert:
    """A recorded alert not yet taken (``pending``)."""

    id: int
    org_id: str
    channel_id: str | None
    posted_ts: str | None
    alert_json: str


@dataclass(frozen=True)
class AlertThread:
    """A problem's thread (``kind`` ``session``) or a storm summary (``summary``).

    ``state``: ``opening`` (decided, not yet in Slack), ``open``, ``resolved``,
    ``closed``. ``thread_ts`` is None until the thread's root is in Slack.
    ``firing_count`` counts its firing alerts (a summary: every folded alert).
    """

    id: str
    org_id: str
    dedupe_key: str
    kind: str
    state: str
    channel_id: str
    thread_ts: str | None
    session_id: str | None
    firing_count: int
    first_at: datetime
    last_at: datetime
    last_input_at: datetime | None
    resolved_at: datetime | None


@dataclass(frozen=True)
class AlertDecision:
    """What ``decide`` made of one alert.

    ``kind``: ``start`` (a new problem thread, ``thread`` in state ``opening``: the
    caller posts it and calls ``opened``), ``repeat`` (a new input for the thread's
    session), ``burst`` (counted; within the burst window of the last input),
    ``resolved`` (the thread is closed), ``folded`` (in the summary ``thread``;
    ``created_thread``: this call opened it, so the caller posts its root), ``noted``
    (a resolve with no open thread, already in Slack as its own message: ``thread``
    None), or ``taken`` (decided before, by another call: nothing to do). ``delivery_row``
    is the delivery's id.
    """

    kind: str
    delivery_row: int
    thread: AlertThread | None
    created_thread: bool = False


@dataclass(frozen=True)
class AlertTally:
    """Accounting of an org's alerts (``tally``): every received alert is pending,
    in a thread, (``in_channel``) its own Slack message, or failed; ``unaccounted`` must
    be 0. ``failed``: alerts whose thread Slack refused to open, or that could not be
    taken at all (``fail``; on record, logged)."""

    received: int
    pending: int
    in_threads: int
    in_channel: int
    unaccounted: int
    session_threads: int
    open_session_threads: int
    failed: int = 0


class AlertStore:
    """``alert_deliveries`` and ``alert_threads`` over ``Database`` (migrated)."""

    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        self._db = db
        self._clock = clock

    async def record(self, alerts: list[NewAlert]) -> list[int]:
        """Record ``alerts`` in one transaction; returns the ids of the rows this call
        wrote, in order (an alert whose delivery was recorded before is skipped).

        Raises:
            DatabaseUnavailable: nothing was recorded.
        """
        (ids,) = await self.record_groups([alerts])
        return ids

    async def record_groups(self, groups: list[list[NewAlert]]) -> list[list[int]]:
        """Record several deliveries' alerts in ONE transaction (a group commit: concurrent
        requests share a write); per group, the ids ``record`` would return.

        Raises:
            DatabaseUnavailable: nothing was recorded.
        """
        now = self._clock()
        written: list[list[int]] = []
        async with self._db.write() as conn:
            for alerts in groups:
                ids = []
                for alert in alerts:
                    stmt = (
                        insert(alert_deliveries, is_postgres=self._db.is_postgres)
                        .values(received_at=now, **alert.__dict__)
                        .on_conflict_do_nothing(index_elements=["org_id", "source", "delivery_id"])
                        .returning(_D.id)
                    )
                    row = (await conn.execute(stmt)).one_or_none()
                    if row is not None:
                        ids.append(int(row[0]))
                written.append(ids)
        return written

    async def pending(self, *, limit: int = 100) -> list[PendingAlert]:
        """Recorded alerts not yet taken, oldest first (at most ``limit``)."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(_D.id, _D.org_id, _D.channel_id, _D.posted_ts, _D.alert_json)
                .where(_D.taken_at.is_(None))
                .order_by(_D.id)
                .limit(limit)
            )
            return [PendingAlert(*row) for row in rows]

    async def decide(
        self,
        delivery_row: int,
        *,
        max_open: int,
        burst_window_s: float,
        summary_channel_id: str | None,
    ) -> AlertDecision:
        """Take recorded alert ``delivery_row``: find or open its thread, account for it.

        Args:
            max_open: most open problem threads the org may have (0: fold every new one).
            burst_window_s: a repeat within this of the thread's last input is a burst.
            summary_channel_id: where a new storm summary thread goes.

        Raises:
            LookupError: no such delivery.
            DatabaseUnavailable: nothing was decided (the alert stays pending).
        """
        async with self._db.write() as conn:
            row = (
                await conn.execute(select(alert_deliveries).where(_D.id == delivery_row))
            ).one_or_none()
            if row is None:
                raise LookupError(f"no alert delivery {delivery_row}")
            if self._db.is_postgres:
                await conn.execute(select(func.pg_advisory_xact_lock(_org_lock(row.org_id))))
            if row.taken_at is not None:  # decided before: another process, or a retry
                thread = await _thread(conn, row.thread_id) if row.thread_id else None
                return AlertDecision("taken", delivery_row, thread)
            decision = await self._decide(conn, row, max_open, burst_window_s, summary_channel_id)
            thread_id = decision.thread.id if decision.thread else None
            await conn.execute(
                update(alert_deliveries)
                .where(_D.id == delivery_row)
                .values(taken_at=self._clock(), outcome=decision.kind, thread_id=thread_id)
            )
            return decision

    async def opened(self, thread_id: str, *, thread_ts: str, session_id: str | None) -> None:
        """The thread's root is in Slack (``thread_ts``), with its session, if any."""
        async with self._db.write() as conn:
            await conn.execute(
                update(alert_threads)
                .where(_T.id == thread_id)
                .values(thread_ts=thread_ts, session_id=session_id, state="open")
            )

    async def abandon(self, thread_id: str, delivery_row: int) -> None:
        """The thread could not be opened in Slack (its root post was refused): it closes
        as ``failed`` and the alert's outcome says so (it stays on record, not retried)."""
        async with self._db.write() as conn:
            await conn.execute(
                update(alert_threads)
                .where(_T.id == thread_id)
                .values(state="failed", open_key=None)
            )
            await conn.execute(
                update(alert_deliveries).where(_D.id == delivery_row).values(outcome="failed")
            )

    async def fail(self, delivery_row: int) -> None:
        """A recorded alert that cannot be taken (unreadable, or its decision broke): it
        is taken as ``failed`` (on record, counted by ``tally``, never pending again). One
        already decided keeps its decision."""
        async with self._db.write() as conn:
            await conn.execute(
                update(alert_deliveries)
                .where(_D.id == delivery_row, _D.taken_at.is_(None))
                .values(taken_at=self._clock(), outcome="failed")
            )

    async def stale_openings(self, *, older_than_s: float) -> list[tuple[AlertThread, int, str]]:
        """Threads decided but never opened (a crash between the decision and the session,
        or a passing Slack failure), older than ``older_than_s``: each with its first
        delivery's id and alert JSON."""
        cutoff = self._clock() - timedelta(seconds=older_than_s)
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(alert_threads, _D.id.label("delivery_row"), _D.alert_json)
                .join(alert_deliveries, _D.thread_id == _T.id)
                .where(_T.state == "opening", _T.first_at < cutoff)
                .order_by(_T.first_at, _D.id)
            )
            found: dict[str, tuple[AlertThread, int, str]] = {}
            for row in rows:
                values = dict(row._mapping)
                delivery_row, alert_json = values.pop("delivery_row"), values.pop("alert_json")
                values.pop("open_key", None)
                found.setdefault(
                    str(values["id"]), (AlertThread(**values), int(delivery_row), str(alert_json))
                )
            return list(found.values())

    async def thread(self, thread_id: str) -> AlertThread | None:
        """One thread row, or None."""
        async with self._db.read() as conn:
            return await _thread(conn, thread_id)

    async def open_thread(self, org_id: str, dedupe_key: str) -> AlertThread | None:
        """The problem's open thread in ``org_id``, or None."""
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(alert_threads).where(_T.org_id == org_id, _T.open_key == dedupe_key)
                )
            ).one_or_none()
            return None if row is None else _as_thread(row)

    async def folded(self, thread_id: str) -> list[tuple[str, str, int, bool]]:
        """What a summary thread holds: ``(dedupe_key, title, count, last firing)`` per
        problem, most alerts first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                select(_D.dedupe_key, func.max(_D.title), func.count(), func.max(_D.id))
                .where(_D.thread_id == thread_id)
                .group_by(_D.dedupe_key)
                .order_by(func.count().desc(), _D.dedupe_key)
            )
            groups = list(rows)
            firing: dict[int, bool] = {}
            if groups:
                last = await conn.execute(
                    select(_D.id, _D.firing).where(_D.id.in_([g[3] for g in groups]))
                )
                firing = {int(i): bool(f) for i, f in last}
            return [(str(k), str(t), int(n), firing.get(int(i), True)) for k, t, n, i in groups]

    async def tally(self, org_id: str) -> AlertTally:
        """Where every alert of ``org_id`` is (tests and the bench check ``unaccounted``)."""
        async with self._db.read() as conn:
            counts = (
                await conn.execute(
                    select(
                        func.count(),
                        func.count().filter(_D.taken_at.is_(None)),
                        func.count().filter(_D.thread_id.is_not(None)),
                        func.count().filter(
                            and_(
                                _D.thread_id.is_(None),
                                _D.posted_ts.is_not(None),
                                _D.taken_at.is_not(None),
                            )
                        ),
                        func.count().filter(
                            and_(
                                _D.taken_at.is_not(None),
                                _D.thread_id.is_(None),
                                _D.posted_ts.is_(None),
                                or_(_D.outcome.is_(None), _D.outcome != "failed"),
                            )
                        ),
                        func.count().filter(_D.outcome == "failed"),
                    ).where(_D.org_id == org_id)
                )
            ).one()
            threads = (
                await conn.execute(
                    select(
                        func.count(),
                        func.count().filter(_T.state.in_(OPEN_STATES)),
                    ).where(_T.org_id == org_id, _T.kind == "session")
                )
            ).one()
        received, pending, in_threads, in_channel, unaccounted, failed = (int(n) for n in counts)
        return AlertTally(
            received,
            pending,
            in_threads,
            in_channel,
            unaccounted,
            int(threads[0]),
            int(threads[1]),
            failed,
        )

    # ----- inside the decision's transaction -----------------------------------------

    async def _decide(
        self,
        conn: AsyncConnection,
        row: Row[Any],
        max_open: int,
        burst_window_s: float,
        summary_channel_id: str | None,
    ) -> AlertDecision:
        now = self._clock()
        found = (
            await conn.execute(
                select(alert_threads).where(_T.org_id == row.org_id, _T.open_key == row.dedupe_key)
            )
        ).one_or_none()
        if found is not None:
            return await _follow(conn, row, _as_thread(found), now, burst_window_s)
        if not row.firing and row.posted_ts is not None:
            return AlertDecision("noted", row.id, None)
        if row.firing and await _open_count(conn, row.org_id) < max_open:
            thread = await _new_thread(
                conn,
                row,
                kind="session",
                key=row.dedupe_key,
                channel_id=str(row.channel_id),
                now=now,
                thread_ts=row.posted_ts,
            )
            return AlertDecision("start", row.id, thread, created_thread=True)
        return await _fold(conn, row, now, summary_channel_id or str(row.channel_id))


async def _follow(
    conn: AsyncConnection, row: Row[Any], thread: AlertThread, now: datetime, burst_s: float
) -> AlertDecision:
    """A repeat or a resolve of an open problem thread."""
    if not row.firing:
        await conn.execute(
            update(alert_threads)
            .where(_T.id == thread.id)
            .values(
                open_key=None, state="resolved", resolved_at=now, last_at=now, last_input_at=now
            )
        )
        return AlertDecision("resolved", row.id, _with(thread, state="resolved", resolved_at=now))
    bursting = thread.last_input_at is not None and (
        now - thread.last_input_at < timedelta(seconds=burst_s)
    )
    values: dict[str, Any] = {"firing_count": _T.firing_count + 1, "last_at": now}
    if not bursting:
        values["last_input_at"] = now
    await conn.execute(update(alert_threads).where(_T.id == thread.id).values(**values))
    counted = _with(
        thread,
        firing_count=thread.firing_count + 1,
        last_at=now,
        last_input_at=thread.last_input_at if bursting else now,
    )
    return AlertDecision("burst" if bursting else "repeat", row.id, counted)


async def _fold(
    conn: AsyncConnection, row: Row[Any], now: datetime, channel_id: str
) -> AlertDecision:
    """Into the org's storm summary thread of ``channel_id`` (a new one when none is open
    or it went quiet). One per channel: a summary lists its alerts' titles, so an alert
    routed to a private channel is never listed in another channel's summary."""
    key = f"{SUMMARY_KEY}:{channel_id}"
    found = (
        await conn.execute(select(alert_threads).where(_T.org_id == row.org_id, _T.open_key == key))
    ).one_or_none()
    summary = _as_thread(found) if found is not None else None
    if summary is not None and now - summary.last_at > timedelta(seconds=SUMMARY_REUSE_S):
        await conn.execute(
            update(alert_threads).where(_T.id == summary.id).values(open_key=None, state="closed")
        )
        summary = None
    if summary is None:
        summary = await _new_thread(
            conn, row, kind="summary", key=key, channel_id=channel_id, now=now
        )
        return AlertDecision("folded", row.id, summary, created_thread=True)
    await conn.execute(
        update(alert_threads)
        .where(_T.id == summary.id)
        .values(firing_count=_T.firing_count + 1, last_at=now)
    )
    return AlertDecision(
        "folded", row.id, _with(summary, firing_count=summary.firing_count + 1, last_at=now)
    )


async def _new_thread(
    conn: AsyncConnection,
    row: Row[Any],
    *,
    kind: str,
    key: str,
    channel_id: str,
    now: datetime,
    thread_ts: str | None = None,
) -> AlertThread:
    thread = AlertThread(
        id=uuid.uuid4().hex,
        org_id=row.org_id,
        dedupe_key=key,
        kind=kind,
        state="opening",
        channel_id=channel_id,
        thread_ts=thread_ts,
        session_id=None,
        firing_count=1,
        first_at=now,
        last_at=now,
        last_input_at=now,
        resolved_at=None,
    )
    await conn.execute(alert_threads.insert().values(open_key=key, **thread.__dict__))
    return thread


async def _open_count(conn: AsyncConnection, org_id: str) -> int:
    """The places taken under the cap: open problem threads of ``org_id`` whose session
    was not stopped, and resolved ones whose session still runs (a resolve asks it a
    question: freeing its place then would let fire-and-resolve start sessions unbounded)."""
    joined = alert_threads.outerjoin(sessions, sessions.c.id == _T.session_id)
    status = sessions.c.status
    count = await conn.scalar(
        select(func.count())
        .select_from(joined)
        .where(
            _T.org_id == org_id,
            _T.kind == "session",
            or_(
                and_(
                    _T.state.in_(OPEN_STATES),
                    or_(status.is_(None), status != SessionStatus.CANCELLED.value),
                ),
                and_(_T.state == "resolved", status == SessionStatus.RUNNING.value),
            ),
        )
    )
    return int(count or 0)


async def _thread(conn: AsyncConnection, thread_id: str) -> AlertThread | None:
    row = (await conn.execute(select(alert_threads).where(_T.id == thread_id))).one_or_none()
    return None if row is None else _as_thread(row)


def _as_thread(row: Row[Any]) -> AlertThread:
    values = dict(row._mapping)
    values.pop("open_key", None)
    return AlertThread(**values)


def _with(thread: AlertThread, **changes: Any) -> AlertThread:
    return AlertThread(**{**thread.__dict__, **changes})


def _org_lock(org_id: str) -> int:
    """A signed 64-bit advisory lock key for ``org_id``'s alert decisions."""
    digest = hashlib.sha256(f"warroom-alerts:{org_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
