"""Dramatiq wiring: the broker, the ``advance`` actor, and the per-process runtime.

A Dramatiq message is only a wake-up (``advance(session_id, token)``); Postgres is
the source of truth (ARCHITECTURE.md §5). Facts this module is tuned for, measured
on Dramatiq 2.2.1 + Redis 7: with default settings an unacked message of a
SIGKILLed worker came back after 160 s to over 1,000 s; with
``heartbeat_timeout=10000`` and ``maintenance_chance=1000000`` (out of a million
commands) after 10 s. Recovery does not rely on the broker alone: the sweeper
re-enqueues runnable sessions whose lease expired.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import dramatiq
from dramatiq.asyncio import get_event_loop_thread
from dramatiq.brokers.redis import RedisBroker
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import AsyncIO, Middleware

from harness import ModelStalled, ModelUnavailable, WorkspaceUnavailable
from memory_store import DatabaseUnavailable

from .runner import Crasher, CrashPoint, no_crash
from .runtime import Runtime
from .settings import Settings

log = logging.getLogger(__name__)

QUEUE = "warroom"
HEARTBEAT_TIMEOUT_MS = 10_000
MAINTENANCE_CHANCE = 1_000_000
STEP_TIME_LIMIT_MS = 11 * 60 * 1000  # one step: Bash may take 10 min (Claude Code's max)
MAX_RETRIES = 3
TRANSIENT = (ModelUnavailable, ModelStalled, WorkspaceUnavailable, DatabaseUnavailable)


def make_broker(redis_url: str | None) -> dramatiq.Broker:
    """A Redis broker tuned for fast redelivery, or an in-memory one when no URL."""
    broker: dramatiq.Broker
    if redis_url:
        broker = RedisBroker(  # type: ignore[no-untyped-call]
            url=redis_url,
            heartbeat_timeout=HEARTBEAT_TIMEOUT_MS,
            maintenance_chance=MAINTENANCE_CHANCE,
        )
    else:
        broker = StubBroker()
    broker.add_middleware(AsyncIO())
    return broker


def crash_from(spec: str | None) -> Crasher:
    """A crasher for crash tests: ``point@step`` SIGKILLs this process the first time
    (attempt 0) the step numbered ``step`` reaches ``point``. None → never."""
    if not spec:
        return no_crash
    name, _, step_text = spec.partition("@")
    point, at_step = CrashPoint(name), int(step_text or 0)

    def crash(point_reached: CrashPoint, *, step: int, attempt: int) -> None:
        if point_reached is point and step == at_step and attempt == 0:
            log.warning("crash test: SIGKILL at %s of step %d", point, step)
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


class RuntimeHolder:
    """Opens the process's ``Runtime`` lazily, on the loop that first asks for it."""

    def __init__(self, settings: Settings, enqueue: Callable[[str, str], Awaitable[None]]) -> None:
        self.settings = settings
        self._enqueue = enqueue
        self._runtime: Runtime | None = None
        self._lock: asyncio.Lock | None = None

    async def get(self) -> Runtime:
        """The runtime (opened on first call). Raises what ``Runtime.open`` raises."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._runtime is None:
                self._runtime = await Runtime.open(
                    self.settings, enqueue=self._enqueue, crash=crash_from(self.settings.crash_at)
                )
        return self._runtime

    async def close(self) -> None:
        """Close the runtime if it was opened."""
        if self._runtime is not None:
            await self._runtime.close()
            self._runtime = None


@dataclass
class Actors:
    """The declared actors and how to enqueue without blocking an event loop."""

    advance: dramatiq.Actor[Any, Any]

    async def enqueue(self, session_id: str, token: str) -> None:
        """Send ``advance(session_id, token)``; ``Actor.send`` blocks, so in a thread."""
        await asyncio.to_thread(self.advance.send, session_id, token)


def _transient(retries: int, exc: BaseException) -> bool:
    return retries < MAX_RETRIES and isinstance(exc, TRANSIENT)


def declare_actors(broker: dramatiq.Broker, holder_ref: list[RuntimeHolder]) -> Actors:
    """Declare ``advance`` on ``broker``; it runs steps through ``holder_ref[0]``."""

    async def advance(session_id: str, token: str) -> None:
        runtime = await holder_ref[0].get()
        await runtime.driver.run(session_id, token)

    actor = dramatiq.actor(
        actor_name="advance",
        queue_name=QUEUE,
        broker=broker,
        max_retries=MAX_RETRIES,
        min_backoff=500,
        max_backoff=10_000,
        retry_when=_transient,
        time_limit=STEP_TIME_LIMIT_MS,
    )(advance)
    return Actors(advance=actor)


class Housekeeping(Middleware):
    """Runs the recovery sweeper on the worker's event loop; closes the runtime at shutdown."""

    def __init__(self, holder: RuntimeHolder) -> None:
        self.holder = holder
        self._future: Future[None] | None = None

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        thread = get_event_loop_thread()
        if thread is None:
            return

        async def run() -> None:
            runtime = await self.holder.get()
            await runtime.sweep_forever()

        self._future = asyncio.run_coroutine_threadsafe(run(), thread.loop)

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        thread = get_event_loop_thread()
        if self._future is not None:
            self._future.cancel()
        if thread is not None:
            thread.run_coroutine(self.holder.close())


def setup(settings: Settings) -> tuple[dramatiq.Broker, Actors, RuntimeHolder]:
    """Make the broker, set it as Dramatiq's global broker, declare the actors, and
    install the housekeeping middleware. The one place the global broker is set."""
    broker = make_broker(settings.redis_url)
    dramatiq.set_broker(broker)
    ref: list[RuntimeHolder] = []
    actors = declare_actors(broker, ref)
    holder = RuntimeHolder(settings, actors.enqueue)
    ref.append(holder)
    broker.add_middleware(Housekeeping(holder))
    return broker, actors, holder
