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
from types import SimpleNamespace
from typing import cast

import httpx
import pytest

from bot.durable.background import BackgroundWatcher
from harness import Checkpoint, Requester
from harness.tools.background import output_path, task_id_for, wrapped
from memory_store import BackgroundTask, BackgroundTasks, Database, SessionKey, SessionStore
from sandbox_client import LocalProvider, SandboxClient, SandboxHandle, SandboxManager
from sandbox_client.records import ProcessRecord, ProcessStatus
from sandbox_client.server.files import Filesystem
from tests.sandbox_client.conftest import local_config

SESSION = "s-watch"


@dataclass
class Rig:
    provider: LocalProvider
    handle: SandboxHandle
    watcher: BackgroundWatcher
    tasks: BackgroundTasks
    sessions: SessionStore


async def _open_session(sessions: SessionStore) -> None:
    """The session whose background tasks are watched (``SESSION``)."""
    cp = Checkpoint(SESSION, "T1", "C1", Requester("U1"))
    await sessions.open_or_join(
        SessionKey("T1", "C1", "1.1"),
        requester_id="U1",
        initial_checkpoint=cp.to_json(),
        text="watch it",
        source_ts="1.1",
        session_id=SESSION,
    )


@pytest.fixture
async def rig(database: Database) -> AsyncIterator[Rig]:
    state_dir = Path(tempfile.mkdtemp(prefix="wr-watch-"))  # socket paths stay short
    provider = LocalProvider(local_config(state_dir, max_output_bytes=1024 * 1024))
    handle = await provider.provision("watch")
    sessions = SessionStore(database)
    await _open_session(sessions)

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


class RangeServer:
    """The sandbox server's own range reads (``Filesystem``, a small read limit) over one
    local file standing for a monitor's output file."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.limit = limit

    failing = False  # answer 500, as a sandbox server in trouble

    def answer(self, request: httpx.Request) -> httpx.Response:
        if self.failing:
            return httpx.Response(500, json={"error": "internal"})
        if not self.path.exists():
            return httpx.Response(404, json={"error": "not found"})
        files = Filesystem(str(self.path.parent), self.limit)
        size = self.path.stat().st_size
        reply = files._range(str(self.path), size, request.headers["range"])
        headers = {**reply.headers, "content-type": reply.content_type}
        return httpx.Response(reply.status, content=reply.body, headers=headers)


@dataclass
class Reading:
    watcher: BackgroundWatcher
    tasks: BackgroundTasks
    sessions: SessionStore
    output: Path
    server: RangeServer


@pytest.fixture
async def reading(database: Database, tmp_path: Path) -> Reading:
    """A watcher whose sandbox is a ``RangeServer`` with a 64-byte read limit."""
    sessions = SessionStore(database)
    await _open_session(sessions)
    server = RangeServer(tmp_path / "out.output", limit=64)

    class Provider:
        def connect(self, handle: SandboxHandle) -> SandboxClient:
            transport = httpx.MockTransport(server.answer)
            return SandboxClient("http://sandbox", sandbox_id="s", transport=transport)

    async def enqueue(session_id: str, token: str) -> None:
        pass

    manager = cast(SandboxManager, SimpleNamespace(provider=Provider(), scope="stub"))
    tasks = BackgroundTasks(database)
    watcher = BackgroundWatcher(tasks, sessions, manager, enqueue, monitor_batch_s=0)
    return Reading(watcher, tasks, sessions, server.path, server)


async def monitor_looks(reading: Reading, looks: int) -> list[str]:
    """Register a running monitor, let the watcher look at it ``looks`` times; the
    events it delivered."""
    task_id = task_id_for("toolu_mon_r")
    if await reading.tasks.get(SESSION, task_id) is None:
        task = BackgroundTask(
            SESSION, task_id, "toolu_mon_r", "monitor", "s", "{}", "t", "/workspace/o.output"
        )
        await reading.tasks.register(task)
    running = ProcessRecord("toolu_mon_r", "cmd", ProcessStatus.RUNNING, None)
    for _ in range(looks):
        current = await reading.tasks.get(SESSION, task_id)
        assert current is not None
        await reading.watcher._monitor(cast(SandboxHandle, None), current, running)
    inbox = await reading.sessions.inbox(SESSION)
    return [i.text for i in inbox if i.kind == "notification"]


async def test_a_read_of_blank_lines_alone_does_not_stop_a_monitor(reading: Reading) -> None:
    # Given a monitor whose output has more blank lines than one read gives, then a line
    reading.output.write_bytes(b"\n" * 100 + b"marker\n")
    # When the watcher looks a few times
    events = await monitor_looks(reading, 4)
    # Then the line after the blank ones is delivered
    assert any("marker" in e for e in events), events


async def test_a_long_line_of_multibyte_characters_is_delivered_without_broken_ones(
    reading: Reading,
) -> None:
    # Given a line of two-byte characters longer than one read (64 bytes: x, 31 and a half)
    reading.output.write_bytes(b"x" + "é".encode() * 45 + b"\nok\n")
    # When the watcher delivers it in pieces
    events = await monitor_looks(reading, 4)
    # Then no piece cuts a character in two
    assert any("ok" in e for e in events), events
    assert not any("\ufffd" in e for e in events), events


async def test_a_truncated_output_file_is_followed_from_its_new_start(reading: Reading) -> None:
    # Given a monitor whose first lines were delivered
    reading.output.write_bytes(b"first line\n" * 4)
    assert any("first line" in e for e in await monitor_looks(reading, 1))
    # When its output file is emptied and written again (shorter than what was delivered)
    reading.output.write_bytes(b"after\n")
    # Then the new line is delivered
    events = await monitor_looks(reading, 3)
    assert any("after" in e for e in events), events


async def test_a_look_on_a_stale_row_delivers_nothing_twice_also_after_a_cut(
    reading: Reading,
) -> None:
    # Given a monitor whose first lines were delivered by one look, and a second look
    # (a racing watcher, or a redo) that read the task's row before the first moved it
    reading.output.write_bytes(b"first line\n")
    await monitor_looks(reading, 0)
    task_id = task_id_for("toolu_mon_r")
    running = ProcessRecord("toolu_mon_r", "cmd", ProcessStatus.RUNNING, None)
    handle = cast(SandboxHandle, None)
    stale = await reading.tasks.get(SESSION, task_id)
    assert stale is not None
    await reading.watcher._monitor(handle, stale, running)
    await reading.watcher._monitor(handle, stale, running)
    # When the file is cut and written again, and two looks read the same row again
    reading.output.write_bytes(b"after\n")
    stale = await reading.tasks.get(SESSION, task_id)
    assert stale is not None
    await reading.watcher._monitor(handle, stale, running)
    await reading.watcher._monitor(handle, stale, running)
    # Then each batch was delivered once
    events = await monitor_looks(reading, 0)
    assert sum("first line" in e for e in events) == 1, events
    assert sum("after" in e for e in events) == 1, events


async def test_a_read_that_fails_does_not_move_a_monitor_back_to_its_start(
    reading: Reading,
) -> None:
    # Given a monitor whose first lines were delivered
    reading.output.write_bytes(b"first line\n")
    await monitor_looks(reading, 1)
    # When a look finds the sandbox's server failing, and the next one a new line
    reading.server.failing = True
    await monitor_looks(reading, 1)
    reading.server.failing = False
    with reading.output.open("ab") as output:
        output.write(b"second line\n")
    events = await monitor_looks(reading, 2)
    # Then the new line is delivered, and the first is not again
    assert sum("first line" in e for e in events) == 1, events
    assert any("second line" in e for e in events), events
