"""The background-task watcher over a real local sandbox and a real database: what one
look at a sandbox costs the worker's event loop, and what a monitor with a large output
file still delivers."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bot.durable.background import BackgroundWatcher
from harness import Checkpoint, Requester
from harness.tools.background import output_path, task_id_for, wrapped
from memory_store import BackgroundTask, BackgroundTasks, Database, SessionKey, SessionStore
from sandbox_client import LocalProvider, SandboxClient, SandboxHandle, SandboxManager
from tests.sandbox_client.conftest import local_config

SESSION = "s-watch"


@dataclass
class Rig:
    provider: LocalProvider
    handle: SandboxHandle
    watcher: BackgroundWatcher
    tasks: BackgroundTasks
    sessions: SessionStore


@pytest.fixture
async def rig(database: Database) -> AsyncIterator[Rig]:
    state_dir = Path(tempfile.mkdtemp(prefix="wr-watch-"))  # socket paths stay short
    provider = LocalProvider(local_config(state_dir, max_output_bytes=1024 * 1024))
    handle = await provider.provision("watch")
    sessions = SessionStore(database)
    cp = Checkpoint(SESSION, "T1", "C1", Requester("U1"))
    await sessions.open_or_join(
        SessionKey("T1", "C1", "1.1"),
        requester_id="U1",
        initial_checkpoint=cp.to_json(),
        text="watch it",
        source_ts="1.1",
        session_id=SESSION,
    )

    async def enqueue(session_id: str, token: str) -> None:
        pass  # the session has a step pending already: nothing is enqueued

    tasks = BackgroundTasks(database)
    manager = SandboxManager(provider, scope="local:watch")
    watcher = BackgroundWatcher(tasks, sessions, manager, enqueue, monitor_batch_s=0.2)
    try:
        yield Rig(provider, handle, watcher, tasks, sessions)
    finally:
        await provider.destroy(handle)
        await provider.aclose()
        shutil.rmtree(state_dir, ignore_errors=True)


async def start_task(rig: Rig, tool_use_id: str, command: str, kind: str = "bash") -> str:
    task_id = task_id_for(tool_use_id)
    path = output_path(task_id)
    client = rig.provider.connect(rig.handle)
    try:
        await client.start(tool_use_id, wrapped(command, path))
    finally:
        await client.aclose()
    task = BackgroundTask(
        SESSION, task_id, tool_use_id, kind, rig.handle.sandbox_id, rig.handle.to_json(), "t", path
    )
    await rig.tasks.register(task)
    return task_id


async def poll_until_ended(rig: Rig, task_id: str, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await rig.watcher.poll_once()
        task = await rig.tasks.get(SESSION, task_id)
        assert task is not None
        if not task.running:
            return
        await asyncio.sleep(0.2)  # the watcher's own interval between looks
    raise AssertionError(f"task {task_id} did not end within {timeout_s:g} s")


class CountingTransport(httpx.AsyncBaseTransport):
    """An httpx transport that counts the response body bytes it hands back."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.received_bytes = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        self.received_bytes += len(body)
        return httpx.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_look_does_not_fetch_other_commands_output(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session ran foreground commands with big outputs (the sandbox keeps up to 1 MiB
    # of each one's stdout and of its logs); a background command then runs. A look at it
    # asks for that command alone: it must not fetch (and parse on the event loop) every
    # other command's kept output. Counted in bytes over the wire, not in seconds.
    client = rig.provider.connect(rig.handle)
    try:
        for n in range(30):  # about 60 MB kept: below the sandbox's 64 MB for all
            command = "head -c 1000000 /dev/zero | tr '\\0' a"
            await client.exec(f"fg-{n}", command, timeout_s=30)
    finally:
        await client.aclose()
    task_id = await start_task(rig, "toolu_bg_1", "sleep 1; echo done")
    transports: list[CountingTransport] = []
    connect = rig.provider.connect

    def counting_connect(handle: SandboxHandle) -> SandboxClient:
        transport = CountingTransport(httpx.AsyncHTTPTransport(uds=handle.socket_path))
        transports.append(transport)
        plain = connect(handle)
        return SandboxClient(
            handle.url, sandbox_id=handle.sandbox_id, transport=transport, options=plain.options
        )

    monkeypatch.setattr(rig.provider, "connect", counting_connect)
    await poll_until_ended(rig, task_id, timeout_s=30)
    (notified,) = [i for i in await rig.sessions.inbox(SESSION) if i.kind == "notification"]
    assert "<status>completed</status>" in notified.text
    received = sum(t.received_bytes for t in transports)
    assert transports, "the watcher never connected to the sandbox"
    assert received < 256 * 1024, f"the looks fetched {received} bytes for one small command"


async def test_a_monitor_past_the_read_limit_still_delivers_its_new_lines(rig: Rig) -> None:
    command = (
        "head -c 34000000 /dev/zero | tr '\\0' a; echo; sleep 0.5; "
        "for i in 1 2 3; do echo marker $i; sleep 0.3; done; sleep 1"
    )
    task_id = await start_task(rig, "toolu_mon_1", command, kind="monitor")
    await poll_until_ended(rig, task_id, timeout_s=60)
    texts = [i.text for i in await rig.sessions.inbox(SESSION) if i.kind == "notification"]
    assert any("marker 3" in t for t in texts), texts
