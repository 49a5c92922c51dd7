"""``SandboxManager``: a session's sandbox, provisioned lazily, suspended when idle,
resumed on use, replaced (with its set-up replayed) when gone, destroyed when idle
long or its session ended. Idleness is decided through a shared ``SandboxLedger``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from sandbox_client.client import SandboxClient
from sandbox_client.errors import SandboxError, SandboxGone, SandboxUnavailable
from sandbox_client.ledger import MemoryLedger, SandboxLedger
from sandbox_client.providers.base import SandboxProvider
from sandbox_client.records import Health, ProcessStatus, SandboxHandle, SandboxUsage
from sandbox_client.setup import Loss, SetupStep
from sandbox_client.workspace import list_files, replay


@dataclass(frozen=True)
class EnsureResult:
    """A usable sandbox.

    Attributes:
        handle: store it (``to_json``) with the session; it changes when ``replaced``.
        client: owned by the manager: use it, do not close it.
        replaced: the previous sandbox was gone and this is a new one.
        lost: what the model should be told (set when replaced, or when set-up steps
            of a new sandbox failed).
    """

    handle: SandboxHandle
    client: SandboxClient
    replaced: bool = False
    lost: Loss | None = None


@dataclass
class _Seen:
    """What the manager knows of one sandbox it handed out."""

    handle: SandboxHandle
    client: SandboxClient | None
    last_used: float
    running: tuple[str, ...] = ()
    files: tuple[str, ...] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _new_sandbox_id() -> str:
    return f"sbx-{uuid.uuid4().hex[:16]}"


class SandboxManager:
    """Keeps sandboxes cheap and replaceable for the harness (ARCHITECTURE.md §8).

    Use a sandbox inside ``use`` (or call ``ensure`` first): the use is counted in the
    ledger, so no process suspends or destroys the sandbox meanwhile. Idle sandboxes
    are suspended by ``suspend_idle`` (call it from the durable layer, or ``start`` a
    background task) once the ledger agrees no use runs anywhere; a suspended sandbox
    holds no worker and no connection. ``destroy_idle`` destroys sandboxes of this
    ``scope`` unused for ``idle_destroy_s`` (or whose session ended, as the ledger
    knows); ``reap_orphans`` those the ledger never heard of; ``shutdown`` those this
    process used. Before suspending, the manager notes the sandbox's running
    processes and workspace files, so that a later replacement can say what was lost.
    That memory is per process: after a restart only the caller's set-up and the
    replay's outcome are known.

    Args:
        provider: where sandboxes come from.
        idle_suspend_s: a sandbox unused this long is suspended by ``suspend_idle``.
        idle_destroy_s: a sandbox unused this long is destroyed by ``destroy_idle``.
        ledger: the shared record of uses (default: this process's own).
        scope: the sandboxes this process can reach and destroy (local jails: this
            host and state directory); default ``"<provider kind>:<host name>"``.
        hold_s: the longest a suspension or destruction keeps new uses waiting.
        new_sandbox_id: makes ids for new sandboxes.
        max_listed_files: the workspace listing taken before suspending stops here.
    """

    def __init__(
        self,
        provider: SandboxProvider,
        *,
        idle_suspend_s: float = 30.0,
        idle_destroy_s: float = 900.0,
        ledger: SandboxLedger | None = None,
        scope: str | None = None,
        hold_s: float = 60.0,
        new_sandbox_id: Callable[[], str] = _new_sandbox_id,
        max_listed_files: int = 2000,
    ) -> None:
        self.provider = provider
        self.idle_suspend_s = idle_suspend_s
        self.idle_destroy_s = idle_destroy_s
        self.ledger: SandboxLedger = ledger if ledger is not None else MemoryLedger()
        self.scope = scope or f"{provider.kind}:{socket.gethostname()}"
        self.hold_s = hold_s
        self._new_id = new_sandbox_id
        self._max_listed_files = max_listed_files
        self._seen: dict[str, _Seen] = {}
        self._task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def use(
        self,
        handle: SandboxHandle | None,
        setup: Sequence[SetupStep] = (),
        *,
        session_id: str | None = None,
        busy_s: float = 120.0,
    ) -> AsyncIterator[EnsureResult]:
        """``ensure`` the sandbox and count the use in the ledger until the block ends.

        Waits first for a suspension or destruction another process is doing to end.
        ``busy_s``: the longest the use may take (the ledger stops counting it then).

        Raises:
            What ``ensure`` raises; SandboxUnavailable when a claim outlived ``hold_s``.
        """
        if handle is not None:
            await self._begin(handle.sandbox_id, busy_s)
        try:
            result = await self.ensure(handle, setup, session_id=session_id)
        except BaseException:
            if handle is not None:
                await self.ledger.end_use(handle.sandbox_id)
            raise
        used = result.handle.sandbox_id
        if handle is None or handle.sandbox_id != used:
            if handle is not None:
                await self.ledger.end_use(handle.sandbox_id)
            await self.ledger.begin_use(used, busy_s=busy_s)
        try:
            yield result
        finally:
            await asyncio.shield(self.ledger.end_use(used))

    async def _begin(self, sandbox_id: str, busy_s: float) -> None:
        """Count a use, then wait until no claim holds the sandbox."""
        remaining_s = await self.ledger.begin_use(sandbox_id, busy_s=busy_s)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.hold_s + 5.0
        while remaining_s > 0:
            if loop.time() > give_up:
                await self.ledger.end_use(sandbox_id)
                raise SandboxUnavailable(sandbox_id, "another process holds it too long")
            await asyncio.sleep(min(remaining_s, 0.05))
            remaining_s = await self.ledger.hold_remaining_s(sandbox_id)

    async def ensure(
        self,
        handle: SandboxHandle | None,
        setup: Sequence[SetupStep] = (),
        *,
        session_id: str | None = None,
    ) -> EnsureResult:
        """A ready sandbox: provisioned if ``handle`` is None, resumed if suspended,
        replaced (set-up replayed) if gone. A new sandbox is recorded in the ledger
        with ``session_id``.

        Raises:
            ProvisionFailed: no sandbox could be made.
            SandboxUnavailable: the sandbox exists but does not answer.
        """
        if handle is None:
            return await self._provision_new(None, setup, session_id)
        seen = self._seen.setdefault(handle.sandbox_id, _Seen(handle, None, time.monotonic()))
        async with seen.lock:
            health = await self.provider.health(handle)
            if health is not Health.GONE:
                try:
                    return await self._reuse(seen, health)
                except SandboxGone:
                    pass
            return await self._replace(seen, setup, session_id)

    async def _reuse(self, seen: _Seen, health: Health) -> EnsureResult:
        if health is not Health.READY:
            await self.provider.resume(seen.handle)
        if seen.client is None:
            seen.client = self.provider.connect(seen.handle)
        seen.last_used = time.monotonic()
        return EnsureResult(seen.handle, seen.client)

    async def _replace(
        self, seen: _Seen, setup: Sequence[SetupStep], session_id: str | None
    ) -> EnsureResult:
        old = seen.handle
        running = set(seen.running)
        if seen.client is not None:
            running |= seen.client.unfinished_names
            await seen.client.aclose()
        self._seen.pop(old.sandbox_id, None)
        with contextlib.suppress(SandboxError, OSError):
            await self.provider.destroy(old)  # frees what is left (local: its directory)
        await self.ledger.forget(old.sandbox_id)
        result = await self._provision_new(seen, setup, session_id)
        assert result.lost is not None
        lost = result.lost
        files_lost: tuple[str, ...] = ()
        if seen.files is not None:
            now = set(await list_files(result.client, "/workspace", self._max_listed_files))
            files_lost = tuple(sorted(set(seen.files) - now))
        loss = Loss(
            old_sandbox_id=old.sandbox_id,
            new_sandbox_id=lost.new_sandbox_id,
            running_processes=tuple(sorted(running)),
            files_not_recreated=files_lost,
            workspace_known=seen.files is not None,
            failed_steps=lost.failed_steps,
            replayed_steps=lost.replayed_steps,
        )
        return EnsureResult(result.handle, result.client, replaced=True, lost=loss)

    async def _provision_new(
        self, seen: _Seen | None, setup: Sequence[SetupStep], session_id: str | None
    ) -> EnsureResult:
        handle = await self.provider.provision(self._new_id())
        await self.ledger.record(
            handle.sandbox_id, handle_json=handle.to_json(), scope=self.scope, session_id=session_id
        )
        client = self.provider.connect(handle)
        self._seen[handle.sandbox_id] = _Seen(handle, client, time.monotonic())
        failures = await replay(client, setup, prefix=f"setup-{handle.sandbox_id}")
        loss = Loss(
            old_sandbox_id="",
            new_sandbox_id=handle.sandbox_id,
            failed_steps=failures,
            replayed_steps=len(setup),
        )
        keep = seen is not None or bool(failures)
        return EnsureResult(handle, client, replaced=False, lost=loss if keep else None)

    async def usage(self, handle: SandboxHandle) -> SandboxUsage:
        """``provider.usage``, or an empty reading when the provider could not tell."""
        try:
            return await self.provider.usage(handle)
        except (SandboxError, OSError):
            return SandboxUsage()

    async def suspend_idle(self) -> tuple[str, ...]:
        """Suspend every sandbox this process holds a client of that the ledger finds
        unused for ``idle_suspend_s`` with no use in flight anywhere.

        Returns:
            The ids suspended.
        """
        suspended = []
        for seen in list(self._seen.values()):
            client, sandbox_id = seen.client, seen.handle.sandbox_id
            if client is None or client.idle_since is None or seen.lock.locked():
                continue  # not ours to judge, or a call of this process runs
            if not await self.ledger.claim_idle(
                sandbox_id, idle_s=self.idle_suspend_s, hold_s=self.hold_s
            ):
                continue
            try:
                async with seen.lock:
                    if await self._suspend(seen):
                        suspended.append(sandbox_id)
            finally:
                await self.ledger.release(sandbox_id)
        return tuple(suspended)

    async def _suspend(self, seen: _Seen) -> bool:
        client = seen.client
        if client is None:
            return False
        with contextlib.suppress(SandboxError):
            processes = await client.list_processes()
            seen.running = tuple(p.name for p in processes if p.status is ProcessStatus.RUNNING)
            seen.files = await list_files(client, "/workspace", self._max_listed_files)
        await client.aclose()
        seen.client = None
        try:
            await self.provider.suspend(seen.handle)
        except SandboxGone:
            return False
        return True

    async def release(self, handle: SandboxHandle) -> None:
        """Suspend ``handle``'s sandbox now (the session is waiting for a human)."""
        seen = self._seen.get(handle.sandbox_id)
        if seen is None:
            seen = self._seen[handle.sandbox_id] = _Seen(handle, None, time.monotonic())
            with contextlib.suppress(SandboxGone):
                await self.provider.suspend(handle)
            return
        async with seen.lock:
            await self._suspend(seen)

    async def destroy(self, handle: SandboxHandle) -> None:
        """Destroy ``handle``'s sandbox and forget it, whoever uses it (tests, tools)."""
        await self._drop(handle.sandbox_id)
        await self.provider.destroy(handle)
        await self.ledger.forget(handle.sandbox_id)

    async def retire(self, handle: SandboxHandle) -> bool:
        """Destroy ``handle``'s sandbox (its session ended) unless a use of it is in
        flight somewhere; then ``destroy_idle`` takes it later. True when destroyed.

        Raises:
            SandboxError: the provider could not destroy it (it stays claimed until
                ``hold_s`` passes, then a sweep tries again).
        """
        if not await self.ledger.claim_idle(handle.sandbox_id, idle_s=0.0, hold_s=self.hold_s):
            return False
        await self.destroy(handle)
        return True

    async def adopt_abandoned(self) -> tuple[str, ...]:
        """Take over the sandboxes of this scope whose every user died
        (``SandboxLedger.take_abandoned``): a running one is suspended by ``suspend_idle``
        once idle, a suspended one waits as it is, and either is destroyed by ``retire``
        at this process's stop. Returns the ids adopted (those gone are forgotten).

        Raises:
            What the ledger raises (the database is unreachable).
        """
        adopted = []
        for sandbox_id, handle_json in await self.ledger.take_abandoned(scope=self.scope):
            if sandbox_id in self._seen:
                continue
            handle = SandboxHandle.from_json(handle_json)
            try:
                health = await self.provider.health(handle)
            except (SandboxError, OSError):
                health = Health.SUSPENDED  # unknown: keep it, ``retire`` tries at the stop
            if health is Health.GONE:
                await self.ledger.forget(sandbox_id)
                continue
            client = self.provider.connect(handle) if health is Health.READY else None
            self._seen[sandbox_id] = _Seen(handle, client, time.monotonic())
            adopted.append(sandbox_id)
        return tuple(adopted)

    async def _drop(self, sandbox_id: str) -> None:
        seen = self._seen.pop(sandbox_id, None)
        if seen is not None and seen.client is not None:
            await seen.client.aclose()

    def start(self, interval_s: float = 5.0) -> None:
        """Run ``suspend_idle`` every ``interval_s`` in a background task until ``stop``."""
        if self._task is None:
            self._task = asyncio.create_task(self._suspend_loop(interval_s))

    async def _suspend_loop(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            with contextlib.suppress(SandboxError):
                await self.suspend_idle()

    async def stop(self) -> None:
        """Stop the background task started by ``start``."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def busy_here(self, sandbox_id: str) -> bool:
        """True while a call of this process's client of the sandbox runs (a use the
        ledger may not count: a client used outside ``use``)."""
        seen = self._seen.get(sandbox_id)
        return seen is not None and (
            seen.lock.locked() or (seen.client is not None and seen.client.idle_since is None)
        )

    def seen_ids(self) -> tuple[str, ...]:
        """Ids of the sandboxes this process has used and not destroyed."""
        return tuple(self._seen)

    def seen_handle(self, sandbox_id: str) -> SandboxHandle | None:
        """The handle of a sandbox this process has used, if any."""
        seen = self._seen.get(sandbox_id)
        return None if seen is None else seen.handle

    async def aclose(self) -> None:
        """Stop the background task and close every client (sandboxes keep running)."""
        await self.stop()
        for seen in self._seen.values():
            if seen.client is not None:
                await seen.client.aclose()
                seen.client = None
