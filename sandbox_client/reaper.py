"""``Reaper``: destroys the sandboxes nobody will use again, so jails never leak.

Three kinds (docs/architecture.md §8): sandboxes of this scope the ledger finds unused
for ``idle_destroy_s`` or whose session ended (``destroy_idle``: the session's set-up
is replayed on its next use and the model told, as for any replacement); sandboxes
the provider has that the ledger never recorded, left by a process that died between
provisioning and recording (``reap_orphans``); and at shutdown those this process used
or adopted from a process that died (``shutdown``). A sandbox with a use in flight
anywhere is never taken.
"""

from __future__ import annotations

import contextlib
import logging

from sandbox_client.errors import SandboxError
from sandbox_client.lifecycle import SandboxManager
from sandbox_client.records import SandboxHandle

log = logging.getLogger(__name__)


class Reaper:
    """Destroys a manager's idle, ended and orphaned sandboxes (see the module docstring).

    Args:
        manager: whose provider, ledger and scope to use.
        orphan_grace_s: a sandbox the ledger does not know is an orphan only once its
            record is older than this (it is recorded right after provisioning).
        batch: the most sandboxes one ``destroy_idle`` call takes.
    """

    def __init__(
        self, manager: SandboxManager, *, orphan_grace_s: float = 60.0, batch: int = 50
    ) -> None:
        self.manager = manager
        self.orphan_grace_s = orphan_grace_s
        self.batch = batch

    async def destroy_idle(self) -> tuple[str, ...]:
        """Destroy the sandboxes of this scope idle past ``idle_destroy_s`` or whose
        session ended. Returns their ids; failures are logged and retried later."""
        manager = self.manager
        claimed = await manager.ledger.claim_expired(
            scope=manager.scope,
            idle_s=manager.idle_destroy_s,
            hold_s=manager.hold_s,
            limit=self.batch,
        )
        destroyed = []
        for sandbox_id, handle_json in claimed:
            if manager.busy_here(sandbox_id):  # a call of ours runs there: not idle
                await manager.ledger.release(sandbox_id)
                continue
            if await self._destroy(SandboxHandle.from_json(handle_json)):
                destroyed.append(sandbox_id)
        return tuple(destroyed)

    async def reap_orphans(self) -> tuple[str, ...]:
        """Destroy the provider's sandboxes the ledger does not record (older than
        ``orphan_grace_s``). Returns their ids."""
        manager = self.manager
        handles = await manager.provider.list_sandboxes(older_than_s=self.orphan_grace_s)
        known = await manager.ledger.known([h.sandbox_id for h in handles])
        reaped = []
        for handle in handles:
            if handle.sandbox_id in known or handle.sandbox_id in manager.seen_ids():
                continue
            if await self._destroy(handle):
                reaped.append(handle.sandbox_id)
        return tuple(reaped)

    async def shutdown(self) -> tuple[str, ...]:
        """Destroy every sandbox this process used that no use anywhere holds, or that the
        ledger forgot (its session moved on to a replacement elsewhere), then close the
        manager (this process is stopping). Returns the ids destroyed."""
        manager = self.manager
        await manager.stop()
        try:  # a dead process's sandboxes: this may be the last process of the scope
            await manager.adopt_abandoned()
        except Exception:
            log.exception("could not adopt the sandboxes of dead processes at shutdown")
        destroyed = []
        seen = manager.seen_ids()
        known = await manager.ledger.known(seen)
        for sandbox_id in seen:
            handle = manager.seen_handle(sandbox_id)
            if handle is None:
                continue
            try:
                if sandbox_id not in known:
                    await manager.destroy(handle)
                    destroyed.append(sandbox_id)
                elif await manager.retire(handle):
                    destroyed.append(sandbox_id)
            except SandboxError:
                log.exception("sandbox %s: could not destroy it at shutdown", sandbox_id)
        await manager.aclose()
        return tuple(destroyed)

    async def _destroy(self, handle: SandboxHandle) -> bool:
        try:
            await self.manager.destroy(handle)
        except (SandboxError, OSError):
            log.exception("sandbox %s: could not destroy it", handle.sandbox_id)
            with contextlib.suppress(SandboxError, OSError):
                await self.manager.ledger.release(handle.sandbox_id)
            return False
        return True
