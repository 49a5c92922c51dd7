"""``SandboxManager``: a session's sandbox, provisioned lazily, suspended when idle,
resumed on use and replaced (with its set-up replayed) when gone."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sandbox_client.client import SandboxClient
from sandbox_client.errors import SandboxError, SandboxGone
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
    """Keeps sandboxes cheap and replaceable for the harness (docs/architecture.md §8).

    Call ``ensure`` before each sandbox operation. Idle sandboxes are suspended by
    ``suspend_idle`` (call it from the durable layer, or ``start`` a background task):
    a suspended sandbox holds no worker and no connection. Before suspending, the
    manager notes the sandbox's running processes and workspace files, so that a later
    replacement can say what was lost. That memory is per process: after a restart
    only the caller's set-up and the replay's outcome are known.

    Args:
        provider: where sandboxes come from.
        idle_suspend_s: a sandbox unused this long is suspended by ``suspend_idle``.
        new_sandbox_id: makes ids for new sandboxes.
        max_listed_files: the workspace listing taken before suspending stops here.
    """

    def __init__(
        self,
        provider: SandboxProvider,
        *,
        idle_suspend_s: float = 30.0,
        new_sandbox_id: Callable[[], str] = _new_sandbox_id,
        max_listed_files: int = 2000,
    ) -> None:
        self.provider = provider
        self.idle_suspend_s = idle_suspend_s
        self._new_id = new_sandbox_id
        self._max_listed_files = max_listed_files
        self._seen: dict[str, _Seen] = {}
        self._task: asyncio.Task[None] | None = None

    async def ensure(
        self, handle: SandboxHandle | None, setup: Sequence[SetupStep] = ()
    ) -> EnsureResult:
        """A ready sandbox: provisioned if ``handle`` is None, resumed if suspended,
        replaced (set-up replayed) if gone.

        Raises:
            ProvisionFailed: no sandbox could be made.
            SandboxUnavailable: the sandbox exists but does not answer.
        """
        if handle is None:
            return await self._provision_new(None, setup)
        seen = self._seen.setdefault(handle.sandbox_id, _Seen(handle, None, time.monotonic()))
        async with seen.lock:
            health = await self.provider.health(handle)
            if health is not Health.GONE:
                try:
                    return await self._reuse(seen, health)
                except SandboxGone:
                    pass
            return await self._replace(seen, setup)

    async def _reuse(self, seen: _Seen, health: Health) -> EnsureResult:
        if health is not Health.READY:
            await self.provider.resume(seen.handle)
        if seen.client is None:
            seen.client = self.provider.connect(seen.handle)
        seen.last_used = time.monotonic()
        return EnsureResult(seen.handle, seen.client)

    async def _replace(self, seen: _Seen, setup: Sequence[SetupStep]) -> EnsureResult:
        old = seen.handle
        running = set(seen.running)
        if seen.client is not None:
            running |= seen.client.unfinished_names
            await seen.client.aclose()
        self._seen.pop(old.sandbox_id, None)
        with contextlib.suppress(SandboxError, OSError):
            await self.provider.destroy(old)  # frees what is left (local: its directory)
        result = await self._provision_new(seen, setup)
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

    async def _provision_new(self, seen: _Seen | None, setup: Sequence[SetupStep]) -> EnsureResult:
        handle = await self.provider.provision(self._new_id())
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

    async def suspend_idle(self, now: float | None = None) -> tuple[str, ...]:
        """Suspend every sandbox unused for ``idle_suspend_s`` (none with a call running).

        Args:
            now: a ``time.monotonic()`` reading to compare with (default: now; tests
                pass a later one instead of waiting).

        Returns:
            The ids suspended.
        """
        now = time.monotonic() if now is None else now
        suspended = []
        for seen in list(self._seen.values()):
            client = seen.client
            if client is None or client.idle_since is None or seen.lock.locked():
                continue
            if now - max(seen.last_used, client.idle_since) < self.idle_suspend_s:
                continue
            async with seen.lock:
                if await self._suspend(seen):
                    suspended.append(seen.handle.sandbox_id)
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
        """Destroy ``handle``'s sandbox and forget it (the session is over)."""
        seen = self._seen.pop(handle.sandbox_id, None)
        if seen is not None and seen.client is not None:
            await seen.client.aclose()
        await self.provider.destroy(handle)

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

    async def aclose(self) -> None:
        """Stop the background task and close every client (sandboxes keep running)."""
        await self.stop()
        for seen in self._seen.values():
            if seen.client is not None:
                await seen.client.aclose()
                seen.client = None
