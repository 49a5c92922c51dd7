"""Owner liveness: a lease whose holder's process is gone ends at once, not at its expiry.

A lease is the price of a resume after a worker dies: a SIGKILLed worker's step is taken
over only once its lease has run out (5 s by default), and a shorter lease makes late
renewals of live, loaded workers lose their steps (issue #31). On PostgreSQL a worker
process can say it is alive without a clock: it holds a session-level advisory lock for
as long as it runs, on a connection of its own (``OwnerLiveness``). The kernel closes a
dead process's sockets, the server ends its backend and releases the lock, and the next
sweep sees a lease whose owner holds no lock: it ends that lease then (``expire_dead``),
and the usual re-enqueue follows in the same sweep. A live but slow worker keeps its
lock, so nothing changes for it: its lease still lasts ``lease_s``. A database restart
drops every lock at once: for ``RESTART_GRACE_S`` after it, leases are judged by their
expiry alone, while the live workers take their locks again.

Only owners that hold such a lock take part: their id ends in ``LIVE_MARK``. An owner id
without it (a worker of an earlier release during a rolling deploy, the embedded SQLite
runtime) is judged by its lease alone.

The lock's key is ``hashtextextended(owner, 0)``, computed by the server on both sides;
``pg_locks`` shows an advisory lock on a bigint key as ``classid`` (its high 32 bits) and
``objid`` (its low 32 bits) with ``objsubid`` 1 (PostgreSQL's documentation, "pg_locks").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Iterable
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.db import Database
from memory_store.errors import DatabaseUnavailable

__all__ = ["LIVE_MARK", "OwnerLiveness", "dead_owners", "expire_dead", "process_host"]

log = logging.getLogger(__name__)

LIVE_MARK = "+live"
"""The end of a lease owner's id whose process holds its liveness lock while it runs."""

RESTART_GRACE_S = 10.0
"""For this long after the database server started, leases are judged by their expiry
alone: every live worker lost its lock with the restart and takes it again within
``OwnerLiveness``'s check (about a second)."""

_LOCK = "SELECT pg_advisory_lock(hashtextextended($1, 0))"

_EXPIRE_DEAD = text(
    """WITH held AS MATERIALIZED (
      SELECT (l.classid::bigint << 32) | l.objid::bigint AS key
      FROM pg_locks l
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    )
    UPDATE sessions SET lease_until = now() - interval '1 millisecond'
    WHERE status = 'running'
      AND lease_until >= now()
      AND lease_owner LIKE :pattern
      AND pg_postmaster_start_time() < now() - make_interval(secs => :grace_s)
      AND hashtextextended(lease_owner, 0) NOT IN (SELECT key FROM held)
    RETURNING id"""
)


_DEAD_LIVE_OWNERS = text(
    """WITH held AS MATERIALIZED (
      SELECT (l.classid::bigint << 32) | l.objid::bigint AS key
      FROM pg_locks l
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    )
    SELECT o.owner FROM unnest(CAST(:owners AS text[])) AS o(owner)
    WHERE pg_postmaster_start_time() < now() - make_interval(secs => :grace_s)
      AND hashtextextended(o.owner, 0) NOT IN (SELECT key FROM held)"""
)


def process_host() -> str:
    """This process's place in an owner id: ``<host name>@<PID namespace inode>`` (two
    containers may share a host name but not a PID namespace: a PID is judged only where
    both match), or the host name alone where the namespace cannot be read."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return socket.gethostname()
    return f"{socket.gethostname()}@{namespace}"


async def dead_owners(
    conn: AsyncConnection, owners: Iterable[str], *, is_postgres: bool
) -> tuple[frozenset[str], frozenset[str]]:
    """Which of ``owners`` (ids ``<process_host()>:<pid>:<random>``, see ``bot``'s
    ``make_worker_id``) are dead processes: ``(dead, suspected)``.

    An id of this host and PID namespace (``process_host``) is judged by its PID: no such
    process (or a zombie) is ``dead``; a reused PID makes a dead owner look alive, never
    the reverse. Another id ending in ``LIVE_MARK`` is judged on PostgreSQL by its liveness
    lock, on any host: not held is only ``suspected`` (a live process whose connection
    dropped takes its lock again within seconds; the caller waits before believing it),
    and never during ``RESTART_GRACE_S`` after a server start. Any other id is alive.
    """
    wanted = sorted(set(owners))
    here = process_host()
    dead: set[str] = set()
    remote: list[str] = []
    for owner in wanted:
        host, _, rest = owner.partition(":")
        pid = rest.partition(":")[0]
        if host == here and "@" in here and pid.isdigit():
            if not _pid_runs(int(pid)):
                dead.add(owner)
        elif owner.endswith(LIVE_MARK):
            remote.append(owner)
    suspected: set[str] = set()
    if remote and is_postgres:
        params = {"owners": remote, "grace_s": RESTART_GRACE_S}
        found = await conn.execute(_DEAD_LIVE_OWNERS, params)
        suspected.update(str(row.owner) for row in found)
    return frozenset(dead), frozenset(suspected)


def _pid_runs(pid: int) -> bool:
    """Whether a process ``pid`` runs in this PID namespace: it exists (signal 0) and is
    not a zombie (its state in ``/proc/<pid>/stat``, proc(5), where there is one)."""
    if pid <= 0:
        return True  # not a process id we can judge
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[:1]
    except OSError:
        return True
    return state != [b"Z"]


async def expire_dead(conn: AsyncConnection) -> tuple[str, ...]:
    """End the leases of running sessions whose owner (an id ending in ``LIVE_MARK``) no
    longer holds its liveness lock: its process died. PostgreSQL only; run inside the
    sweep's transaction, before its re-enqueue (which then finds them expired).

    Returns the ids of the sessions whose lease ended.
    """
    params = {"pattern": f"%{LIVE_MARK}", "grace_s": RESTART_GRACE_S}
    result = await conn.execute(_EXPIRE_DEAD, params)
    return tuple(sorted(str(row.id) for row in result.all()))


class OwnerLiveness:
    """Holds ``owner``'s liveness lock on a PostgreSQL connection of its own while the
    process runs (``start`` … ``aclose``); on SQLite it does nothing.

    The connection is checked every ``check_s`` seconds; a lost one (the server restarted)
    is replaced and the lock taken again, so a live worker is judged dead only while the
    database itself is away (its steps are then fenced at their commit, never run twice).
    """

    def __init__(self, db: Database, owner: str, *, check_s: float = 1.0) -> None:
        """``owner`` must end in ``LIVE_MARK`` (ValueError otherwise)."""
        if not owner.endswith(LIVE_MARK):
            raise ValueError(f"a live owner's id ends in {LIVE_MARK!r}: {owner!r}")
        self._db = db
        self.owner = owner
        self._check_s = check_s
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None
        self.held = asyncio.Event()

    async def start(self) -> None:
        """Take the lock (PostgreSQL; returns at once on SQLite) and keep it.

        Raises:
            DatabaseUnavailable: the first connection could not be made.
        """
        if not self._db.is_postgres:
            return
        try:
            await self._lock()
        except (OSError, TimeoutError) as error:
            raise DatabaseUnavailable(f"liveness lock: {error}") from error
        self._task = asyncio.create_task(self._keep(), name="owner-liveness")

    async def aclose(self) -> None:
        """Release the lock (its connection closes); idempotent."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._drop()

    async def _lock(self) -> None:
        import asyncpg  # PostgreSQL's driver (SQLAlchemy's dialect imports it too)

        url = self._db.engine.url
        self._conn = await asyncpg.connect(
            host=url.host,
            port=url.port,
            user=url.username,
            password=url.password,
            database=url.database,
            timeout=10,
            server_settings={"application_name": f"warroom-liveness {self.owner}"[:63]},
        )
        await self._conn.execute(_LOCK, self.owner)
        self.held.set()

    async def _drop(self) -> None:
        self.held.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 5)
            if not conn.is_closed():
                conn.terminate()

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self._check_s)
            try:
                await asyncio.wait_for(self._conn.fetchval("SELECT 1"), self._check_s * 5)
                continue
            except Exception as error:  # a lost connection: take the lock again
                log.warning("liveness lock of %s lost (%s): taking it again", self.owner, error)
            await self._drop()
            try:
                await self._lock()
            except Exception as error:
                log.warning("liveness lock of %s not taken again yet: %s", self.owner, error)
                await self._drop()
