"""The background-task watcher: sees sessions' background processes end and wakes the
sessions with a ``<task-notification>`` (docs/architecture.md §5, "Long work").

No worker waits on a background process. Each worker's event loop runs ``watch_forever``:
every ``interval_s`` it takes the running tasks due a look in the sandboxes it can reach
(``BackgroundTasks.due``, which moves each row's next look on, so workers share the
polling), asks each sandbox for those tasks' processes (each by name: a listing would
carry the output of every command the sandbox ran), and for each one that ended:

1. reads the tail of its output file;
2. ``SessionStore.notify(kind="notification", source_key="bg:<tool_use_id>")``: a second
   notification of the same process (a watcher that died after notifying, two watchers
   racing) is a no-op, so the session hears it once;
3. enqueues the session's new token, if any (a lost enqueue is the sweeper's);
4. ends the row.

A task whose sandbox is gone (destroyed, or replaced and no longer knows the process) is
ended ``lost`` and the session is told so; so is a task in a sandbox of a worker host that
stopped or stopped beating (``hosts``: no live host reaches it any more), without asking the
sandbox, and its session's wake-up goes to the shared queue like any of that host's. A task
the model or ``stop`` ended first (``killed``) is not notified.

A monitor (``Monitor``) is looked at the same way, and between its start and its end its
new complete output lines are delivered as monitor events, at most one every
``monitor_batch_s``: each delivery wakes the session for one model step, and nothing is
held in between. At its deadline its process is killed and the session told it timed
out. A command with a deadline (a Bash call moved to the background at its ``timeout``,
which may go on for 10 more minutes) is killed when it passes; the next look sees it
ended and tells the session it was stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from bot.durable.driver import Enqueue
from harness import NOTIFICATION_KIND, event_lines, monitor_event, task_notification
from memory_store import (
    TAIL_KEPT,
    BackgroundTask,
    BackgroundTasks,
    HostStore,
    SessionNotFound,
    SessionStore,
)
from sandbox_client import (
    FileNotFound,
    Health,
    ProcessRecord,
    ProcessStatus,
    SandboxClient,
    SandboxError,
    SandboxGone,
    SandboxHandle,
    SandboxManager,
)

log = logging.getLogger(__name__)

TAIL_BYTES = 4096
"""The end of the output file a notification carries (then cut to ``harness``'s size)."""
FINAL_READ_TRIES = 10
"""Looks in a row whose read of an ended task's output fails before it is ended without
its last lines (one look each ``interval_s``)."""


def source_key(task: BackgroundTask) -> str:
    """The notification's de-duplication key (one per process)."""
    return f"bg:{task.tool_use_id}"[:64]


class BackgroundWatcher:
    """Watches the background tasks of the sandboxes ``manager`` can reach.

    Args:
        tasks: the task rows.
        sessions: to notify the sessions.
        manager: whose provider and scope name the sandboxes this process reaches.
        enqueue: sends a session's new token to a worker.
        interval_s: how often ``watch_forever`` looks (the notification latency's cap).
        monitor_batch_s: a monitor's new lines are delivered at most this often (the
            lines of that time go in one notification).
        hosts: with it, the tasks of hosts gone for ``host_dead_after_s`` are ended lost.
    """

    def __init__(
        self,
        tasks: BackgroundTasks,
        sessions: SessionStore,
        manager: SandboxManager,
        enqueue: Enqueue,
        *,
        interval_s: float = 0.5,
        monitor_batch_s: float = 3.0,
        hosts: HostStore | None = None,
        host_dead_after_s: float = 15.0,
    ) -> None:
        self.hosts = hosts
        self.host_dead_after_s = host_dead_after_s
        # hosts go in seconds: a look a third of the bound apart is soon enough
        self._gone_every_s = max(interval_s, host_dead_after_s / 3)
        self._gone_due = 0.0
        self.monitor_batch_s = monitor_batch_s
        self.tasks = tasks
        self.sessions = sessions
        self.manager = manager
        self.enqueue = enqueue
        self.interval_s = interval_s

    async def poll_once(self) -> int:
        """One look at every task due; returns how many ended.

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        due = await self.tasks.due(scope=self.manager.scope, recheck_s=self.interval_s)
        by_sandbox: dict[str, list[BackgroundTask]] = {}
        for task in due:
            by_sandbox.setdefault(task.sandbox_id, []).append(task)
        ended = await asyncio.gather(*(self._look(group) for group in by_sandbox.values()))
        return sum(ended) + await self._of_gone_hosts()

    async def _of_gone_hosts(self) -> int:
        """End lost the tasks in sandboxes of hosts gone (see the module docstring)."""
        if self.hosts is None or time.monotonic() < self._gone_due:
            return 0
        self._gone_due = time.monotonic() + self._gone_every_s
        ended = 0
        for scope in await self.hosts.gone_scopes(dead_after_s=self.host_dead_after_s):
            if scope != self.manager.scope:
                due = await self.tasks.due(scope=scope, recheck_s=self.interval_s)
                ended += await self._all_lost(due)
        return ended

    async def watch_forever(self) -> None:
        """``poll_once`` every ``interval_s`` until cancelled; errors are logged."""
        while True:
            try:
                await self.poll_once()
            except Exception:
                log.exception("background task watch failed")
            await asyncio.sleep(self.interval_s)

    async def _look(self, tasks: Sequence[BackgroundTask]) -> int:
        """Look at the tasks of one sandbox; returns how many ended."""
        try:
            handle = SandboxHandle.from_json(tasks[0].handle)
        except ValueError:
            log.error("background task %s: unreadable sandbox handle", tasks[0].task_id)
            return await self._all_lost(tasks)
        client = self.manager.provider.connect(handle)
        try:  # each task's own record: a listing would carry every command's output
            found = await asyncio.gather(*(client.get_process(t.tool_use_id) for t in tasks))
            records = {r.name: r for r in found if r is not None}
        except SandboxGone:
            return await self._all_lost(tasks)
        except SandboxError:
            if await self._gone(handle):
                return await self._all_lost(tasks)
            return 0  # not answering now (busy, starting): look again later
        finally:
            await client.aclose()
        ended = 0
        for task in tasks:
            record = records.get(task.tool_use_id)
            if record is None:
                ended += await self._end(task, "lost")
            elif task.kind == "monitor":
                ended += await self._monitor(handle, task, record)
            elif record.finished:
                ended += await self._finished(handle, task, record)
            elif task.deadline_at is not None and datetime.now(UTC) >= task.deadline_at:
                await self._overran(handle, task)
        return ended

    async def _overran(self, handle: SandboxHandle, task: BackgroundTask) -> None:
        """Kill a command past its deadline (its row ends at the next look, ``killed``)."""
        client = self.manager.provider.connect(handle)
        try:
            with contextlib.suppress(SandboxError):  # gone or busy: the next look decides
                await client.kill(task.tool_use_id)
        finally:
            await client.aclose()

    async def _gone(self, handle: SandboxHandle) -> bool:
        try:
            return await self.manager.provider.health(handle) is Health.GONE
        except SandboxError:
            return False

    async def _all_lost(self, tasks: Sequence[BackgroundTask]) -> int:
        return sum([await self._end(task, "lost") for task in tasks])

    async def _finished(
        self, handle: SandboxHandle, task: BackgroundTask, record: ProcessRecord
    ) -> int:
        client = self.manager.provider.connect(handle)
        try:
            data, size = await _read_from(client, task.output_path, -TAIL_BYTES)
            if size is None and await self._read_again(task):
                return 0  # its tail is read at a later look
            with contextlib.suppress(SandboxError):  # what the command left in its group
                await client.kill(task.tool_use_id)
        finally:
            await client.aclose()
        if record.status is ProcessStatus.KILLED:
            state = "killed"
        else:
            state = "completed" if record.exit_code == 0 else "failed"
        return await self._end(task, state, record.exit_code, data.decode("utf-8", "replace"))

    async def _read_again(self, task: BackgroundTask) -> bool:
        """A read of an ended task's output failed (the sandbox's server in trouble):
        whether to look again later rather than end it without its last lines (at most
        ``FINAL_READ_TRIES`` looks in a row)."""
        return await self.tasks.read_failed(task.session_id, task.task_id) < FINAL_READ_TRIES

    async def _monitor(
        self, handle: SandboxHandle, task: BackgroundTask, record: ProcessRecord
    ) -> int:
        """Deliver a monitor's new complete lines when its batch time came (all of them
        when it ended or expired), then end it if it ended or its deadline passed."""
        now = datetime.now(UTC)
        expired = task.deadline_at is not None and now >= task.deadline_at
        last = task.delivered_at or task.started_at or now
        due = (now - last).total_seconds() >= self.monitor_batch_s
        if not (record.finished or expired or due):
            return 0
        client = self.manager.provider.connect(handle)
        try:  # only what is new: a look costs what was added, whatever the file's size
            read = await self._read_new(client, task)
            if read is None:  # cut while another watcher looked: the next look reads it
                return 0
            task, new, size = read
            if size is None and (not (record.finished or expired) or await self._read_again(task)):
                return 0  # a read that failed: nothing is known of the file this look
            if expired and not record.finished:
                with contextlib.suppress(SandboxError):
                    await client.kill(task.tool_use_id)
        finally:
            await client.aclose()
        if not (record.finished or expired):
            whole = new.rfind(b"\n") + 1  # complete lines only, while it runs
            more = task.delivered_bytes + len(new) < (size or 0)  # the read stopped at its limit
            # a line longer than a read: in pieces, each of whole characters
            new = _whole_characters(new) if whole == 0 and more else new[:whole]
        if record.finished:  # its last lines are the ending's own event (Claude Code's)
            state = "completed" if record.exit_code == 0 else "failed"
            if record.status is ProcessStatus.KILLED:
                state = "killed"
            final = event_lines(new, task.output_path) if new.strip() else ""
            return await self._end(task, state, record.exit_code, final)
        if new.strip():
            await self._deliver(task, new)
            task = replace(task, delivered_bytes=task.delivered_bytes + len(new))
        elif new:  # blank lines alone: passed over, or a read of them is all a look sees
            upto = task.delivered_bytes + len(new)
            await self.tasks.delivered(
                task.session_id,
                task.task_id,
                from_bytes=task.delivered_bytes,
                upto_bytes=upto,
                generation=task.output_generation,
                tail=task.delivered_tail + new,
                head=_head_after(task, new),
            )
            task = replace(task, delivered_bytes=upto)
        return await self._end(task, "expired") if expired else 0

    async def _read_new(
        self, client: SandboxClient, task: BackgroundTask
    ) -> tuple[BackgroundTask, bytes, int | None] | None:
        """What a monitor's output file holds past its mark (as much as one read gives),
        and the file's size (None: a read failed); with the task as read then.

        The file is checked to be the one delivered so far: at least as long as the mark,
        still holding the delivered tail just before it, and, when it has grown, still
        beginning with what it began with. One that is not was cut and written again
        (``tail -F``'s case): its mark moves back to 0 in a new generation and it is read
        from its start. None when the mark moved under this look (another watcher's)."""
        for _ in range(2):
            mark, tail = task.delivered_bytes, task.delivered_tail
            data, size = await _read_from(client, task.output_path, mark - len(tail))
            if size is None:
                return task, b"", None
            intact = size >= mark and tail.startswith(data[: len(tail)])
            new = data[len(tail) :]
            if intact and tail and mark - len(tail) + len(data) < size:
                # the read stopped at the sandbox's limit, the tail taking part of it: what
                # follows the mark gets a whole read of its own (the file no shorter)
                new, again = await _read_from(client, task.output_path, mark)
                if again is None:
                    return task, b"", None
                intact, size = again >= size, again
            if intact and new and mark and task.output_head:  # grown: still the same file?
                head = task.output_head
                first, whole = await _read_from(client, task.output_path, 0, len(head))
                if whole is None:
                    return task, b"", None
                intact = first == head
            if intact:
                return task, new, size
            moved = await self.tasks.restarted(
                task.session_id,
                task.task_id,
                from_bytes=task.delivered_bytes,
                generation=task.output_generation,
            )
            current = await self.tasks.get(task.session_id, task.task_id)
            if not moved or current is None:
                return None
            task = current
        return None

    async def _deliver(self, task: BackgroundTask, new: bytes) -> None:
        """One monitor event: notify, then move the delivered mark on.

        The notification is keyed by the file's generation and where the batch starts,
        so a redo or a racing watcher, which both read the same row, delivers nothing
        twice, while the batch at offset 0 of a file cut and written again (``_read_new``)
        is a new one. (Generation 0's key is the one earlier releases gave.)"""
        text = monitor_event(task, event_lines(new, task.output_path))
        at = (
            f"{task.output_generation}.{task.delivered_bytes}"
            if task.output_generation
            else (str(task.delivered_bytes))
        )
        key = f"mon:{at}:{task.tool_use_id}"[:64]
        try:
            token = await self.sessions.notify(
                task.session_id, kind=NOTIFICATION_KIND, text=text, source_key=key
            )
        except SessionNotFound:
            token = None
        if token is not None:
            await self.enqueue(task.session_id, token)
        await self.tasks.delivered(
            task.session_id,
            task.task_id,
            from_bytes=task.delivered_bytes,
            upto_bytes=task.delivered_bytes + len(new),
            generation=task.output_generation,
            tail=task.delivered_tail + new,
            head=_head_after(task, new),
        )

    async def _end(
        self, task: BackgroundTask, state: str, exit_code: int | None = None, tail: str = ""
    ) -> int:
        """Notify the session (once, by key), then end the row. A task the model or
        ``stop`` already ended is left alone."""
        current = await self.tasks.get(task.session_id, task.task_id)
        if current is None or not current.running:
            return 0
        ended = replace(task, state=state, exit_code=exit_code)
        text = task_notification(ended, tail)
        try:
            token = await self.sessions.notify(
                task.session_id, kind=NOTIFICATION_KIND, text=text, source_key=source_key(task)
            )
        except SessionNotFound:
            token = None
        if token is not None:
            await self.enqueue(task.session_id, token)
        await self.tasks.finish(task.session_id, task.task_id, state=state, exit_code=exit_code)
        return 1


def _head_after(task: BackgroundTask, new: bytes) -> bytes:
    """The output file's first bytes once ``new`` is delivered after the mark: grown while
    they cover the whole mark, else as they were (complete, or unknown: b"")."""
    if len(task.output_head) == task.delivered_bytes:
        return (task.output_head + new)[:TAIL_KEPT]
    return task.output_head


def _whole_characters(data: bytes) -> bytes:
    """``data`` without a UTF-8 character cut at its end (its first bytes come in the
    next read).

    >>> _whole_characters("xé".encode()[:2])
    b'x'
    >>> _whole_characters("xé".encode())
    b'x\\xc3\\xa9'
    """
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:  # where the last character starts: whole if all its bytes came
            length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if back >= length else data[:-back]
    return data  # not UTF-8 there: as it is


async def _read_from(
    client: SandboxClient, path: str, start: int, length: int | None = None
) -> tuple[bytes, int | None]:
    """The bytes of the file at ``path`` from ``start`` (negative: its last ``-start``),
    at most ``length``, as many as one read gives, and its size (0 when it is gone;
    nothing and None when it cannot be read now)."""
    try:
        return await client.read_range(path, start, length)
    except FileNotFound:
        return b"", 0
    except (SandboxError, ValueError):
        return b"", None


async def kill_session_tasks(
    tasks: BackgroundTasks, manager: SandboxManager, session_id: str
) -> tuple[str, ...]:
    """End every running background task of the session (``stop``): their rows first (no
    notification follows), then their processes. Returns the task ids ended; sandbox
    failures are logged (a sandbox that does not answer is destroyed with the session).

    Raises:
        DatabaseUnavailable: the database could not be reached.
    """
    ended = await tasks.kill_all(session_id)
    for task in ended:
        try:
            client = manager.provider.connect(SandboxHandle.from_json(task.handle))
        except (SandboxError, ValueError):
            continue
        try:
            await client.kill(task.tool_use_id)
        except SandboxError:
            log.warning("session %s: could not kill background task %s", session_id, task.task_id)
        finally:
            await client.aclose()
    return tuple(t.task_id for t in ended)
