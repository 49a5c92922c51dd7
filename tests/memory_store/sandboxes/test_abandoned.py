"""A sandbox use of a process that died stops counting as soon as the death is known, and
the sandbox is adopted by a live process of its scope (issue #26: a SIGKILLed ``serve``'s
jails outlived every later restart and clean stop, its use counted until its timeout).

Real SQLite and PostgreSQL. A dead process is a real one that exited (its PID is free);
on PostgreSQL a ``+live`` owner is judged by its liveness lock (``OwnerLiveness``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_store import LIVE_MARK, Database, OwnerLiveness, SandboxLedgerStore, process_host
from tests.memory_store.conftest import SQLITE_FILE

HOUR_S = 3600.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or the run's PostgreSQL URL (resolved outside the loop)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(request.param)


@pytest.fixture
async def db(backend: str, tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Database]:
    """A migrated database of each backend."""
    url = None if backend == "sqlite" else backend
    if url is None:
        shutil.copyfile(sqlite_template, tmp_path / SQLITE_FILE)
    made = Database.from_url(url, data_dir=tmp_path)
    try:
        if url is not None:
            await made.migrate()
        yield made
    finally:
        await made.dispose()


def _dead_owner() -> str:
    """The owner id of a process of this host that ran and exited (reaped)."""
    done = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    return f"{process_host()}:{int(done.stdout)}:dead01"


async def _sandbox(ledger: SandboxLedgerStore, scope: str) -> str:
    sandbox_id = f"sbx-{uuid.uuid4().hex[:12]}"
    handle = f'{{"sandbox_id": "{sandbox_id}"}}'
    await ledger.record(sandbox_id, handle_json=handle, scope=scope, session_id=None)
    return sandbox_id


def _scope() -> str:
    return f"local:host-{uuid.uuid4().hex[:8]}:/srv/sbx"  # the database is shared


async def test_a_dead_processs_use_stops_counting_and_its_sandbox_is_adopted(
    db: Database,
) -> None:
    scope = _scope()
    dead = SandboxLedgerStore(db, owner=_dead_owner())
    live = SandboxLedgerStore(db)
    # Given a sandbox whose process died in the middle of an hour-long command
    sandbox = await _sandbox(dead, scope)
    await dead.begin_use(sandbox, busy_s=HOUR_S)
    assert not await live.claim_idle(sandbox, idle_s=0, hold_s=60)

    # When a live process of the scope looks for abandoned sandboxes
    adopted = await live.take_abandoned(scope=scope)

    # Then the dead use no longer counts, and the sandbox is the live process's own
    assert [sandbox_id for sandbox_id, _ in adopted] == [sandbox]
    assert await live.claim_idle(sandbox, idle_s=0, hold_s=60)
    await live.release(sandbox)
    # once: a second look finds nothing more to take
    assert await live.take_abandoned(scope=scope) == ()


async def test_an_adopter_that_dies_passes_the_sandbox_on(db: Database) -> None:
    scope = _scope()
    first = SandboxLedgerStore(db, owner=_dead_owner())
    sandbox = await _sandbox(first, scope)
    # Given a sandbox adopted by a process that then dies in turn
    adopter_process = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        owner = f"{process_host()}:{adopter_process.pid}:adopt1"
        adopter = SandboxLedgerStore(db, owner=owner)
        assert [i for i, _ in await adopter.take_abandoned(scope=scope)] == [sandbox]
        heir = SandboxLedgerStore(db)
        assert await heir.take_abandoned(scope=scope) == ()  # the adopter still runs
    finally:
        adopter_process.kill()
        await adopter_process.wait()
    # Then the next live process takes it
    assert [i for i, _ in await heir.take_abandoned(scope=scope)] == [sandbox]


async def test_a_live_processs_use_keeps_counting(db: Database) -> None:
    scope = _scope()
    running = SandboxLedgerStore(db)  # this process: alive
    other = SandboxLedgerStore(db)
    sandbox = await _sandbox(running, scope)
    await running.begin_use(sandbox, busy_s=HOUR_S)

    assert await other.take_abandoned(scope=scope) == ()
    assert not await other.claim_idle(sandbox, idle_s=0, hold_s=60)
    await running.end_use(sandbox)
    assert await other.claim_idle(sandbox, idle_s=0, hold_s=60)


async def test_only_the_dead_processs_share_of_the_uses_stops_counting(db: Database) -> None:
    scope = _scope()
    dead = SandboxLedgerStore(db, owner=_dead_owner())
    running = SandboxLedgerStore(db)
    sweeper = SandboxLedgerStore(db)
    sandbox = await _sandbox(dead, scope)
    # Given two uses of the dead process and one of a live one
    await dead.begin_use(sandbox, busy_s=HOUR_S)
    await dead.begin_use(sandbox, busy_s=HOUR_S)
    await running.begin_use(sandbox, busy_s=HOUR_S)

    # Then the sandbox is not adopted (a live process knows it), and the live use counts
    assert await sweeper.take_abandoned(scope=scope) == ()
    assert not await sweeper.claim_idle(sandbox, idle_s=0, hold_s=60)
    # until it ends
    await running.end_use(sandbox)
    assert await sweeper.claim_idle(sandbox, idle_s=0, hold_s=60)


async def test_another_scopes_sandboxes_are_left_to_their_own_processes(db: Database) -> None:
    dead = SandboxLedgerStore(db, owner=_dead_owner())
    sandbox = await _sandbox(dead, _scope())
    await dead.begin_use(sandbox, busy_s=HOUR_S)

    assert await SandboxLedgerStore(db).take_abandoned(scope=_scope()) == ()
    assert not await SandboxLedgerStore(db).claim_idle(sandbox, idle_s=0, hold_s=60)


async def test_an_owner_of_another_host_is_never_judged_by_its_pid(db: Database) -> None:
    scope = _scope()
    elsewhere = SandboxLedgerStore(db, owner=f"not-{socket.gethostname()}:1999999:x")
    sandbox = await _sandbox(elsewhere, scope)
    await elsewhere.begin_use(sandbox, busy_s=HOUR_S)

    assert await SandboxLedgerStore(db).take_abandoned(scope=scope) == ()


@pytest.mark.postgres
async def test_a_live_marked_owner_of_another_host_is_judged_by_its_liveness_lock(
    postgres_url: str, tmp_path: Path
) -> None:
    db = Database.from_url(postgres_url, data_dir=tmp_path)
    await db.migrate()
    # an owner of another host (or PID namespace): only its lock can tell it is dead
    owner = f"elsewhere-{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}{LIVE_MARK}"
    alive = OwnerLiveness(db, owner)
    try:
        await alive.start()
        scope = _scope()
        worker = SandboxLedgerStore(db, owner=owner)
        sweeper = SandboxLedgerStore(db, suspected_for_s=0.0)
        patient = SandboxLedgerStore(db)  # believes a missing lock only after 30 s
        sandbox = await _sandbox(worker, scope)
        await worker.begin_use(sandbox, busy_s=HOUR_S)
        # While it holds its lock, its use counts
        assert await sweeper.take_abandoned(scope=scope) == ()

        # When its process dies (the server sees the lock's connection close)
        alive._conn.terminate()
        alive._conn = None
        await alive.aclose()

        # Then a process that waits out a dropped connection does not believe it yet
        assert await patient.take_abandoned(scope=scope) == ()
        # and the next look of one that does not wait takes the sandbox
        for _ in range(100):
            if await sweeper.take_abandoned(scope=scope):
                break
            await asyncio.sleep(0.02)  # polling the server's view, not synchronising on time
        else:
            pytest.fail("the dead owner's sandbox was not adopted")
        assert await sweeper.claim_idle(sandbox, idle_s=0, hold_s=60)
    finally:
        await alive.aclose()
        await db.dispose()


async def test_an_end_after_a_stale_reset_does_not_end_anothers_use(db: Database) -> None:
    scope = _scope()
    first, second = SandboxLedgerStore(db), SandboxLedgerStore(db)
    sandbox = await _sandbox(first, scope)
    # Given a use that outlived its busy time (the ledger stopped counting it) and then
    # another process's use
    await first.begin_use(sandbox, busy_s=-1.0)
    await second.begin_use(sandbox, busy_s=HOUR_S)
    # When the first use ends late
    await first.end_use(sandbox)
    # Then the second one still counts
    assert not await first.claim_idle(sandbox, idle_s=0, hold_s=60)
    await second.end_use(sandbox)
    assert await first.claim_idle(sandbox, idle_s=0, hold_s=60)


async def test_two_processes_forgetting_one_dead_use_at_once_forget_it_once(
    db: Database,
) -> None:
    scope = _scope()
    dead = SandboxLedgerStore(db, owner=_dead_owner())
    live = SandboxLedgerStore(db)
    sandbox = await _sandbox(dead, scope)
    await dead.begin_use(sandbox, busy_s=HOUR_S)
    await live.begin_use(sandbox, busy_s=HOUR_S)
    # When two processes look for the dead one's uses at the same moment
    await asyncio.gather(
        SandboxLedgerStore(db).take_abandoned(scope=scope),
        SandboxLedgerStore(db).take_abandoned(scope=scope),
    )
    # Then the live use still counts
    assert not await SandboxLedgerStore(db).claim_idle(sandbox, idle_s=0, hold_s=60)
    await live.end_use(sandbox)
    assert await SandboxLedgerStore(db).claim_idle(sandbox, idle_s=0, hold_s=60)
