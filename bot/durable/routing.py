"""Steps go where the sandbox is: each worker host's own Dramatiq queue, and the router
that sends a session's next step to the host holding its sandbox (issue #30;
docs/architecture.md §5, "Several worker hosts").

Every ``warroom worker`` host has an identity (``WARROOM_HOST_ID``, default the machine's
host name) and consumes two Dramatiq queues: the shared one (``warroom``) and its own
(``warroom.host.<id>``, ``host_queue``). Dramatiq does the delivery: a message is sent
with ``queue_name`` set, nothing here schedules work. The rule (``HostRouter``):

- a session whose sandbox lives on host H (the ledger row of the sandbox in its
  checkpoint has H's scope) goes to H's queue while H is live: it beat within
  ``WARROOM_HOST_DEAD_AFTER_S`` and is not stopping;
- any other session (no sandbox yet, a remote Blaxel sandbox, a host gone) goes to the
  shared queue; the host that takes it replaces the sandbox as before and tells the model.

The sweeper re-enqueues wake-ups that went stale (lost, or held by a host that stopped
taking messages) to the shared queue, so a stuck host holds nobody hostage; a host that
stops (SIGTERM) marks itself stopping and hands its waiting sessions back to the shared
queue (``HostPresence.hand_over``), and its stopped worker destroys its sandboxes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.settings import Settings
from memory_store import DatabaseUnavailable, HostStore

log = logging.getLogger(__name__)

SHARED_QUEUE = "warroom"
"""The queue every worker host consumes (the ``advance`` actor's own ``queue_name``)."""
HOST_QUEUE_PREFIX = "warroom.host."

Send = Callable[[str, str, str], Awaitable[None]]
"""Sends ``advance(session_id, token)`` on a queue: ``send(queue, session_id, token)``."""
Enqueue = Callable[[str, str], Awaitable[None]]


def host_queue(host_id: str) -> str:
    """The Dramatiq queue only host ``host_id`` consumes.

    >>> host_queue("worker-2")
    'warroom.host.worker-2'
    """
    return f"{HOST_QUEUE_PREFIX}{host_id}"


def routes_by_host(settings: Settings) -> bool:
    """Whether steps are routed to their sandbox's host: local sandboxes with a Redis
    queue (several hosts can exist), unless ``WARROOM_HOST_ROUTING=false``. Blaxel
    sandboxes are reachable from any host, so their steps go to the shared queue."""
    return (
        settings.host_routing
        and settings.redis_url is not None
        and settings.sandbox_provider == "local"
    )


class HostRouter:
    """Sends a session's wake-up to the queue of the live host holding its sandbox, else
    to the shared queue (see the module docstring).

    Args:
        hosts: the hosts' rows (None: everything goes to the shared queue).
        send: puts ``advance(session_id, token)`` on a named queue.
        dead_after_s: a host silent this long is taken as gone.
    """

    def __init__(self, hosts: HostStore | None, send: Send, *, dead_after_s: float) -> None:
        self.hosts = hosts
        self.send = send
        self.dead_after_s = dead_after_s

    async def queue_for(self, session_id: str) -> str:
        """The queue the session's next step goes to (one database read). A database
        that does not answer sends it to the shared queue (any host can run it)."""
        if self.hosts is None:
            return SHARED_QUEUE
        try:
            queue = await self.hosts.queue_of(session_id, dead_after_s=self.dead_after_s)
        except DatabaseUnavailable:
            log.warning("session %s: its host could not be looked up; shared queue", session_id)
            return SHARED_QUEUE
        return queue or SHARED_QUEUE

    async def enqueue(self, session_id: str, token: str) -> None:
        """Send the wake-up where the session's sandbox is.

        Raises:
            dramatiq.errors.ConnectionError: the broker could not be reached (the
                session stays runnable; the sweeper enqueues it again later).
        """
        await self.send(await self.queue_for(session_id), session_id, token)

    async def enqueue_shared(self, session_id: str, token: str) -> None:
        """Send the wake-up to the shared queue (any host takes it). Raises as ``enqueue``."""
        await self.send(SHARED_QUEUE, session_id, token)


class HostPresence:
    """This worker host's row: registered at start, beaten while it runs, marked stopping
    and its waiting sessions handed back when it stops.

    Args:
        hosts: the hosts' rows.
        host_id: this host's identity.
        scope: the sandboxes it reaches (``SandboxManager.scope``).
        beat_s: how often ``beat_forever`` beats.
        enqueue_shared: sends a wake-up to the shared queue.
    """

    def __init__(
        self,
        hosts: HostStore,
        host_id: str,
        *,
        scope: str,
        beat_s: float,
        enqueue_shared: Enqueue,
    ) -> None:
        self.hosts = hosts
        self.host_id = host_id
        self.queue = host_queue(host_id)
        self.scope = scope
        self.beat_s = beat_s
        self.enqueue_shared = enqueue_shared
        self._handed_over = False

    async def start(self) -> None:
        """Register the host as live (a warning when another live host has its identity
        with other sandboxes: two hosts need two ``WARROOM_HOST_ID``s).

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        other = await self.hosts.start(self.host_id, queue=self.queue, scope=self.scope)
        log.info("worker host %s: its own queue is %s", self.host_id, self.queue)
        if other is not None:
            log.warning(
                "host %s also runs with other sandboxes (%s): give each worker host its own "
                "WARROOM_HOST_ID, or steps will miss their sandboxes",
                self.host_id,
                other,
            )

    async def beat_forever(self) -> None:
        """Beat every ``beat_s`` until cancelled; errors are logged (a host that cannot
        reach the database is taken as gone after ``WARROOM_HOST_DEAD_AFTER_S``)."""
        while True:
            try:
                await self.hosts.beat(self.host_id)
            except Exception:
                log.exception("host heartbeat failed")
            await asyncio.sleep(self.beat_s)

    async def hand_over(self) -> int:
        """The host stops: route nothing more to it, and send the sessions waiting on its
        sandboxes to the shared queue (a duplicate of a wake-up already queued claims
        nothing). Once per process; returns how many were handed back.

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        if self._handed_over:
            return 0
        self._handed_over = True
        await self.hosts.stop(self.host_id)
        waiting = await self.hosts.waiting_on(self.scope)
        for wakeup in waiting:
            await self.enqueue_shared(wakeup.session_id, wakeup.token)
        if waiting:
            log.info("host %s stopping: %d sessions handed back", self.host_id, len(waiting))
        return len(waiting)
