"""``routing``: which queue a wake-up goes to, and that Dramatiq carries it there.

Over a real (SQLite) database and Dramatiq's in-memory broker: a session whose sandbox
lives on a live host goes to that host's queue, every other one to the shared queue;
a database that does not answer sends it to the shared queue; Blaxel sandboxes and a
deployment without Redis are never routed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from dramatiq.brokers.stub import StubBroker

from bot.durable.actors import declare_actors
from bot.durable.routing import (
    SHARED_QUEUE,
    HostPresence,
    HostRouter,
    host_queue,
    routes_by_host,
)
from bot.settings import Settings
from memory_store import (
    Database,
    DatabaseUnavailable,
    HostStore,
    SandboxLedgerStore,
    SessionKey,
    SessionStore,
)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    made = Database.from_url(None, data_dir=tmp_path)
    await made.migrate()
    try:
        yield made
    finally:
        await made.dispose()


async def _session(db: Database, sandbox_id: str | None) -> str:
    handle = None if sandbox_id is None else json.dumps({"sandbox_id": sandbox_id})
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    await SessionStore(db).open_or_join(
        SessionKey("T1", "C1", f"{uuid.uuid4().int % 10**6}.1"),
        requester_id="U1",
        initial_checkpoint=json.dumps({"sandbox": handle}),
        text="look",
        source_ts="1.0",
        session_id=session_id,
    )
    return session_id


async def test_wakeups_go_to_the_queue_of_the_sandboxs_host(db: Database) -> None:
    broker = StubBroker()
    actors = declare_actors(broker, [])
    actors.router = HostRouter(HostStore(db), actors.send_to, dead_after_s=10)
    scope = "local:host-a:/srv/sbx"
    await HostStore(db).start("host-a", queue=host_queue("host-a"), scope=scope)
    broker.declare_queue(host_queue("host-a"))
    await SandboxLedgerStore(db).record("sbx-1", handle_json="{}", scope=scope, session_id=None)
    on_host, nowhere = await _session(db, "sbx-1"), await _session(db, None)

    await actors.enqueue(on_host, "t1")
    await actors.enqueue(nowhere, "t2")
    await actors.enqueue_shared(on_host, "t3")

    # the StubBroker keeps each queue's messages encoded: decode their arguments
    host_messages = [
        tuple(json.loads(m)["args"]) for m in broker.queues[host_queue("host-a")].queue
    ]
    shared = [tuple(json.loads(m)["args"]) for m in broker.queues[SHARED_QUEUE].queue]
    assert host_messages == [(on_host, "t1")]
    assert shared == [(nowhere, "t2"), (on_host, "t3")]


class _Down:
    async def queue_of(self, session_id: str, *, dead_after_s: float) -> str | None:
        raise DatabaseUnavailable("down")


async def test_a_database_that_does_not_answer_sends_the_wakeup_to_the_shared_queue() -> None:
    sent: list[tuple[str, str, str]] = []

    async def send(queue: str, session_id: str, token: str) -> None:
        sent.append((queue, session_id, token))

    router = HostRouter(_Down(), send, dead_after_s=10)  # type: ignore[arg-type]
    await router.enqueue("s1", "t1")

    assert sent == [(SHARED_QUEUE, "s1", "t1")]


def test_only_local_sandboxes_over_redis_are_routed() -> None:
    redis = "redis://127.0.0.1:6379/0"
    assert routes_by_host(Settings(redis_url=redis, _env_file=None))  # type: ignore[call-arg]
    assert not routes_by_host(Settings(redis_url=None, _env_file=None))  # type: ignore[call-arg]
    blaxel = Settings(  # type: ignore[call-arg]
        redis_url=redis, WARROOM_SANDBOX_PROVIDER="blaxel", _env_file=None
    )
    assert not routes_by_host(blaxel)
    off = Settings(redis_url=redis, WARROOM_HOST_ROUTING="false", _env_file=None)  # type: ignore[call-arg]
    assert not routes_by_host(off)


async def test_a_stopping_host_hands_its_waiting_sessions_to_the_shared_queue_once(
    db: Database,
) -> None:
    handed: list[tuple[str, str]] = []

    async def enqueue_shared(session_id: str, token: str) -> None:
        handed.append((session_id, token))

    hosts = HostStore(db)
    scope = "local:host-b:/srv/sbx"
    presence = HostPresence(hosts, "host-b", scope=scope, beat_s=1, enqueue_shared=enqueue_shared)
    await presence.start()
    await SandboxLedgerStore(db).record("sbx-2", handle_json="{}", scope=scope, session_id=None)
    waiting = await _session(db, "sbx-2")
    await _session(db, None)

    assert await presence.hand_over() == 1
    assert await presence.hand_over() == 0, "once per process"
    assert [session_id for session_id, _ in handed] == [waiting]
    assert "host-b" not in await hosts.live_hosts(dead_after_s=60)
    assert await hosts.queue_of(waiting, dead_after_s=60) is None
