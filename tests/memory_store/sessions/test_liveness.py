"""A lease whose owner's process died ends at the next sweep, not at its expiry (issue #31).

Real PostgreSQL: the owner's liveness lock is held by ``OwnerLiveness`` on a connection
of its own; "the process dies" is that connection going away (as the kernel closes a
SIGKILLed process's sockets), without anything being released by the owner itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import text

from memory_store import LIVE_MARK, Database, OwnerLiveness, SessionStore
from tests.memory_store.session_support import open_session

pytestmark = pytest.mark.postgres

LONG_LEASE_S = 300.0


async def _requeued(store: SessionStore, session_id: str) -> bool:
    swept = await store.sweep(max_crashes=5, stale_after_s=3600.0, session_ids=[session_id])
    return session_id in {w.session_id for w in swept.requeue}


async def test_a_dead_owners_step_is_recovered_by_the_next_sweep(pg_db: Database) -> None:
    # Given a step claimed for 5 minutes by a worker holding its liveness lock
    store = SessionStore(pg_db)
    owner = OwnerLiveness(pg_db, f"test:{id(pg_db)}:a{LIVE_MARK}")
    await owner.start()
    session_id, token = await open_session(store)
    claim = await store.claim(session_id, token, worker_id=owner.owner, lease_s=LONG_LEASE_S)
    assert claim is not None

    # While it lives, sweeps leave the step with it
    assert not await _requeued(store, session_id)

    # When its process dies: the server sees its connection close, nothing is released
    owner._conn.terminate()  # as SIGKILL does: no unlock, the socket just closes
    owner._conn = None
    await owner.aclose()

    # Then a sweep (within a second: the server ends the backend first) hands the step
    # out again, and another worker claims it, counting the crash
    for _ in range(50):
        if await _requeued(store, session_id):
            break
        await asyncio.sleep(0.02)  # polling the server's view, not synchronising on time
    else:
        pytest.fail("the dead owner's lease was not ended by a sweep")
    again = await store.claim(session_id, token, worker_id="other", lease_s=5.0)
    assert again is not None
    assert again.crash_count == 1


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from memory_store import Database, OwnerLiveness, SessionStore

    async def main(url, data_dir, session_id, token, owner):
        db = Database.from_url(url, data_dir=Path(data_dir))
        alive = OwnerLiveness(db, owner)
        await alive.start()
        claim = await SessionStore(db).claim(session_id, token, worker_id=owner, lease_s=300.0)
        print("held" if claim else "refused", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main(*sys.argv[1:]))
    """
)


async def test_a_sigkilled_worker_process_loses_its_step_at_the_next_sweep(
    pg_db: Database, postgres_url: str, tmp_path: Path
) -> None:
    # Given a real process holding its liveness lock and a step claimed for 5 minutes
    store = SessionStore(pg_db)
    session_id, token = await open_session(store)
    owner = f"test:{os.getpid()}:d{LIVE_MARK}"
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _HOLDER,
        postgres_url,
        str(tmp_path),
        session_id,
        token,
        owner,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        line = await asyncio.wait_for(holder.stdout.readline(), 60)
        assert line.strip() == b"held"
        assert not await _requeued(store, session_id)

        # When the process is SIGKILLed (it releases nothing itself)
        holder.send_signal(signal.SIGKILL)
        await asyncio.wait_for(holder.wait(), 10)
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()

    # Then a sweep hands the step out again while its lease had minutes to run
    for _ in range(100):
        if await _requeued(store, session_id):
            break
        await asyncio.sleep(0.05)  # polling the server's view, not synchronising on time
    else:
        pytest.fail("the killed process's lease was not ended by a sweep")
    assert await store.claim(session_id, token, worker_id="other", lease_s=5.0) is not None


async def test_a_live_slow_owner_keeps_its_step(pg_db: Database) -> None:
    # Given a live owner holding its lock, however slow its steps are
    store = SessionStore(pg_db)
    owner = OwnerLiveness(pg_db, f"test:{id(pg_db)}:b{LIVE_MARK}")
    await owner.start()
    try:
        session_id, token = await open_session(store)
        assert await store.claim(session_id, token, worker_id=owner.owner, lease_s=LONG_LEASE_S)

        # When many sweeps run
        requeued = [await _requeued(store, session_id) for _ in range(5)]

        # Then none takes its step, and no other worker can claim it
        assert requeued == [False] * 5
        assert await store.claim(session_id, token, worker_id="other", lease_s=5.0) is None
    finally:
        await owner.aclose()


async def test_an_owner_without_the_mark_is_judged_by_its_lease_alone(
    pg_db: Database,
) -> None:
    # Given a step held by a worker of an earlier release (no liveness lock, no mark)
    store = SessionStore(pg_db)
    session_id, token = await open_session(store)
    assert await store.claim(session_id, token, worker_id="old:1:abc", lease_s=LONG_LEASE_S)

    # Then sweeps leave it alone until its lease runs out
    assert not await _requeued(store, session_id)
    assert await store.claim(session_id, token, worker_id="other", lease_s=5.0) is None


async def test_a_lost_connection_takes_the_lock_again(pg_db: Database) -> None:
    # Given a live owner whose lock connection the server dropped (a restart, say)
    owner = OwnerLiveness(pg_db, f"test:{id(pg_db)}:c{LIVE_MARK}", check_s=0.05)
    await owner.start()
    try:
        owner._conn.terminate()

        # When its check notices, it reconnects and takes the lock again
        await asyncio.wait_for(_until_retaken(owner), 10)

        # Then the server shows the lock held again
        async with pg_db.read() as conn:
            held = await conn.scalar(_HELD, {"owner": owner.owner})
        assert held == 1
    finally:
        await owner.aclose()


async def _until_retaken(owner: OwnerLiveness) -> None:
    # the owner's own check runs on its schedule: poll what it left (no event to await)
    while owner._conn is None or owner._conn.is_closed() or not owner.held.is_set():  # noqa: ASYNC110
        await asyncio.sleep(0.02)


def test_an_owner_id_without_the_mark_is_refused(tmp_path: Path) -> None:
    db = Database.from_url(None, data_dir=tmp_path)
    with pytest.raises(ValueError, match="ends in"):
        OwnerLiveness(db, "host:1:abc")


_HELD = text(
    """SELECT count(*) FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(:owner, 0)"""
)
