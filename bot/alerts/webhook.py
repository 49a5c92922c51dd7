"""``POST /alerts/<source>``: check, record, answer; the alerts are taken off the request path.

The request path does only what makes the alert safe: the token or signature (401,
logged without the body; a request with neither the token nor a signature header is
refused before its body is read), the size limit (413), parsing (400 with what is
wrong; nothing is recorded), routing (every alert has a channel, or 422 and nothing
recorded), and one transaction recording every alert of the delivery (concurrent
requests share one: ``GroupCommit``). Then it answers 202 and wakes the ``Taker``,
one task per process that takes recorded alerts in order
(``AlertIntake.take_pending``): posting, starting sessions and replying never delay
an ack. A crash after the ack loses nothing: the next start takes what was left.

A delivery with no id of its own (Alertmanager, Grafana) is identified by its body's
digest within ``retry_window_s``: a retry sends the same body, so it is recorded once;
the same body after the window (Alertmanager's ``repeat_interval``) is a repeat.

Served by the Slack HTTP listener (HTTP mode) or by a small listener of its own
(``start_listener``, Socket Mode with ``WARROOM_ALERT_PORT``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from aiohttp import web

from bot.alerts.auth import AlertAuth
from bot.alerts.intake import AlertIntake
from bot.alerts.model import Alert
from bot.alerts.routes import Routes
from bot.alerts.sources import MAX_BODY_BYTES, SOURCES, BadPayload, body_digest, parse
from memory_store import DatabaseUnavailable

logger = logging.getLogger(__name__)

PATH = "/alerts/{source}"
DEFAULT_RETRY_WINDOW_S = 300.0
YIELD_S = 0.05
"""Longest the taker waits for recordings in flight before its next alert."""


@dataclass
class Taker:
    """The one task per process that takes recorded alerts (``wake`` after recording)."""

    intake: AlertIntake
    poll_s: float = 5.0
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _passes: int = field(default=0, init=False)
    _busy: bool = field(default=False, init=False)
    _passed: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)
    _recording: int = field(default=0, init=False)
    _quiet: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def __post_init__(self) -> None:
        self._quiet.set()

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Around a request's recording: the taker waits (≤ ``YIELD_S``) while any runs,
        so acks go first under a storm."""
        self._recording += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._recording -= 1
            if self._recording == 0:
                self._quiet.set()

    async def _let_recordings_go_first(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._quiet.wait(), timeout=YIELD_S)

    def wake(self) -> None:
        """Something was recorded: take it soon."""
        self._wake.set()

    def start(self) -> None:
        """Start taking (leftovers of an earlier run first)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="alert taker")

    async def stop(self) -> None:
        """Stop taking (an alert being taken is cut short: it stays recorded, or its
        thread stays to be resumed), then let storm summaries show their last tally."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.intake.flush(), timeout=10.0)

    async def settled(self) -> None:
        """Wait until everything recorded before this call has been taken (a pass of
        the taker that started after it has ended)."""
        target = self._passes + (2 if self._busy else 1)
        self.wake()
        async with self._passed:
            await self._passed.wait_for(lambda: self._passes >= target)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            self._busy = True
            try:
                await self.intake.take_pending(before_each=self._let_recordings_go_first)
                await self.intake.resume_openings()
            except Exception:  # a bad row or the database away: logged, tried again
                logger.exception("taking recorded alerts failed; trying again")
            self._busy = False
            async with self._passed:
                self._passes += 1
                self._passed.notify_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll_s)


Routed = list[tuple[Alert, str | None]]


@dataclass
class GroupCommit:
    """Records concurrent requests' alerts in one transaction: the first request writes at
    once; requests arriving while a write runs are written together by the next one."""

    intake: AlertIntake
    org_id: str
    _queue: list[tuple[Routed, asyncio.Future[list[int]]]] = field(default_factory=list)
    _writer: asyncio.Task[None] | None = None

    async def record(self, routed: Routed) -> list[int]:
        """The new rows' ids of this delivery (``AlertIntake.record``).

        Raises:
            DatabaseUnavailable: nothing of this delivery was recorded.
        """
        done: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        self._queue.append((routed, done))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="alert group commit")
        return await done

    async def _write(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                await self._write_batch(batch)
        finally:
            self._writer = None

    async def _write_batch(self, batch: list[tuple[Routed, asyncio.Future[list[int]]]]) -> None:
        """One transaction for ``batch``; when it fails for any reason but the database
        being away, each delivery is written alone, so one delivery the database refuses
        fails only its own request, not those that shared its transaction."""
        try:
            ids = await self.intake.record_groups(
                [routed for routed, _ in batch], org_id=self.org_id
            )
        except Exception as exc:
            if len(batch) > 1 and not isinstance(exc, DatabaseUnavailable):
                for one in batch:
                    await self._write_batch([one])
                return
            for _, done in batch:  # every waiting request answers it (503 or 500)
                if not done.done():
                    done.set_exception(exc)
            return
        for (_, done), new in zip(batch, ids, strict=True):
            if not done.done():
                done.set_result(new)


@dataclass(frozen=True)
class AlertWebhook:
    """The ``POST /alerts/<source>`` handler.

    Attributes:
        intake: records the alerts.
        taker: takes them after the answer.
        routes: which channel each alert's thread goes to.
        auth: the token and signing secrets.
        org_id: the org the alerts belong to (the installing workspace or Grid org).
        retry_window_s: how long an id-less delivery's body means "a retry".
    """

    intake: AlertIntake
    taker: Taker
    routes: Routes
    auth: AlertAuth
    org_id: str
    retry_window_s: float = DEFAULT_RETRY_WINDOW_S
    commits: GroupCommit = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "commits", GroupCommit(self.intake, self.org_id))

    def routes_table(self) -> list[web.RouteDef]:
        """The aiohttp routes to add to a listener."""
        return [web.post(PATH, self.handle)]

    async def handle(self, request: web.Request) -> web.Response:
        """Check, record, answer (see the module docstring)."""
        source = request.match_info["source"]
        if source not in SOURCES:
            return _error(404, f"unknown alert source {source!r}; one of: {', '.join(SOURCES)}")
        if not self.auth.may_pass(source, request.headers):  # before reading any body
            return _refused(request)
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _error(413, f"the body is over {MAX_BODY_BYTES} bytes")
        body = await request.read()
        if len(body) > MAX_BODY_BYTES:
            return _error(413, f"the body is over {MAX_BODY_BYTES} bytes")
        if not self.auth.allows(source, request.headers, body):
            return _refused(request)
        bucket = int(time.time() // self.retry_window_s)
        try:
            alerts = parse(source, body, delivery=f"{body_digest(body)}:{bucket}")
        except BadPayload as exc:
            return _error(400, str(exc))
        routed = [(alert, self.routes.channel_for(alert)) for alert in alerts]
        lost = [a.title for a, channel in routed if channel is None]
        if lost:
            return _error(422, f"no routing rule matches {lost[0]!r} and no default channel is set")
        try:
            with self.taker.recording():
                ids = await self.commits.record(routed)
        except DatabaseUnavailable as exc:
            logger.warning("alert not recorded: %s", exc)
            return _error(503, "the database is unavailable; retry")
        except Exception:  # the database refused this delivery (others were recorded)
            logger.exception("alert not recorded: the database refused it (%s)", source)
            return _error(500, "the alert could not be recorded")
        if ids:
            self.taker.wake()
        answer = {"recorded": len(ids), "duplicates": len(alerts) - len(ids)}
        return web.json_response(answer, status=202)


async def start_listener(
    webhook: AlertWebhook, *, host: str = "0.0.0.0", port: int = 0
) -> tuple[web.AppRunner, int]:
    """A listener of its own for ``POST /alerts/<source>`` and ``GET /healthz`` (Socket
    Mode, which has no HTTP listener) on ``host`` (``WARROOM_ALERT_HOST``: an IPv4 or
    IPv6 address; ``127.0.0.1`` behind a TLS proxy on the same host); returns it and
    the port it listens on. Nothing else is served there.

    Raises:
        OSError: the address could not be bound (``WARROOM_ALERT_HOST``/``_PORT``).
    """
    app = web.Application(client_max_size=MAX_BODY_BYTES + 1)
    app.add_routes(webhook.routes_table())
    app.router.add_get("/healthz", _healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        await web.SockSite(runner, sock).start()
    except OSError:
        sock.close()
        await runner.cleanup()
        raise
    return runner, int(sock.getsockname()[1])


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def _refused(request: web.Request) -> web.Response:
    logger.warning(
        "alert refused: bad credentials (%s %s from %s)",
        request.method,
        request.path,
        request.remote,
    )
    return _error(401, "missing or wrong bearer token or signature")


def _error(status: int, message: str) -> web.Response:
    return web.Response(
        status=status, text=json.dumps({"error": message}), content_type="application/json"
    )
