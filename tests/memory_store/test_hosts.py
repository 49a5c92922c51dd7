"""``HostStore`` on both backends: the live host of a session's sandbox (the queue its
steps go to), a host that stops or falls silent, and what a stopping host hands back."""

from __future__ import annotations

import json
import uuid

from memory_store import Database, HostStore, SandboxLedgerStore, SessionStore
from tests.memory_store.session_support import ManualClock, new_key

DEAD_AFTER_S = 10.0


def _checkpoint(sandbox_id: str | None) -> str:
    """A checkpoint as the harness stores it: the handle is JSON inside it, as a string."""
    handle = (
        None if sandbox_id is None else json.dumps({"provider": "local", "sandbox_id": sandbox_id})
    )
    return json.dumps({"session_id": "x", "sandbox": handle})


async def _session(db: Database, sandbox_id: str | None) -> tuple[str, str]:
    """A new running session whose checkpoint holds ``sandbox_id``; its id and token."""
    session_id = f"s-{uuid.uuid4().hex[:10]}"
    opened = await SessionStore(db).open_or_join(
        new_key(),
        requester_id="U1",
        initial_checkpoint=_checkpoint(sandbox_id),
        text="look",
        source_ts="1.0",
        session_id=session_id,
    )
    assert opened.token is not None
    return session_id, opened.token


async def test_a_sessions_steps_go_to_the_live_host_of_its_sandbox(file_db: Database) -> None:
    clock = ManualClock()
    hosts, ledger = HostStore(file_db, clock=clock), SandboxLedgerStore(file_db)
    host, scope = f"h-{uuid.uuid4().hex[:6]}", f"local:{uuid.uuid4().hex[:8]}:/sbx"
    sandbox_id = f"sbx-{uuid.uuid4().hex[:8]}"
    await hosts.start(host, queue=f"warroom.host.{host}", scope=scope)
    await ledger.record(sandbox_id, handle_json="{}", scope=scope, session_id=None)
    with_sandbox, _ = await _session(file_db, sandbox_id)
    without, _ = await _session(file_db, None)
    unknown, _ = await _session(file_db, "sbx-nobody-knows")

    assert await hosts.queue_of(with_sandbox, dead_after_s=DEAD_AFTER_S) == f"warroom.host.{host}"
    assert await hosts.queue_of(without, dead_after_s=DEAD_AFTER_S) is None
    assert await hosts.queue_of(unknown, dead_after_s=DEAD_AFTER_S) is None
    assert host in await hosts.live_hosts(dead_after_s=DEAD_AFTER_S)

    clock.advance(DEAD_AFTER_S + 1)  # the host fell silent: its sessions go anywhere
    assert await hosts.queue_of(with_sandbox, dead_after_s=DEAD_AFTER_S) is None
    await hosts.beat(host)
    assert await hosts.queue_of(with_sandbox, dead_after_s=DEAD_AFTER_S) is not None

    await hosts.stop(host)  # a stopping host gets nothing more, however recent its beat
    await hosts.beat(host)
    assert await hosts.queue_of(with_sandbox, dead_after_s=DEAD_AFTER_S) is None
    assert host not in await hosts.live_hosts(dead_after_s=DEAD_AFTER_S)

    await hosts.start(host, queue=f"warroom.host.{host}", scope=scope)  # it came back
    assert await hosts.queue_of(with_sandbox, dead_after_s=DEAD_AFTER_S) is not None


async def test_a_stopping_host_hands_back_the_sessions_waiting_on_its_sandboxes(
    file_db: Database,
) -> None:
    hosts, ledger = HostStore(file_db), SandboxLedgerStore(file_db)
    mine, theirs = f"local:{uuid.uuid4().hex[:8]}:/a", f"local:{uuid.uuid4().hex[:8]}:/b"
    here, there = f"sbx-{uuid.uuid4().hex[:8]}", f"sbx-{uuid.uuid4().hex[:8]}"
    await ledger.record(here, handle_json="{}", scope=mine, session_id=None)
    await ledger.record(there, handle_json="{}", scope=theirs, session_id=None)
    waiting_here, token = await _session(file_db, here)
    await _session(file_db, there)
    await _session(file_db, None)

    handed = await hosts.waiting_on(mine)

    assert [(w.session_id, w.token) for w in handed] == [(waiting_here, token)]


async def test_two_live_hosts_with_one_identity_are_reported(file_db: Database) -> None:
    hosts = HostStore(file_db)
    host = f"h-{uuid.uuid4().hex[:6]}"
    assert await hosts.start(host, queue="q", scope="local:a") is None
    assert await hosts.start(host, queue="q", scope="local:a") is None, "a restart is fine"
    assert await hosts.start(host, queue="q", scope="local:b") == "local:a"


async def test_the_scopes_of_hosts_gone_are_those_no_live_host_has(file_db: Database) -> None:
    clock = ManualClock()
    hosts = HostStore(file_db, clock=clock)
    tag = uuid.uuid4().hex[:6]
    await hosts.start(f"silent-{tag}", queue="q1", scope=f"local:silent-{tag}")
    await hosts.start(f"stopped-{tag}", queue="q2", scope=f"local:stopped-{tag}")
    clock.advance(DEAD_AFTER_S + 1)
    await hosts.start(f"live-{tag}", queue="q3", scope=f"local:live-{tag}")
    await hosts.start(f"stopped-{tag}", queue="q2", scope=f"local:stopped-{tag}")
    await hosts.stop(f"stopped-{tag}")

    gone = [s for s in await hosts.gone_scopes(dead_after_s=DEAD_AFTER_S) if tag in s]

    assert gone == [f"local:silent-{tag}", f"local:stopped-{tag}"]
