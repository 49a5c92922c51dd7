"""Sandboxes shared by workers through the database: no worker freezes a sandbox under
another worker's command (issue 19.16), and the jails of ended sessions, of idle ones
and of stopping workers are destroyed (issues 12.4, 13.6)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.durable.sandboxes import SandboxKeeping
from bot.durable.wiring import Runtime
from bot.settings import Settings
from harness import Checkpoint, Requester
from harness.sandbox.session import SandboxWorkspaces
from memory_store import Database, SandboxLedgerStore, SessionStore
from sandbox_client import Health, LocalConfig, LocalProvider, SandboxHandle, SandboxManager
from sandbox_client.providers.local import procfs
from tests.conftest import require_bwrap
from tests.memory_store.session_support import ManualClock, open_session
from tests.sandbox_client.conftest import wait_for

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A short sandbox state directory, every jail in it destroyed afterwards."""
    require_bwrap()
    path = Path(tempfile.mkdtemp(prefix="wr-shr-"))
    yield path
    asyncio.run(LocalProvider(LocalConfig(state_dir=path)).destroy_all())
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite, else the run's PostgreSQL database."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


@pytest.fixture
async def db(database_url: str | None, tmp_path: Path) -> AsyncIterator[Database]:
    """A migrated database of each backend."""
    database = Database.from_url(database_url, data_dir=tmp_path)
    await database.migrate()
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture
def clock() -> ManualClock:
    """The database ledger's clock."""
    return ManualClock()


def worker(db: Database, state_dir: Path, clock: ManualClock) -> SandboxManager:
    """One worker's manager: its own provider and ledger client over the shared database."""
    return SandboxManager(
        LocalProvider(LocalConfig(state_dir=state_dir, network="none")),
        idle_suspend_s=30,
        idle_destroy_s=900,
        ledger=SandboxLedgerStore(db, clock=clock),
        scope=f"local:test:{state_dir}",
    )


def alive(handle: SandboxHandle) -> bool:
    """True while the jail's init runs."""
    return handle.pid is not None and procfs.is_alive(handle.pid, handle.pid_start_ticks)


async def test_a_command_running_through_one_worker_is_not_frozen_by_anothers_idle_sweep(
    db: Database, state_dir: Path, clock: ManualClock
) -> None:
    one, other = worker(db, state_dir, clock), worker(db, state_dir, clock)
    cp = Checkpoint("s-shared", "T1", "C1", Requester("U1"))
    try:
        # Given a session whose earlier command ran through the other worker
        earlier = SandboxWorkspaces(other).open(cp)
        assert (await earlier.exec("tu-1", "echo first", timeout_s=10)).stdout == "first\n"
        cp = replace(cp, sandbox=earlier.handle_json())
        handle = SandboxHandle.from_json(earlier.handle_json() or "")
        # When its next command runs through this worker, past the other's idle timer
        now = SandboxWorkspaces(one).open(cp)
        command = "while [ ! -e /workspace/go ]; do sleep 0.01; done; echo finished"
        running = asyncio.create_task(now.exec("tu-2", command, timeout_s=60))
        async with one.provider.connect(handle) as probe:
            await wait_for(lambda: probe.get_process("tu-2"), what="the command to start")
            clock.advance(100)  # past the idle timer (30 s), within the command's timeout

            # Then the other worker's sweep leaves the sandbox running
            assert await other.suspend_idle() == ()
            assert await other.provider.health(handle) is Health.READY
            await probe.write_file("/workspace/go", b"")
        result = await asyncio.wait_for(running, timeout=30)
        assert (result.exit_code, result.stdout) == (0, "finished\n")
        # and once the command is over and the sandbox idle, it is suspended after all
        clock.advance(31)
        assert await other.suspend_idle() == (handle.sandbox_id,)
        assert await other.provider.health(handle) is Health.SUSPENDED
    finally:
        await one.aclose()
        await other.aclose()


async def test_the_sandbox_of_a_cancelled_session_is_destroyed_by_the_next_sweep(
    db: Database, state_dir: Path, clock: ManualClock
) -> None:
    sessions = SessionStore(db, clock=clock)
    session_id, _ = await open_session(sessions)
    manager = worker(db, state_dir, clock)
    keeping = SandboxKeeping(manager, sessions)
    try:
        used = await manager.ensure(None, session_id=session_id)
        assert await keeping.sweep() == ()
        # When the session is stopped (its checkpoint may not name the sandbox yet)
        await sessions.cancel(session_id, actor="U1")

        assert await keeping.sweep() == (used.handle.sandbox_id,)
        assert not alive(used.handle)
    finally:
        await manager.aclose()


async def test_a_stopping_worker_leaves_no_jail_but_spares_one_in_use_elsewhere(
    db: Database, state_dir: Path, clock: ManualClock
) -> None:
    sessions = SessionStore(db, clock=clock)
    stopping, staying = worker(db, state_dir, clock), worker(db, state_dir, clock)
    keeping = SandboxKeeping(stopping, sessions)
    idle = await stopping.ensure(None)
    shared = await stopping.ensure(None)
    try:
        async with staying.use(shared.handle, busy_s=60):
            # When a worker stops while another runs a command in one of its sandboxes
            destroyed = await keeping.shutdown()

            assert destroyed == (idle.handle.sandbox_id,)
            assert not alive(idle.handle)
            assert alive(shared.handle)
        # the other worker's sweep destroys it once unused
        clock.advance(901)
        assert await SandboxKeeping(staying, sessions).sweep() == (shared.handle.sandbox_id,)
        assert not alive(shared.handle)
    finally:
        await staying.aclose()


class QuietThread:
    """A ``ThreadPoster`` that posts nothing (no step runs in these tests)."""

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        return "0.0"

    async def show_progress(self, **_: object) -> None:
        return None


async def test_a_worker_runtime_that_stops_leaves_no_jail_behind(state_dir: Path) -> None:
    data_dir = state_dir / "d"
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
        database_url=None,
        redis_url=None,
        data_dir=data_dir,
    )

    async def enqueue(session_id: str, token: str) -> None:
        return None

    runtime = await Runtime.open(
        settings,
        enqueue=enqueue,
        reporter=QuietThread(),
        model=object(),  # type: ignore[arg-type]
    )
    used = [await runtime.manager.ensure(None, session_id=f"s-{n}") for n in range(3)]
    await runtime.manager.release(used[0].handle)  # one parked after its answer
    assert all(alive(r.handle) for r in used)

    # When the worker stops (what serve's in-process worker and `warroom worker` do)
    await runtime.close()

    assert not any(alive(r.handle) for r in used)
    provider = LocalProvider(LocalConfig(state_dir=data_dir / "sbx"))
    assert await provider.list_sandboxes() == ()
