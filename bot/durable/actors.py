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
import time
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
from bot.durable.routing import SHARED_QUEUE, HostRouter, host_queue, routes_by_host
from bot.durable.setup_failure import fail_setup
from bot.durable.wiring import Runtime, make_worker_id
from bot.durable.worker_limits import STEP_TIME_LIMIT_MS as STEP_TIME_LIMIT_MS
from bot.durable.worker_limits import WORKER_TIMEOUT_MS as WORKER_TIMEOUT_MS
from bot.settings import Settings
from harness import ModelStalled, ModelUnavailable, WorkspaceUnavailable
from memory_store import DatabaseUnavailable, SessionOrigin

log = logging.getLogger(__name__)

QUEUE = SHARED_QUEUE
HEARTBEAT_TIMEOUT_MS = 10_000
MAINTENANCE_CHANCE = 1_000_000
MAX_RETRIES = 3
MIN_BACKOFF_MS = 500
MAX_BACKOFF_MS = 10_000
HAND_OVER_TIMEOUT_S = 10.0
"""The longest a stopping worker process waits to hand its host's sessions back."""
SETUP_RETRY_S = 30.0
"""How often a worker that could not open its runtime tries again to start sweeping (each
wake-up it receives meanwhile tries too, and tells its thread when it fails)."""
WIND_DOWN_TIMEOUT_S = 10.0
"""The longest a stopping worker waits, at each of its two waits, for the tasks left on its
event loop (the cancelled housekeeping, then whatever else) to finish unwinding."""
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
    ``Runtime``). With ``actors``, once the runtime is open their wake-ups are routed to
    the host of each session's sandbox (``routing``); ``host``: this process is a
    worker host's (it registers, beats and hands its sessions back when it stops).
    """

    def __init__(
        self,
        settings: Settings,
        enqueue: Callable[[str, str], Awaitable[None]],
        *,
        reporter: ThreadPoster | None = None,
        origin: SessionOrigin = SessionOrigin.SLACK,
        owned: Collection[str] | None = None,
        actors: Actors | None = None,
        host: bool = False,
    ) -> None:
        self.settings = settings
        self._enqueue = enqueue
        self._actors = actors
        self._host = host
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
                actors = self._actors
                runtime = await Runtime.open(
                    self.settings,
                    enqueue=self._enqueue,
                    enqueue_shared=actors.enqueue_shared if actors is not None else None,
                    crash=crash_from(self.settings.crash_at),
                    reporter=self._reporter,
                    origin=self._origin,
                    owned=self._owned,
                    host=self._host,
                )
                if actors is not None and routes_by_host(self.settings):
                    actors.router = HostRouter(
                        runtime.hosts, actors.send_to, dead_after_s=self.settings.host_dead_after_s
                    )
                # What start-up made (modules, engine, clients) lives as long as the
                # process: out of the collector's generations, the garbage of a step (a
                # long session's messages, read on a process that did not run its
                # previous step) no longer makes a full collection walk it all
                # (bench/growth.py: it was most of such a step's time).
                gc.freeze()
                self._runtime = runtime
        return self._runtime

    async def hand_over(self) -> int:
        """This host stops: hand its sessions back to the shared queue (``routing``);
        0 when the runtime is not open or the process is not a host's."""
        if self._runtime is None or self._runtime.presence is None:
            return 0
        return await self._runtime.presence.hand_over()

    async def fail_setup(self, session_id: str, token: str, error: BaseException) -> None:
        """End the session of a wake-up this worker could not set itself up for, telling
        its thread why (``setup_failure.fail_setup``; Slack unless a reporter was given).

        Raises:
            DatabaseUnavailable: the database could not be reached (the wake-up is retried).
        """
        await fail_setup(
            self.settings,
            session_id,
            token,
            error,
            worker_id=make_worker_id(),
            origin=self._origin,
            enqueue=self._enqueue,
            tell_slack=self._reporter is None,
        )

    async def close(self) -> None:
        """Close the runtime if it was opened."""
        if self._runtime is not None:
            await self._runtime.close()
            self._runtime = None


@dataclass
class Actors:
    """The declared actors and how to enqueue without blocking an event loop.

    ``router`` (set once a database is open, ``routing.HostRouter``) sends each wake-up
    to the queue of the host holding the session's sandbox; without one every wake-up
    goes to the shared queue.
    """

    advance: dramatiq.Actor[Any, Any]
    router: HostRouter | None = None

    async def enqueue(self, session_id: str, token: str) -> None:
        """Send ``advance(session_id, token)`` where the session's sandbox is (routed).

        Raises:
            dramatiq.errors.ConnectionError: the broker could not be reached (the
                session stays runnable; the sweeper enqueues it again later).
        """
        if self.router is not None:
            await self.router.enqueue(session_id, token)
        else:
            await self.send_to(QUEUE, session_id, token)

    async def enqueue_shared(self, session_id: str, token: str) -> None:
        """Send ``advance(session_id, token)`` to the shared queue. Raises as ``enqueue``."""
        await self.send_to(QUEUE, session_id, token)

    async def send_to(self, queue: str, session_id: str, token: str) -> None:
        """Send ``advance(session_id, token)`` on ``queue`` (Dramatiq's ``queue_name``:
        the actor's own, or a host's); sending blocks, so in a thread. Raises as
        ``enqueue``."""
        message = self.advance.message(session_id, token)
        if queue != message.queue_name:
            message = message.copy(queue_name=queue)
        await asyncio.to_thread(self.advance.broker.enqueue, message)


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
        try:
            runtime = await holder_ref[0].get()
        except TRANSIENT:
            raise  # retried (the database, the model API)
        except Exception as exc:  # permanent for this worker: the thread is told, no retry
            log.exception("session %s: the worker could not set itself up", session_id)
            await holder_ref[0].fail_setup(session_id, token, exc)
            return
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
    threads have finished their steps and while the event loop still runs. Dramatiq then
    stops and closes that loop without cancelling what still runs on it, so the wind-down
    first lets every task there unwind: a task abandoned mid database call left SQLite's
    connection thread posting its result to the closed loop (a traceback at exit).
    """

    def __init__(self, holder: RuntimeHolder) -> None:
        self.holder = holder
        self._future: Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """Open the runtime and start sweeping (the first sweep re-enqueues lost work:
        over an in-memory broker, every runnable session, since its queue starts empty)."""
        self.holder.worker = worker
        thread = get_event_loop_thread()
        if thread is None:
            return
        # an in-memory broker starts empty: what was sent before this process was lost
        queue_lost_at = time.monotonic() if isinstance(broker, StubBroker) else None

        async def run() -> None:
            self._task = asyncio.current_task()
            while True:  # a worker that cannot set itself up tries again now and then
                try:
                    runtime = await self.holder.get()
                except Exception:
                    log.exception("the worker could not set itself up; trying again later")
                    await asyncio.sleep(SETUP_RETRY_S)
                    continue
                await asyncio.gather(
                    runtime.sweep_forever(queue_lost_at=queue_lost_at),
                    runtime.watch_forever(),
                    runtime.beat_forever(),
                )

        self._loop = thread.loop
        self._future = asyncio.run_coroutine_threadsafe(run(), thread.loop)

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """Stop sweeping and taking steps (a message still handed to a worker thread is
        sent back to the queue), and hand the host's waiting sessions back to the shared
        queue (within ``HAND_OVER_TIMEOUT_S``); steps in flight go on."""
        self.holder.drain()
        if self._future is not None:
            self._future.cancel()
        if self._loop is not None and self._loop.is_running():
            handed = asyncio.run_coroutine_threadsafe(self.holder.hand_over(), self._loop)
            try:
                handed.result(HAND_OVER_TIMEOUT_S)
            except Exception:  # the sweepers of other hosts re-route them later
                log.exception("this host's sessions could not be handed back")

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """Wind down on the loop (``wind_down``), after every worker thread stopped."""
        thread = get_event_loop_thread()
        if thread is not None and thread.loop.is_running():
            thread.run_coroutine(self.wind_down())

    async def wind_down(self) -> None:
        """On the worker's loop: wait for the cancelled housekeeping to unwind (it may be
        opening the runtime, whose undo closes what it opened), close the runtime, then
        cancel whatever else still runs on the loop and wait for it too. Each wait lasts
        at most ``WIND_DOWN_TIMEOUT_S``; what is still running after it is left (logged).
        """
        try:
            if self._task is not None:
                await _unwound({self._task})
            await self.holder.close()
        finally:  # a runtime that failed to close (a database gone at exit) still unwinds
            me = asyncio.current_task()
            await _unwound({task for task in asyncio.all_tasks() if task is not me})


async def _unwound(tasks: set[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` (once: a second cancellation would cut short an undo they are
    running), wait at most ``WIND_DOWN_TIMEOUT_S`` for them to finish, and log those that
    did not. Their outcome (a cancellation, an error) is theirs: nothing is raised."""
    tasks = {task for task in tasks if not task.done()}
    if not tasks:
        return
    for task in tasks:
        if not task.cancelling():
            task.cancel()
    _, pending = await asyncio.wait(tasks, timeout=WIND_DOWN_TIMEOUT_S)
    for task in pending:
        log.warning("task %s still running as the worker's event loop stops", task.get_name())


def setup(
    settings: Settings,
    *,
    reporter: ThreadPoster | None = None,
    origin: SessionOrigin = SessionOrigin.SLACK,
    owned: Collection[str] | None = None,
    host: bool = False,
) -> tuple[dramatiq.Broker, Actors, RuntimeHolder]:
    """Make the broker, set it as Dramatiq's global broker, declare the actors, and
    install the housekeeping middleware. The one place the global broker is set.
    ``reporter``, ``origin``, ``owned``, ``host``: see ``RuntimeHolder``; a host's
    worker also consumes its own queue (``routing.host_queue``) when steps are routed."""
    broker = make_broker(settings.redis_url)
    dramatiq.set_broker(broker)
    ref: list[RuntimeHolder] = []
    actors = declare_actors(broker, ref)
    if host and routes_by_host(settings):
        broker.declare_queue(host_queue(settings.host_id))
    holder = RuntimeHolder(
        settings,
        actors.enqueue,
        reporter=reporter,
        origin=origin,
        owned=owned,
        actors=actors,
        host=host,
    )
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
