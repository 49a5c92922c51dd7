"""A running step's lease: renewed while the step runs, the step cancelled once it is fenced.

A claim holds its session for ``lease_s``; a worker that dies (SIGKILL, a lost host) is
recovered once its lease has run out, by the next sweep (docs/architecture.md §5). The
lease is thus the price of a resume, while a live worker whose renewal comes late loses
its step to another: renewals come ``RENEWALS_PER_LEASE`` times per lease, so one may be
late by three quarters of the lease before the step is taken over. Renewals run on the
worker's event loop, beside the steps: on an overloaded host (load 25 on 2 cores) a 2 s
lease (resume 2.5 s) lost 1–7 live steps per round of 20 sessions to takeovers, 5 s none
(``bench/load.py --lease-s``; issue #31).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from memory_store import Claim, DatabaseUnavailable, Fenced, SessionStore

__all__ = ["RENEWALS_PER_LEASE", "StepLease"]

log = logging.getLogger(__name__)

RENEWALS_PER_LEASE = 4
"""How many times a running step's lease is renewed per ``lease_s`` (every quarter)."""


class StepLease:
    """Keeps a claim's lease alive while its step runs (``async with``).

    Renews ``RENEWALS_PER_LEASE`` times per ``lease_s``. A renewal that finds the claim
    fenced (the session was stopped, or another worker took it over) cancels the step,
    which then leaves the block as ``Fenced``: nothing it does could be committed any more. Once
    the step calls ``committing()`` it is never cancelled (a renewal may then have lost
    only to the step's own commit; a real fence makes the commit raise ``Fenced``).
    """

    def __init__(self, sessions: SessionStore, claim: Claim, lease_s: float) -> None:
        self._sessions = sessions
        self._claim = claim
        self._lease_s = lease_s
        self._committing = False
        self._fenced = False
        self._step: asyncio.Task[object] | None = None
        self._renewer: asyncio.Task[None] | None = None

    def committing(self) -> None:
        """The step is about to commit: from now on a fenced renewal cancels nothing."""
        self._committing = True

    async def __aenter__(self) -> StepLease:
        self._step = asyncio.current_task()
        self._renewer = asyncio.create_task(self._renew())
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._committing = True
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        if kind is asyncio.CancelledError and self._fenced and self._step is not None:
            self._step.uncancel()
            raise Fenced(self._claim.session_id, self._claim.epoch)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self._lease_s / RENEWALS_PER_LEASE)
            try:
                await self._sessions.renew(self._claim, lease_s=self._lease_s)
            except Fenced:
                if not self._committing and self._step is not None:
                    self._fenced = True
                    self._step.cancel()
                return
            except DatabaseUnavailable:
                log.warning("session %s: lease renewal failed", self._claim.session_id)
