"""A worker's sandboxes over their whole life: the manager with the shared ledger, and
the housekeeping that suspends, destroys and reaps them (docs/architecture.md §8).

Every worker process shares one ledger (``SandboxLedgerStore``, the database), so a
sandbox is suspended or destroyed only when no worker runs a command in it. Each
sweep suspends this process's idle sandboxes, destroys the sandboxes of sessions that
ended and of this host's sessions idle past ``WARROOM_SANDBOX_IDLE_DESTROY_S``, adopts
the sandboxes of processes that died (a SIGKILLed worker's use stops counting at once),
and now and then reaps jails the ledger never recorded; stopping destroys what this
process used or adopted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from bot.settings import Settings
from harness import Checkpoint
from memory_store import Database, SandboxLedgerStore, SessionStore
from sandbox_client import Reaper, SandboxError, SandboxHandle, SandboxManager, SandboxProvider

log = logging.getLogger(__name__)

ORPHAN_REAP_INTERVAL_S = 60.0
"""How often a worker looks for jails the ledger never recorded (a directory scan)."""
ADOPT_INTERVAL_S = 2.0
"""How often a worker looks for sandboxes whose users died (two short queries, one of
``pg_locks``); a sweep comes every ``WARROOM_SWEEP_INTERVAL_S`` (0.5 s), a stop always
looks."""


def sandbox_scope(settings: Settings) -> str:
    """The sandboxes this process can reach and destroy: local jails live on one host
    (``WARROOM_HOST_ID``) under one data directory; Blaxel sandboxes anywhere in the
    workspace."""
    if settings.sandbox_provider == "blaxel":
        return f"blaxel:{settings.bl_workspace}"
    return f"local:{settings.host_id}:{(settings.data_dir / 'sbx').resolve()}"


def make_sandbox_manager(
    settings: Settings, db: Database, provider: SandboxProvider, *, owner: str | None = None
) -> SandboxManager:
    """The process's manager over ``provider``, deciding idleness through the database;
    ``owner``: the process's id for its uses (a worker's id; default: by PID)."""
    return SandboxManager(
        provider,
        idle_suspend_s=settings.sandbox_idle_suspend_s,
        idle_destroy_s=settings.sandbox_idle_destroy_s,
        ledger=SandboxLedgerStore(db, owner=owner),
        scope=sandbox_scope(settings),
    )


class SandboxKeeping:
    """The sandbox part of a worker's sweep, and its clean stop.

    Args:
        manager: the process's sandbox manager.
        sessions: to find the sandbox of a session that ended.
        orphan_interval_s: how often ``sweep`` also reaps orphans.
    """

    def __init__(
        self,
        manager: SandboxManager,
        sessions: SessionStore,
        *,
        orphan_interval_s: float = ORPHAN_REAP_INTERVAL_S,
    ) -> None:
        self.manager = manager
        self.reaper = Reaper(manager)
        self._sessions = sessions
        self._orphan_interval_s = orphan_interval_s
        self._next_orphan_reap = 0.0
        self._next_adoption = 0.0

    async def sweep(self, ended_session_ids: Iterable[str] = ()) -> tuple[str, ...]:
        """Suspend idle sandboxes, destroy those of ``ended_session_ids`` and those the
        ledger finds idle long or orphaned by their session; returns the ids destroyed.

        Raises:
            DatabaseUnavailable: the ledger could not be reached.
        """
        for session_id in ended_session_ids:
            await self.end_session(session_id)
        if time.monotonic() >= self._next_adoption:  # a dead process's: suspended here now
            self._next_adoption = time.monotonic() + ADOPT_INTERVAL_S
            await self.manager.adopt_abandoned()
        await self.manager.suspend_idle()
        destroyed = await self.reaper.destroy_idle()
        if time.monotonic() >= self._next_orphan_reap:
            self._next_orphan_reap = time.monotonic() + self._orphan_interval_s
            destroyed += await self.reaper.reap_orphans()
        return destroyed

    async def end_session(self, session_id: str) -> None:
        """Destroy the sandbox of a session that ended (done, failed, cancelled), unless a
        command runs in it (then a later sweep does). Failures are logged."""
        session = await self._sessions.get(session_id)
        if session is not None and not _is_subagent(session.checkpoint):
            await self.end(_handle_of(session.checkpoint) or session.sandbox)

    async def end(self, handle_json: str | None) -> None:
        """``end_session`` for a known handle (None: nothing to do)."""
        if handle_json is None:
            return
        try:
            await self.manager.retire(SandboxHandle.from_json(handle_json))
        except (SandboxError, OSError, ValueError):
            log.exception("could not destroy the sandbox of an ended session")

    async def shutdown(self) -> tuple[str, ...]:
        """Destroy every sandbox this process used that no command holds (the process is
        stopping); the rest are destroyed by another worker's sweep. Never raises."""
        try:
            return await self.reaper.shutdown()
        except Exception:
            log.exception("sandbox shutdown failed")
            return ()


def _is_subagent(checkpoint_json: str) -> bool:
    """Whether the stored checkpoint is a subagent's (its sandbox is its parent's)."""
    try:
        return Checkpoint.from_json(checkpoint_json).parent is not None
    except ValueError:
        return False


def _handle_of(checkpoint_json: str) -> str | None:
    """The sandbox handle a stored checkpoint holds."""
    try:
        return Checkpoint.from_json(checkpoint_json).sandbox
    except ValueError:
        return None
