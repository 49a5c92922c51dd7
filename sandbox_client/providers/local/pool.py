"""A warm pool: jails started ahead of time, so that a new sandbox is ready at once.

``LocalProvider.provision`` takes a waiting jail when there is one (``take``): the jail's
directory is renamed to the new sandbox's id and its handle rewritten, a rename and a small
write, no process started; then the pool starts another in the background. Without a waiting
jail (none yet, or several sandboxes asked for at once) ``provision`` starts one as before.

*Fresh.* A pooled jail is made by the provider's ordinary path, with the same settings as any
jail (environment, limits, cgroups, egress), and has never been handed out: nothing ran in it,
its workspace is empty, it holds no session's data and no credential (those come with each
command, never with the jail). It leaves the pool once, for one sandbox, and is destroyed like
any other when that sandbox is: no jail ever goes back to the pool.

*Bounded and counted.* At most ``size`` jails wait (``LocalConfig.warm_pool``), counted here
in memory (``ready``), per provider, so per worker process: each holds its server's memory (a
few MiB, charged to its own memory cgroup like any jail's) and nothing else. Each jail started
for the pool and each sandbox served from it is reported to ``observe`` (``pooled``,
``pool_hit``: the metrics count them). The pool fills only once ``start`` is called (a worker
that makes jails does; ``doctor`` and the clean-up paths never do).

*Owned.* A pooled jail's id names its maker, ``pool-<pid>-<start ticks>-<random>``:
``LocalProvider.list_sandboxes`` leaves out the pooled jails of live processes (they are not
orphans) and lists those of dead ones, which the orphan reaper then destroys. ``close``
destroys the jails still waiting (a stopping worker leaves none behind). A maker killed while
a pooled jail was starting leaves a jail with a directory but no handle (``unfinished``): it is
found by the directory its ``bwrap`` binds and by its cgroup's name, and listed as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_client.errors import SandboxError
from sandbox_client.providers.local import procfs
from sandbox_client.providers.local.jail import RUN_DIR, RUN_SUBDIR, SOCKET_NAME
from sandbox_client.records import SandboxHandle

if TYPE_CHECKING:
    from sandbox_client.providers.local.provider import LocalProvider

log = logging.getLogger(__name__)

PREFIX = "pool-"
MAX_SIZE = 32
"""The most jails a pool may keep waiting."""
RETRY_FIRST_S, RETRY_MAX_S = 1.0, 60.0
"""After a jail failed to start for the pool, the wait before the next try (doubling)."""
_HANDLE_FILE = "handle.json"
MAX_SOCKET_PATH_BYTES = 107


def pool_id(pid: int | None = None, ticks: int | None = None) -> str:
    """A new pooled jail's id naming the process that makes it (this one by default): its
    pid and start time in hexadecimal, and a random part (at most 25 characters, so that
    the socket path is about as short as a session sandbox's)."""
    pid = os.getpid() if pid is None else pid
    if ticks is None:
        ticks = procfs.start_ticks(pid) or 0
    return f"{PREFIX}{pid:x}-{ticks:x}-{os.urandom(2).hex()}"


def held_by_live_process(sandbox_id: str) -> bool:
    """Whether ``sandbox_id`` is a pooled jail whose maker still runs (so not an orphan)."""
    if not sandbox_id.startswith(PREFIX):
        return False
    parts = sandbox_id[len(PREFIX) :].split("-")
    try:
        pid, ticks = int(parts[0], 16), int(parts[1], 16)
    except (ValueError, IndexError):
        return False
    return len(parts) == 3 and procfs.is_alive(pid, ticks)


def unfinished(provider: LocalProvider, *, all_makers: bool = False) -> list[SandboxHandle]:
    """Handles for the pooled jails whose start never finished: a directory and no handle,
    their maker dead (``all_makers``: alive or not). The jail's init, if it runs, is found
    by the directory its ``bwrap`` binds; its cgroups by name: ``destroy`` ends them."""
    found = []
    for directory in provider.config.state_dir.glob(f"{PREFIX}*"):
        if (directory / _HANDLE_FILE).exists() or not directory.is_dir():
            continue
        if not all_makers and held_by_live_process(directory.name):
            continue  # still starting
        found.append(_unfinished_handle(provider, directory))
    return found


def _unfinished_handle(provider: LocalProvider, directory: Path) -> SandboxHandle:
    freezer, enforcer = provider.freezer, provider.enforcer
    name = provider._cgroup_name(directory.name)
    init = _jail_init(directory)
    return SandboxHandle(
        provider=provider.kind,
        sandbox_id=directory.name,
        url="http://sandbox",
        socket_path=str(directory / SOCKET_NAME),
        pid=init,
        pid_start_ticks=procfs.start_ticks(init) if init is not None else None,
        freezer=freezer.kind,
        cgroup=str(freezer.parent / name) if freezer.parent is not None else None,
        state_dir=str(directory),
        limit_cgroups=tuple(str(parent / name) for parent in enforcer.v1_parents.values()),
    )


def _jail_init(directory: Path) -> int | None:
    """The init of the jail whose ``bwrap`` binds ``directory``'s run directory: of the two
    ``bwrap`` processes carrying that command line, the child (pid 1 of the jail)."""
    marker = b"\0" + os.fsencode(directory / RUN_SUBDIR) + b"\0" + RUN_DIR.encode() + b"\0"
    matching: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker not in handle.read():
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        matching[int(entry)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    inner = [pid for pid, parent in matching.items() if parent in matching]
    candidates = inner or sorted(matching)
    return candidates[0] if candidates else None


class WarmPool:
    """Up to ``size`` ready jails of ``provider`` (see the module docstring).

    Args:
        provider: makes and destroys the jails.
        size: how many may wait; 0: no pool (``take`` always answers None).

    Raises:
        ValueError: ``size`` negative or over ``MAX_SIZE``.
    """

    def __init__(self, provider: LocalProvider, size: int) -> None:
        if not 0 <= size <= MAX_SIZE:
            raise ValueError(f"a warm pool holds 0 to {MAX_SIZE} jails, not {size}")
        self.size = size
        self._provider = provider
        self._ready: deque[SandboxHandle] = deque()
        self._task: asyncio.Task[None] | None = None
        self._chores: set[asyncio.Task[None]] = set()
        self._observe: Callable[[str], None] = _ignore
        self._started = False
        self._closing = False
        self._changed = asyncio.Event()

    @property
    def closing(self) -> bool:
        """Whether ``close`` was called."""
        return self._closing

    @property
    def ready(self) -> int:
        """How many jails wait now."""
        return len(self._ready)

    def start(self, observe: Callable[[str], None] | None = None) -> None:
        """Fill the pool in the background from now on (call it on the event loop);
        ``observe(event)`` hears ``pooled`` for each jail started for it and ``pool_hit``
        for each sandbox it served."""
        if observe is not None:
            self._observe = observe
        self._started = True
        self._refill()

    def take(self, sandbox_id: str) -> SandboxHandle | None:
        """A waiting jail made sandbox ``sandbox_id`` (its directory renamed, its handle
        rewritten), or None when none waits (or it cannot be renamed there); a jail found
        dead is destroyed in the background. Refills in the background."""
        handle = None
        while self._ready and not self._closing and handle is None:
            waiting = self._ready.popleft()
            if procfs.is_alive(waiting.pid or 0, waiting.pid_start_ticks):
                handle = self._adopt(waiting, sandbox_id)
            else:
                self._chore(self._provider.destroy(waiting))
        self._refill()
        if handle is not None:
            self._observe("pool_hit")
        return handle

    def _adopt(self, waiting: SandboxHandle, sandbox_id: str) -> SandboxHandle | None:
        old = Path(waiting.state_dir or "")
        new = old.parent / sandbox_id
        socket = new / SOCKET_NAME
        if len(os.fsencode(socket)) > MAX_SOCKET_PATH_BYTES:
            self._ready.appendleft(waiting)
            return None
        try:
            os.rename(old, new)  # fails when ``new`` holds something: the cold path decides
        except OSError:
            self._ready.appendleft(waiting)
            return None
        handle = replace(
            waiting, sandbox_id=sandbox_id, socket_path=str(socket), state_dir=str(new)
        )
        try:
            (new / _HANDLE_FILE).write_text(handle.to_json())
        except OSError:  # unrecorded, it would be a leak: end it
            self._chore(self._provider.destroy(handle))
            return None
        return handle

    def _refill(self) -> None:
        wanted = self._started and len(self._ready) < self.size
        if wanted and not self._closing and self._task is None:
            self._task = asyncio.create_task(self._fill())

    async def _fill(self) -> None:
        retry_s = RETRY_FIRST_S
        try:
            while not self._closing and len(self._ready) < self.size:
                new_id = pool_id()
                if self._provider.find(new_id) is not None:
                    continue  # its random part was drawn before: draw again
                try:
                    handle = await self._provider.provision(new_id)
                except (SandboxError, OSError) as exc:
                    log.warning("a jail for the warm pool did not start: %s", exc)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(retry_s):
                            await self._wait_change()
                    retry_s = min(retry_s * 2, RETRY_MAX_S)
                    continue
                retry_s = RETRY_FIRST_S
                self._observe("pooled")
                if self.closing:  # while it started
                    await self._provider.destroy(handle)
                    break
                self._ready.append(handle)
                self._signal_change()
        finally:
            self._task = None
            self._signal_change()

    async def filled(self) -> None:
        """Return once ``size`` jails wait (or the pool is closing): tests, benches."""
        while len(self._ready) < self.size and not self._closing:
            await self._wait_change()

    async def _wait_change(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    def _signal_change(self) -> None:
        self._changed.set()

    def _chore(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background; ``close`` waits for it."""
        task = asyncio.create_task(work)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def close(self) -> None:
        """Stop filling (a jail being started is let finish, then destroyed) and destroy every
        waiting jail. Idempotent; the pool takes no new jails afterwards."""
        self._closing = True
        self._signal_change()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        while self._ready:
            handle = self._ready.popleft()
            try:
                await self._provider.destroy(handle)
            except (SandboxError, OSError):
                log.exception("a warm pool jail could not be destroyed")
        if self._chores:
            await asyncio.gather(*self._chores, return_exceptions=True)


def _ignore(event: str) -> None:
    return None
