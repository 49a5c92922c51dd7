"""Dramatiq wiring: the broker, the ``advance`` actor, and the per-process runtime.

A Dramatiq message is only a wake-up (``advance(session_id, token)``); Postgres is
the source of truth (docs/architecture.md §5). Facts this module is tuned for, measured
on Dramatiq 2.2.1 + Redis 7: with default settings an unacked message of a
SIGKILLed worker came back after 160 s to over 1,000 s; with
``heartbeat_timeout=10000`` and ``maintenance_chance=1000000`` (out of a million
commands) after 10 s. Recovery does not rely on the broker alone: the sweeper
re-enqueues runnable sessions whose lease expired.

Shutdown (Dramatiq's CLI): SIGTERM to the ``dramatiq`` parent makes each worker
process stop taking messages, finish the step it runs (up to
``--worker-shutdown-timeout``, default 10 min) and exit; only then is the runtime
closed. A SIGTERM sent to the whole process group reaches each worker process twice
(directly and from the parent): ``shutdown.keep_first_stop_signal`` makes the second
one harmless, and from the first signal on the worker takes no new step
(``RuntimeHolder.drain``: a wake-up it receives is handed back to the queue unrun).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Collection
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import dramatiq
from dramatiq.asyncio import get_event_loop_thread
from dramatiq.brokers.redis import RedisBroker
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import AsyncIO, Middleware

from bot.durable.crash_points import Crasher, CrashPoint, no_crash
from bot.durable.driver import ThreadPoster
from bot.durable.wiring import Runtime
from bot.settings import Settings
from harness import ModelStalled, ModelUnavailable, WorkspaceUnavailable
from memory_store import DatabaseUnavailable, SessionOrigin

log = logging.getLogger(__name__)

QUEUE = "warroom"
HEARTBEAT_TIMEOUT_MS = 10_000
MAINTENANCE_CHANCE = 1_000_000
WORKER_TIMEOUT_MS = 100
"""Dramatiq's idle poll cap (``dramatiq_worker_timeout``, default 1,000 ms): an idle
consumer backs off exponentially up to it between Redis fetches, so the wake-up of a
session's next step waited ~15 ms per step on average at the default; at 100 ms the
idle cost is ~10 fetches/s per worker process. Read by Dramatiq at import: the
launcher sets it in the worker's environment (see ``bot.cli.worker``)."""
STEP_TIME_LIMIT_MS = 11 * 60 * 1000  # one step: Bash may take 10 min (Claude Code's max)
MAX_RETRIES = 3
MIN_BACKOFF_MS = 500
MAX_BACKOFF_MS = 10_000
TRANSIENT = (ModelUnavailable, ModelStalled, WorkspaceUnavailable, DatabaseUnavailable)


def make_broker(redis_url: str | None) -> dramatiq.Broker:
    """A Redis broker tuned for fast redelivery, or an in-memory one when no URL.

    Both carry Dramatiq's default middleware (time limits, retries, …) and the
    AsyncIO middleware that runs async actors on one event loop per process.
    """
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


@dataclass(frozen=True)
class CrashRule:
    """One rule of a crash spec: SIGKILL at ``point`` of step ``step``.

    ``every_attempt`` False fires on the first attempt only (``attempt == 0``);
    ``session_id`` None matches every session.
    """

    point: CrashPoint
    step: int
    every_attempt: bool = False
    session_id: str | None = None

    def matches(self, point: CrashPoint, *, session_id: str, step: int, attempt: int) -> bool:
        """Whether this rule fires for a crash point reached with these values."""
        return (
            point is self.point
            and step == self.step
            and (self.every_attempt or attempt == 0)
            and self.session_id in (None, session_id)
        )


def parse_crash_spec(spec: str) -> tuple[CrashRule, ...]:
    """Rules from ``WARROOM_CRASH_AT``: comma-separated ``point@step[!][:session_id]``.

    ``!`` fires on every attempt (a crash loop), not only the first.

    >>> rule = parse_crash_spec("before_model@0, after_tool@1!:s-1")[1]
    >>> rule.point.value, rule.step, rule.every_attempt, rule.session_id
    ('after_tool', 1, True, 's-1')

    Raises:
        ValueError: an unknown point or a step that is not a number.
    """
    rules = []
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        where, _, session_id = entry.partition(":")
        name, _, step_text = where.partition("@")
        every = step_text.endswith("!")
        rules.append(
            CrashRule(CrashPoint(name), int(step_text.rstrip("!") or 0), every, session_id or None)
        )
    return tuple(rules)


def crash_from(spec: str | None) -> Crasher:
    """A crasher for crash tests that SIGKILLs this process where a rule matches
    (``parse_crash_spec``); no spec → the production crasher that does nothing.

    Raises:
        ValueError: a malformed spec.
    """
    if not spec:
        return no_crash
    rules = parse_crash_spec(spec)

    def crash(point_reached: CrashPoint, *, session_id: str, step: int, attempt: int) -> None:
        if any(
            r.matches(point_reached, session_id=session_id, step=step, attempt=attempt)
            for r in rules
        ):
            log.warning(
                "crash test: SIGKILL at %s of step %d of %s", point_reached, step, session_id
            )
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


class RuntimeHolder:
    """Opens the process's ``Runtime`` lazily, on the loop that first asks for it.

    ``reporter`` replaces the Slack poster (``warroom chat`` prints to the terminal);
    ``origin`` and ``owned`` limit the sessions the runtime runs and sweeps (see
    ``Runtime``).
    """

    def __init__(
        self,
        settings: Settings,
        enqueue: Callable[[str, str], Awaitable[None]],
        *,
        reporter: ThreadPoster | None = None,
        origin: SessionOrigin = SessionOrigin.SLACK,
        owned: Collection[str] | None = None,
    ) -> None:
        self.settings = settings
        self._enqueue = enqueue
        self._reporter = reporter
        self._origin = origin
        self._owned = owned
        self._runtime: Runtime | None = None
        self._lock: asyncio.Lock | None = None
        self.draining = False  # the worker is stopping: take no new step
        self.worker: dramatiq.Worker | None = None  # set at boot (``Housekeeping``)

    def drain(self) -> None:
        """From now on take no new step: the worker's consumers fetch nothing more, the
        wake-ups it already holds are handed back to the queue unrun (so other workers
        take them at once; issue #32.2: with its consumers still fetching, a stopping
        worker took its own handed-back wake-up again, 157 times in a second), and a
        running message carries on to no further step. Safe from a signal handler: it
        only sets flags."""
        self.draining = True
        if self.worker is not None:
            for consumer in list(self.worker.consumers.values()):
                consumer.stop()  # its loop ends after the message in hand; acks still work
        if self._runtime is not None:
            self._runtime.driver.draining = True

    @property
    def opened(self) -> Runtime | None:
        """The runtime once opened (by ``get``), else None."""
        return self._runtime

    async def get(self) -> Runtime:
        """The runtime (opened on first call). Raises what ``Runtime.open`` raises."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._runtime is None:
                self._runtime = await Runtime.open(
                    self.settings,
                    enqueue=self._enqueue,
                    crash=crash_from(self.settings.crash_at),
                    reporter=self._reporter,
                    origin=self._origin,
                    owned=self._owned,
                )
                # What start-up made (modules, engine, clients) lives as long as the
                # process: out of the collector's generations, the garbage of a step (a
                # long session's messages, read on a process that did not run its
                # previous step) no longer makes a full collection walk it all
                # (bench/growth.py: it was most of such a step's time).
                gc.freeze()
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
        """Send ``advance(session_id, token)``; ``Actor.send`` blocks, so in a thread.

        Raises:
            dramatiq.errors.ConnectionError: the broker could not be reached (the
                session stays runnable; the sweeper enqueues it again later).
        """
        await asyncio.to_thread(self.advance.send, session_id, token)


def _transient(retries: int, exc: BaseException) -> bool:
    """Dramatiq's ``retry_when``: retry infrastructure hiccups only, a few times."""
    return retries < MAX_RETRIES and isinstance(exc, TRANSIENT)


def declare_actors(broker: dramatiq.Broker, holder_ref: list[RuntimeHolder]) -> Actors:
    """Declare ``advance`` on ``broker``; it runs steps through ``holder_ref[0]``.

    ``advance(session_id, token)`` is a thin shim over ``StepDriver.run``: one step
    per message, ``time_limit`` one step's worth, retried (with backoff) only for
    the ``TRANSIENT`` errors and at most ``MAX_RETRIES`` times.
    """

    async def advance(session_id: str, token: str) -> None:
        if holder_ref[0].draining:  # a stopping worker hands the wake-up back unrun
            log.info("session %s: worker stopping, wake-up handed back", session_id)
            await asyncio.to_thread(actor.send, session_id, token)
            return
        runtime = await holder_ref[0].get()
        await runtime.driver.run(session_id, token)

    actor = dramatiq.actor(
        actor_name="advance",
        queue_name=QUEUE,
        broker=broker,
        max_retries=MAX_RETRIES,
        min_backoff=MIN_BACKOFF_MS,
        max_backoff=MAX_BACKOFF_MS,
        retry_when=_transient,
        time_limit=STEP_TIME_LIMIT_MS,
    )(advance)
    return Actors(advance=actor)


class Housekeeping(Middleware):
    """Runs the recovery sweeper and the background-task watcher on the worker's event
    loop; closes the runtime at exit.

    Added after ``AsyncIO``, so its ``after_worker_shutdown`` runs first (Dramatiq
    calls ``after_*`` hooks in reverse order): the runtime is closed once the worker
    threads have finished their steps and while the event loop still runs.
    """

    def __init__(self, holder: RuntimeHolder) -> None:
        self.holder = holder
        self._future: Future[None] | None = None

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """Open the runtime and start sweeping (the first sweep re-enqueues lost work:
        over an in-memory broker, every runnable session, since its queue starts empty)."""
        self.holder.worker = worker
        thread = get_event_loop_thread()
        if thread is None:
            return
        in_memory = isinstance(broker, StubBroker)

        async def run() -> None:
            runtime = await self.holder.get()
            await asyncio.gather(
                runtime.sweep_forever(queue_was_empty=in_memory), runtime.watch_forever()
            )

        self._future = asyncio.run_coroutine_threadsafe(run(), thread.loop)

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """Stop sweeping and taking steps (a message still handed to a worker thread is
        sent back to the queue); steps in flight go on."""
        self.holder.drain()
        if self._future is not None:
            self._future.cancel()

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """Close the runtime on its loop, after every worker thread stopped."""
        thread = get_event_loop_thread()
        if thread is not None and thread.loop.is_running():
            thread.run_coroutine(self.holder.close())


def setup(
    settings: Settings,
    *,
    reporter: ThreadPoster | None = None,
    origin: SessionOrigin = SessionOrigin.SLACK,
    owned: Collection[str] | None = None,
) -> tuple[dramatiq.Broker, Actors, RuntimeHolder]:
    """Make the broker, set it as Dramatiq's global broker, declare the actors, and
    install the housekeeping middleware. The one place the global broker is set.
    ``reporter``, ``origin``, ``owned``: see ``RuntimeHolder``."""
    broker = make_broker(settings.redis_url)
    dramatiq.set_broker(broker)
    ref: list[RuntimeHolder] = []
    actors = declare_actors(broker, ref)
    holder = RuntimeHolder(settings, actors.enqueue, reporter=reporter, origin=origin, owned=owned)
    ref.append(holder)
    broker.add_middleware(Housekeeping(holder))
    return broker, actors, holder


class EmbeddedWorker:
    """The in-process worker of the embedded default (no ``REDIS_URL``): Dramatiq
    worker threads over the in-memory broker, in the bot's own process.

    Durability still comes from the database: on start the sweeper re-enqueues the
    sessions that were runnable when the process last stopped.
    """

    def __init__(self, broker: dramatiq.Broker, *, threads: int, poll_ms: int = 100) -> None:
        self.broker = broker
        self._worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=poll_ms)

    def start(self) -> None:
        """Start the worker threads (and, through ``Housekeeping``, the sweeper)."""
        self._worker.start()

    def stop(self, *, timeout_ms: int = 600_000) -> None:
        """Let running steps finish (at most ``timeout_ms``), then stop. Blocks."""
        self._worker.stop(timeout=timeout_ms)
