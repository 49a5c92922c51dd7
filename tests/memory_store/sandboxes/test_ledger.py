"""The sandbox ledger's contract, one suite for every ledger: the in-process one
(``sandbox_client.MemoryLedger``) and the database one on SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_store import Database, SandboxLedgerStore, SessionStore
from sandbox_client import MemoryLedger, SandboxLedger
from tests.memory_store.conftest import SQLITE_FILE
from tests.memory_store.session_support import ManualClock, open_session

LEDGERS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


class Ledgers:
    """A ledger under test, its clock, and (for database ledgers) the session store."""

    def __init__(
        self, ledger: SandboxLedger, clock: ManualClock, sessions: SessionStore | None
    ) -> None:
        self.ledger = ledger
        self.clock = clock
        self.sessions = sessions
        self.scope = f"local:host-{uuid.uuid4().hex[:8]}:/srv/sbx"  # the database is shared

    async def new(self, session_id: str | None = None, scope: str | None = None) -> str:
        """Record a new sandbox (in ``self.scope`` by default); returns its id."""
        sandbox_id = f"sbx-{uuid.uuid4().hex[:12]}"
        handle = f'{{"sandbox_id": "{sandbox_id}"}}'
        await self.ledger.record(
            sandbox_id, handle_json=handle, scope=scope or self.scope, session_id=session_id
        )
        return sandbox_id


@pytest.fixture(params=LEDGERS)
def backend(request: pytest.FixtureRequest) -> str:
    """``memory``, ``sqlite`` or the run's PostgreSQL URL (resolved outside the loop)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(request.param)


@pytest.fixture
async def ledgers(backend: str, tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Ledgers]:
    """Each ledger with a manual clock."""
    clock = ManualClock()
    if backend == "memory":
        start = clock.now

        def seconds() -> float:
            return (clock.now - start).total_seconds()

        yield Ledgers(MemoryLedger(seconds), clock, None)
        return
    url = None if backend == "sqlite" else backend
    if url is None:
        shutil.copyfile(sqlite_template, tmp_path / SQLITE_FILE)
    db = Database.from_url(url, data_dir=tmp_path)
    try:
        if url is not None:
            await db.migrate()
        yield Ledgers(SandboxLedgerStore(db, clock=clock), clock, SessionStore(db, clock=clock))
    finally:
        await db.dispose()


async def test_a_use_in_flight_blocks_suspension_however_old_the_last_use(
    ledgers: Ledgers,
) -> None:
    ledger, clock = ledgers.ledger, ledgers.clock
    sandbox = await ledgers.new()
    # Given a use that began long ago and still runs (within its busy time)
    assert await ledger.begin_use(sandbox, busy_s=3600) == 0.0
    clock.advance(600)

    assert not await ledger.claim_idle(sandbox, idle_s=30, hold_s=60)
    # When it ends, the sandbox is idle only once idle_s passed again
    await ledger.end_use(sandbox)
    assert not await ledger.claim_idle(sandbox, idle_s=30, hold_s=60)
    clock.advance(31)
    assert await ledger.claim_idle(sandbox, idle_s=30, hold_s=60)


async def test_a_claim_holds_off_new_uses_until_released_and_excludes_other_claims(
    ledgers: Ledgers,
) -> None:
    ledger, clock = ledgers.ledger, ledgers.clock
    sandbox = await ledgers.new()
    clock.advance(100)
    assert await ledger.claim_idle(sandbox, idle_s=30, hold_s=60)

    assert not await ledger.claim_idle(sandbox, idle_s=30, hold_s=60)
    assert await ledger.begin_use(sandbox, busy_s=10) == pytest.approx(60)
    await ledger.release(sandbox)
    assert await ledger.hold_remaining_s(sandbox) == 0.0
    # the use counted during the claim keeps the sandbox from the next claim
    assert not await ledger.claim_idle(sandbox, idle_s=0, hold_s=60)


async def test_a_use_past_its_busy_time_stops_blocking_as_if_its_worker_died(
    ledgers: Ledgers,
) -> None:
    ledger, clock = ledgers.ledger, ledgers.clock
    sandbox = await ledgers.new()
    await ledger.begin_use(sandbox, busy_s=20)
    clock.advance(60)

    assert await ledger.claim_idle(sandbox, idle_s=30, hold_s=60)


async def test_a_claim_that_outlived_its_hold_no_longer_counts(ledgers: Ledgers) -> None:
    ledger, clock = ledgers.ledger, ledgers.clock
    sandbox = await ledgers.new()
    clock.advance(100)
    assert await ledger.claim_idle(sandbox, idle_s=30, hold_s=5)
    clock.advance(6)

    assert await ledger.hold_remaining_s(sandbox) == 0.0
    assert await ledger.claim_idle(sandbox, idle_s=30, hold_s=5)


async def test_expired_claims_take_idle_sandboxes_of_the_scope_only(ledgers: Ledgers) -> None:
    ledger, clock = ledgers.ledger, ledgers.clock
    idle = await ledgers.new()
    busy = await ledgers.new()
    elsewhere = await ledgers.new(scope="local:other-host:/srv/sbx")
    await ledger.begin_use(busy, busy_s=3600)
    clock.advance(1000)
    fresh = await ledgers.new()

    claimed = await ledger.claim_expired(scope=ledgers.scope, idle_s=900, hold_s=60, limit=10)

    assert [sandbox_id for sandbox_id, _ in claimed] == [idle]
    assert idle in claimed[0][1]
    assert await ledger.claim_expired(scope=ledgers.scope, idle_s=900, hold_s=60, limit=10) == ()
    assert fresh != elsewhere


@pytest.mark.parametrize("backend", LEDGERS[1:], indirect=True)  # the database ledgers
async def test_a_sandbox_whose_session_ended_is_taken_at_once(ledgers: Ledgers) -> None:
    ledger, sessions = ledgers.ledger, ledgers.sessions
    assert sessions is not None
    session_id, _ = await open_session(sessions)
    live = await ledgers.new(session_id)
    gone = await ledgers.new("s-never-existed")
    claimed = await ledger.claim_expired(scope=ledgers.scope, idle_s=900, hold_s=60, limit=10)
    assert [sandbox_id for sandbox_id, _ in claimed] == [gone]

    await sessions.cancel(session_id, actor="U1")
    claimed = await ledger.claim_expired(scope=ledgers.scope, idle_s=900, hold_s=60, limit=10)
    assert [sandbox_id for sandbox_id, _ in claimed] == [live]


async def test_forgotten_and_unknown_sandboxes_are_not_counted_or_claimed(
    ledgers: Ledgers,
) -> None:
    ledger, clock = ledgers.ledger, ledgers.clock
    sandbox = await ledgers.new()
    assert await ledger.known([sandbox, "sbx-unknown"]) == frozenset({sandbox})
    await ledger.forget(sandbox)
    clock.advance(1000)

    assert await ledger.known([sandbox]) == frozenset()
    assert await ledger.begin_use(sandbox, busy_s=10) == 0.0
    await ledger.end_use(sandbox)
    assert not await ledger.claim_idle(sandbox, idle_s=0, hold_s=10)
