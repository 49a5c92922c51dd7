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

*Owned.* A pooled jail's id names its maker, ``pool-<pid>-<start ticks>-<random>``.
``close`` destroys the jails still waiting (a stopping worker leaves none behind). A SIGKILLed
maker's pooled jails, waiting or half-started, are orphans at once (``orphans``): the next
pool to start ends them, in its own state directory and, by their cgroups, in any other;
``LocalProvider.list_sandboxes`` lists those of its directory for the orphan reaper, and
never a live process's.
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
from sandbox_client.providers.local import orphans, procfs
from sandbox_client.providers.local.jail import SOCKET_NAME
from sandbox_client.providers.local.orphans import PREFIX
from sandbox_client.records import SandboxHandle

if TYPE_CHECKING:
    from sandbox_client.providers.local.provider import LocalProvider

log = logging.getLogger(__name__)

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
        self._reaped = False  # the dead makers' orphans, once, before the first fill
        self._swept = False  # … and done
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
        """Fill the pool in the background from now on (call it on the event loop), after
        ending the jails dead processes left (even with a size of 0); ``observe(event)``
        hears ``pooled`` for each jail started for it and ``pool_hit`` for each sandbox it
        served."""
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
        try:  # rewritten in place (a new file and a rename cost twice as much): a reader in
            # between sees the pooled jail's handle, or none (``orphans`` allows for both)
            (new / _HANDLE_FILE).write_text(handle.to_json())
        except OSError:  # unrecorded, it would be a leak: end it, under its pooled name (the
            # cold path makes the sandbox's directory anew, which its destroy would delete)
            with contextlib.suppress(OSError):
                os.rename(new, old)
                handle = waiting
            self._chore(self._provider.destroy(handle))
            return None
        return handle

    def _refill(self) -> None:
        wanted = self._started and (not self._reaped or len(self._ready) < self.size)
        if wanted and not self._closing and self._task is None:
            self._task = asyncio.create_task(self._fill())

    async def _fill(self) -> None:
        retry_s = RETRY_FIRST_S
        try:
            if not self._reaped:
                self._reaped = True
                await self._reap()
                self._swept = True
                self._signal_change()
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

    async def _reap(self) -> None:
        """End the jails dead processes left (``orphans.reap_dead_makers``), logged."""
        try:
            ended = await orphans.reap_dead_makers(self._provider)
        except (SandboxError, OSError):
            log.exception("could not look for jails left by dead processes")
            return
        if ended:
            log.warning("ended %d jails left by dead processes: %s", len(ended), ended)

    async def filled(self) -> None:
        """Return once the dead makers' jails are ended and ``size`` jails wait (or the
        pool is closing): tests, benches."""
        while not self._closing and (self._missing() or (self._started and not self._swept)):
            await self._wait_change()

    def _missing(self) -> bool:
        return len(self._ready) < self.size

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
