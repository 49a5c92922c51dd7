"""``BackgroundTasks``: the processes sessions left running in their sandboxes (§5, §8).

Each call is one short transaction. A row is registered once per ``(session_id,
task_id)`` (a repeat is a no-op, so a tool step redone after a crash registers
nothing new); ``due`` hands each worker's watcher the rows of its sandboxes to look
at, moving their ``check_at`` on in the same statement so that no two watchers look
at one row at once; ``finish`` ends a row once (the first caller wins).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, or_, select, tuple_
from sqlalchemy.engine import RowMapping

from memory_store.clock import Clock, utc_now
from memory_store.db import Database
from memory_store.sandboxes.tables import sandboxes
from memory_store.sessions.tables import at
from memory_store.tasks.tables import background_tasks
from memory_store.upsert import insert

_T = background_tasks.c
RUNNING = "running"
ENDED_STATES = ("completed", "failed", "killed", "lost", "expired")
TAIL_KEPT = 64
"""The last bytes of a monitor's delivered output kept (``delivered_tail``)."""


@dataclass(frozen=True)
class BackgroundTask:
    """One background process of a session.

    Attributes:
        session_id: the session that started it.
        task_id: the short id the model uses (``TaskStop``), unique in the session.
        tool_use_id: the ``tool_use`` that started it: the sandbox's process name.
        kind: ``"bash"`` (a background command) or ``"monitor"``.
        sandbox_id, handle: the sandbox it runs in (``SandboxHandle`` JSON).
        description: what the model said it does (shown to the team and the model).
        output_path: the sandbox file its output goes to.
        state: ``running``, or how it ended (``ENDED_STATES``; ``expired``: a monitor
            whose deadline passed).
        exit_code: its exit status once ended normally, else None.
        started_at, ended_at: aware UTC times.
        deadline_at: a monitor's deadline (None: none, or not a monitor).
        delivered_bytes, delivered_at: how much of a monitor's output was delivered to
            the session, and when last.
        output_generation: how often its output file was found cut and followed from its
            start again (a delivery names the generation it read).
        delivered_tail: the last bytes delivered (at most ``TAIL_KEPT``), to tell a file
            that grew from one cut and written again; b"" when they are not known to end
            at ``delivered_bytes`` (a watcher of an earlier release moved the mark).
        output_head: the file's first bytes as delivered (at most ``TAIL_KEPT``; b"":
            not known), for the same.
        read_failures: looks in a row whose read of its output failed.
    """

    session_id: str
    task_id: str
    tool_use_id: str
    kind: str
    sandbox_id: str
    handle: str
    description: str
    output_path: str
    state: str = RUNNING
    exit_code: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    deadline_at: datetime | None = None
    delivered_bytes: int = 0
    delivered_at: datetime | None = None
    output_generation: int = 0
    delivered_tail: bytes = b""
    output_head: bytes = b""
    read_failures: int = 0

    @property
    def running(self) -> bool:
        """Whether it still runs as far as the database knows."""
        return self.state == RUNNING


class BackgroundTasks:
    """The ``background_tasks`` rows over ``Database`` (migrated); times from ``clock``."""

    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        self._db = db
        self._clock = clock

    async def register(self, task: BackgroundTask) -> bool:
        """Record a task now ``running``; True when new, False when already recorded.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        stmt = (
            insert(background_tasks, is_postgres=self._db.is_postgres)
            .values(
                session_id=task.session_id,
                task_id=task.task_id,
                tool_use_id=task.tool_use_id,
                kind=task.kind,
                sandbox_id=task.sandbox_id,
                handle=task.handle,
                description=task.description,
                output_path=task.output_path,
                state=RUNNING,
                exit_code=None,
                started_at=now,
                ended_at=None,
                check_at=now,
                deadline_at=task.deadline_at,
                delivered_bytes=0,
                delivered_at=None,
            )
            .on_conflict_do_nothing(index_elements=["session_id", "task_id"])
            .returning(_T.task_id)
        )
        async with self._db.write() as conn:
            return (await conn.execute(stmt)).one_or_none() is not None

    async def get(self, session_id: str, task_id: str) -> BackgroundTask | None:
        """The task, or None. Raises DatabaseUnavailable."""
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(background_tasks).where(
                        _T.session_id == session_id, _T.task_id == task_id
                    )
                )
            ).one_or_none()
        return None if row is None else _task(row._mapping)

    async def of_session(
        self, session_id: str, *, running_only: bool = False
    ) -> tuple[BackgroundTask, ...]:
        """The session's tasks, oldest first. Raises DatabaseUnavailable."""
        query = select(background_tasks).where(_T.session_id == session_id)
        if running_only:
            query = query.where(_T.state == RUNNING)
        async with self._db.read() as conn:
            rows = (await conn.execute(query.order_by(_T.started_at, _T.task_id))).all()
        return tuple(_task(row._mapping) for row in rows)

    async def due(
        self, *, scope: str, recheck_s: float, limit: int = 200
    ) -> tuple[BackgroundTask, ...]:
        """Running tasks to look at now, of sandboxes of ``scope`` or of sandboxes the
        ledger no longer records (destroyed: anyone may declare them lost); each one's
        next look is put ``recheck_s`` later, so another watcher skips it meanwhile.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        sandbox_scope = (
            select(sandboxes.c.scope)
            .where(sandboxes.c.sandbox_id == _T.sandbox_id)
            .scalar_subquery()
        )
        ready = and_(_T.state == RUNNING, _T.check_at <= at(now))
        picked = (
            select(_T.session_id, _T.task_id)
            .where(ready, or_(sandbox_scope == scope, sandbox_scope.is_(None)))
            .order_by(_T.check_at)
            .limit(limit)
        )
        async with self._db.write() as conn:
            rows = (
                await conn.execute(
                    background_tasks.update()
                    .where(tuple_(_T.session_id, _T.task_id).in_(picked), ready)
                    .values(check_at=now + timedelta(seconds=recheck_s))
                    .returning(*background_tasks.c)
                )
            ).all()
        return tuple(_task(row._mapping) for row in rows)

    async def finish(
        self, session_id: str, task_id: str, *, state: str, exit_code: int | None = None
    ) -> BackgroundTask | None:
        """End a running task as ``state``; the ended task, or None when it was not
        running (someone else ended it first).

        Raises:
            ValueError: ``state`` is not one of ``ENDED_STATES``.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if state not in ENDED_STATES:
            raise ValueError(f"state must be one of {ENDED_STATES}, not {state!r}")
        ended = await self._end(
            and_(_T.session_id == session_id, _T.task_id == task_id), state, exit_code
        )
        return ended[0] if ended else None

    async def delivered(
        self,
        session_id: str,
        task_id: str,
        *,
        from_bytes: int,
        upto_bytes: int,
        generation: int = 0,
        tail: bytes = b"",
        head: bytes = b"",
    ) -> bool:
        """Record that a running monitor's output of ``generation`` from ``from_bytes`` up
        to ``upto_bytes`` was delivered, its last bytes ``tail`` and the file's first
        ``head`` (``TAIL_KEPT`` of each are kept); False (nothing changed) when it is not
        running or its mark is no longer there (another watcher delivered it, or found the
        file cut).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        return await self._move_mark(
            session_id,
            task_id,
            from_bytes,
            generation,
            delivered_bytes=upto_bytes,
            delivered_tail=tail[-TAIL_KEPT:],
            delivered_tail_at=upto_bytes,
            output_head=head[:TAIL_KEPT] or None,
            read_failures=0,
        )

    async def restarted(
        self, session_id: str, task_id: str, *, from_bytes: int, generation: int
    ) -> bool:
        """Record that a running monitor's output file was found cut (shorter than
        ``from_bytes``, or not ending in what was delivered): its mark moves back to 0 in
        the next generation. False when the mark was no longer there (another watcher
        moved it first).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        return await self._move_mark(
            session_id,
            task_id,
            from_bytes,
            generation,
            delivered_bytes=0,
            delivered_tail=None,
            delivered_tail_at=None,
            output_head=None,
            output_generation=generation + 1,
        )

    async def read_failed(self, session_id: str, task_id: str) -> int:
        """Count one more look in a row whose read of the task's output failed; returns
        the count (0: the row is gone).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        async with self._db.write() as conn:
            count = (
                await conn.execute(
                    background_tasks.update()
                    .where(_T.session_id == session_id, _T.task_id == task_id)
                    .values(read_failures=_T.read_failures + 1)
                    .returning(_T.read_failures)
                )
            ).scalar_one_or_none()
        return int(count or 0)

    async def _move_mark(
        self, session_id: str, task_id: str, from_bytes: int, generation: int, **values: Any
    ) -> bool:
        now = self._clock()
        async with self._db.write() as conn:
            row = (
                await conn.execute(
                    background_tasks.update()
                    .where(
                        _T.session_id == session_id,
                        _T.task_id == task_id,
                        _T.state == RUNNING,
                        _T.delivered_bytes == from_bytes,
                        _T.output_generation == generation,
                    )
                    .values(delivered_at=now, **values)
                    .returning(_T.task_id)
                )
            ).one_or_none()
        return row is not None

    async def kill_all(self, session_id: str) -> tuple[BackgroundTask, ...]:
        """End every running task of the session as ``killed`` (``stop``); returns them,
        for the caller to kill their processes. Raises DatabaseUnavailable."""
        return await self._end(_T.session_id == session_id, "killed", None)

    async def _end(
        self, where: ColumnElement[bool], state: str, exit_code: int | None
    ) -> tuple[BackgroundTask, ...]:
        now = self._clock()
        async with self._db.write() as conn:
            rows = (
                await conn.execute(
                    background_tasks.update()
                    .where(where, _T.state == RUNNING)
                    .values(state=state, exit_code=exit_code, ended_at=now)
                    .returning(*background_tasks.c)
                )
            ).all()
        return tuple(_task(row._mapping) for row in rows)

    async def running_count(self) -> int:
        """How many tasks run, all sessions together (metrics, benchmarks)."""
        async with self._db.read() as conn:
            count = await conn.scalar(select(func.count()).where(_T.state == RUNNING))
        return int(count or 0)


def live_in(sandbox_id: ColumnElement[str]) -> ColumnElement[bool]:
    """SQL: a running task exists in the sandbox ``sandbox_id`` names (the ledger never
    claims such a sandbox)."""
    return exists().where(_T.sandbox_id == sandbox_id, _T.state == RUNNING)


def _task(row: RowMapping) -> BackgroundTask:
    return BackgroundTask(
        session_id=row["session_id"],
        task_id=row["task_id"],
        tool_use_id=row["tool_use_id"],
        kind=row["kind"],
        sandbox_id=row["sandbox_id"],
        handle=row["handle"],
        description=row["description"],
        output_path=row["output_path"],
        state=row["state"],
        exit_code=row["exit_code"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        deadline_at=row["deadline_at"],
        delivered_bytes=int(row["delivered_bytes"]),
        delivered_at=row["delivered_at"],
        output_generation=int(row["output_generation"]),
        delivered_tail=(
            bytes(row["delivered_tail"] or b"")
            if row["delivered_tail_at"] == row["delivered_bytes"]
            else b""
        ),
        output_head=bytes(row["output_head"] or b""),
        read_failures=int(row["read_failures"]),
    )
