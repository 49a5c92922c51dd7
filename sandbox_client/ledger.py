"""``SandboxLedger``: the shared record of each sandbox's use, so that every process
decides alike when a sandbox is idle.

A worker must not freeze or destroy a sandbox while a command of it runs through
another worker. Each use (a command, a file read or write) is counted in the ledger
while it runs; a suspension or destruction first *claims* the sandbox, which succeeds
only when no use is in flight anywhere and it has been unused long enough, and holds
off new uses until it is done (``release``/``forget``). ``bot`` wires a ledger kept in
the database (``memory_store.SandboxLedgerStore``); ``MemoryLedger`` is the one-process
ledger used when none is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class SandboxLedger(Protocol):
    """Use counts, last use and claims of sandboxes, shared by every process.

    Contract:
        * Each call is atomic. Times are the ledger's own clock, in seconds.
        * A use in flight is counted until ``end_use`` or until its ``busy_s`` passed
          (a process that died mid-use blocks claims no longer than that).
        * ``claim_idle`` and ``claim_expired`` succeed only for a sandbox with no use in
          flight and no live claim; a claim lasts ``hold_s`` at most.
        * ``begin_use`` counts the use even while a claim holds the sandbox, and
          returns how long that claim may still last: the caller waits for it to end
          (``hold_remaining_s`` reaches 0) before touching the sandbox.
        * Unknown sandbox ids are not errors: uses of them are not counted and claims
          of them fail.
        * A process known to be dead (the database ledger judges its owner id) stops
          counting at ``take_abandoned``, whatever its ``busy_s``.
    """

    async def record(
        self, sandbox_id: str, *, handle_json: str, scope: str, session_id: str | None
    ) -> None:
        """Note a new sandbox (used now) of ``scope`` and, if known, its session."""
        ...

    async def begin_use(self, sandbox_id: str, *, busy_s: float) -> float:
        """Count one use in flight; returns the seconds a live claim may still last."""
        ...

    async def end_use(self, sandbox_id: str) -> None:
        """End one use (the sandbox was used now)."""
        ...

    async def hold_remaining_s(self, sandbox_id: str) -> float:
        """Seconds the live claim on the sandbox may still last (0: none)."""
        ...

    async def claim_idle(self, sandbox_id: str, *, idle_s: float, hold_s: float) -> bool:
        """Claim the sandbox to suspend it: True when unused for ``idle_s``, unclaimed
        and with no use in flight."""
        ...

    async def release(self, sandbox_id: str) -> None:
        """End this process's claim (the sandbox was suspended, or was not)."""
        ...

    async def claim_expired(
        self, *, scope: str, idle_s: float, hold_s: float, limit: int
    ) -> tuple[tuple[str, str], ...]:
        """Claim, to destroy them, up to ``limit`` sandboxes of ``scope`` unused for
        ``idle_s`` or whose session has ended; returns ``(sandbox_id, handle_json)``s."""
        ...

    async def forget(self, sandbox_id: str) -> None:
        """Drop the sandbox's record (it was destroyed)."""
        ...

    async def take_abandoned(self, *, scope: str) -> tuple[tuple[str, str], ...]:
        """Stop counting the uses of ``scope``'s sandboxes by processes known to be dead;
        returns ``(sandbox_id, handle_json)`` of those no live process knows any more,
        which the caller now owns (suspends when idle, destroys when it stops)."""
        ...

    async def known(self, sandbox_ids: Sequence[str]) -> frozenset[str]:
        """Which of ``sandbox_ids`` the ledger records."""
        ...


@dataclass
class _Row:
    handle_json: str
    scope: str
    last_used: float
    in_flight: int = 0
    busy_until: float = 0.0
    held_until: float = 0.0


class MemoryLedger:
    """A ``SandboxLedger`` inside one process (no session knowledge: only idleness).

    Args:
        clock: seconds on a monotonic scale (tests pass one they advance).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._rows: dict[str, _Row] = {}

    async def record(
        self, sandbox_id: str, *, handle_json: str, scope: str, session_id: str | None
    ) -> None:
        """See ``SandboxLedger.record``."""
        self._rows[sandbox_id] = _Row(handle_json, scope, self._clock())

    async def begin_use(self, sandbox_id: str, *, busy_s: float) -> float:
        """See ``SandboxLedger.begin_use``."""
        row, now = self._rows.get(sandbox_id), self._clock()
        if row is None:
            return 0.0
        row.in_flight = row.in_flight + 1 if row.busy_until >= now else 1
        row.busy_until = max(row.busy_until, now + busy_s)
        row.last_used = now
        return max(0.0, row.held_until - now)

    async def end_use(self, sandbox_id: str) -> None:
        """See ``SandboxLedger.end_use``."""
        if (row := self._rows.get(sandbox_id)) is not None:
            row.in_flight = max(0, row.in_flight - 1)
            row.last_used = self._clock()

    async def hold_remaining_s(self, sandbox_id: str) -> float:
        """See ``SandboxLedger.hold_remaining_s``."""
        row = self._rows.get(sandbox_id)
        return 0.0 if row is None else max(0.0, row.held_until - self._clock())

    async def claim_idle(self, sandbox_id: str, *, idle_s: float, hold_s: float) -> bool:
        """See ``SandboxLedger.claim_idle``."""
        row, now = self._rows.get(sandbox_id), self._clock()
        if row is None or not self._claimable(row, now) or now - row.last_used < idle_s:
            return False
        row.held_until = now + hold_s
        return True

    def _claimable(self, row: _Row, now: float) -> bool:
        return (row.in_flight == 0 or row.busy_until < now) and row.held_until <= now

    async def release(self, sandbox_id: str) -> None:
        """See ``SandboxLedger.release``."""
        if (row := self._rows.get(sandbox_id)) is not None:
            row.held_until = 0.0

    async def claim_expired(
        self, *, scope: str, idle_s: float, hold_s: float, limit: int
    ) -> tuple[tuple[str, str], ...]:
        """See ``SandboxLedger.claim_expired``."""
        now, claimed = self._clock(), list[tuple[str, str]]()
        for sandbox_id, row in self._rows.items():
            if len(claimed) >= limit:
                break
            if row.scope == scope and self._claimable(row, now) and now - row.last_used >= idle_s:
                row.held_until = now + hold_s
                claimed.append((sandbox_id, row.handle_json))
        return tuple(claimed)

    async def forget(self, sandbox_id: str) -> None:
        """See ``SandboxLedger.forget``."""
        self._rows.pop(sandbox_id, None)

    async def take_abandoned(self, *, scope: str) -> tuple[tuple[str, str], ...]:
        """See ``SandboxLedger.take_abandoned``: one process, so no other can have died."""
        return ()

    async def known(self, sandbox_ids: Sequence[str]) -> frozenset[str]:
        """See ``SandboxLedger.known``."""
        return frozenset(i for i in sandbox_ids if i in self._rows)
