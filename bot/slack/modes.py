"""Running the Slack app: Socket Mode (the default, no public URL) or HTTP mode, same handlers.

- Socket Mode: slack-bolt's ``AsyncSocketModeHandler`` (aiohttp) opens a WebSocket URL
  with ``apps.connections.open`` (an app-level ``xapp-`` token with
  ``connections:write``), acks each envelope by its ``envelope_id`` and reconnects
  on ``disconnect``.
- HTTP mode: an aiohttp server with ``POST <path>`` (default ``/slack/events``, the
  Request URL for events, commands and interactivity) handing each request to
  ``AsyncApp.async_dispatch``, and ``GET /healthz``.

``serve`` is what the CLI calls: start, run until ``stop`` is set, then close and let
started follow-ups finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import socket
from collections.abc import Awaitable
from dataclasses import dataclass

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackCallFailed, slack_call
from bot.slack.background import Background
from bot.slack.signatures import HTTP_REQUEST_KEY

logger = logging.getLogger(__name__)

DEFAULT_PATH = "/slack/events"
APP_TOKEN_REFUSALS = frozenset(
    {"invalid_auth", "not_authed", "not_allowed_token_type", "token_revoked", "account_inactive"}
)
"""``apps.connections.open`` errors that retrying cannot fix (Slack's method docs)."""


class AppTokenRefused(SlackCallFailed):
    """Slack refused the app-level token (``SLACK_APP_TOKEN``): a configuration error."""

    variable = "SLACK_APP_TOKEN"


@dataclass(frozen=True)
class SocketMode:
    """Connect out to Slack over a WebSocket.

    ``app_token`` is the ``xapp-`` token; ``web_client`` answers
    ``apps.connections.open`` (default: the app's own client, whose ``base_url`` is
    used).
    """

    app_token: str
    web_client: AsyncWebClient | None = None


class PortUnavailable(OSError):
    """HTTP mode's port could not be bound (in use, or not ours to bind): a setting to fix
    (``SLACK_HTTP_PORT``), not a crash."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(f"SLACK_HTTP_PORT {port} cannot be listened on ({host}): {reason}")
        self.host = host
        self.port = port


@dataclass(frozen=True)
class HttpMode:
    """Listen for Slack's HTTP requests on ``host:port`` (0: any free port) at ``path``;
    ``extra_routes`` are served beside them (``POST /alerts/<source>``)."""

    host: str = "0.0.0.0"
    port: int = 3000
    path: str = DEFAULT_PATH
    extra_routes: tuple[web.RouteDef, ...] = ()


class RunningSlack:
    """A started Slack connection or server; ``close()`` stops it.

    ``port`` is the HTTP port listened on (None in Socket Mode).
    """

    def __init__(
        self,
        *,
        runner: web.AppRunner | None = None,
        handler: AsyncSocketModeHandler | None = None,
        port: int | None = None,
    ) -> None:
        self._runner = runner
        self._handler = handler
        self.port = port

    async def close(self) -> None:
        """Stop accepting work: close the WebSocket or the HTTP listener."""
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]  # bolt is untyped here
            self._handler = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def start(app: AsyncApp, mode: SocketMode | HttpMode) -> RunningSlack:
    """Connect (Socket Mode) or listen (HTTP mode); returns once ready.

    Raises:
        PortUnavailable: the HTTP port could not be bound.
        AppTokenRefused: Slack refused the app-level token (no retry can help).
        SlackCallFailed: ``apps.connections.open`` failed otherwise (``SlackUnreachable``
            when Slack could not be reached).
    """
    if isinstance(mode, SocketMode):
        running = await _start_socket_mode(app, mode)
    else:
        running = await _start_http(app, mode)
    _freeze_start_up()
    return running


@functools.cache
def _freeze_start_up() -> None:
    """Move what start-up made (modules, the app, engines, clients: it lives as long as
    the process) out of the collector's generations, once per process, as a worker does
    once its runtime is open: a full collection then walks what events made, not the
    whole start-up heap, on the ack path (bench/slack_ack.py). Once: a process that
    starts the app again (tests) would freeze each start's garbage for good."""
    gc.freeze()


async def serve(
    app: AsyncApp, mode: SocketMode | HttpMode, *, stop: asyncio.Event, background: Background
) -> None:
    """Run the app until ``stop`` is set, then close and wait for follow-ups (≤ 10 s).

    ``stop`` also ends a start that is still connecting (the SDK's Socket Mode client
    retries a failed WebSocket connection forever).
    """
    running = await _unless_stopped(start(app, mode), stop)
    if running is None:
        return
    logger.info("slack edge running: %s", _where(mode, running))
    try:
        await stop.wait()
    finally:
        await running.close()
        with contextlib.suppress(TimeoutError):
            await background.drain(timeout_s=10.0)
        await background.cancel()


def http_app(
    app: AsyncApp, *, path: str = DEFAULT_PATH, extra_routes: tuple[web.RouteDef, ...] = ()
) -> web.Application:
    """The aiohttp application serving ``app`` at ``POST path`` and ``GET /healthz``,
    and ``extra_routes``."""

    async def events(request: web.Request) -> web.Response:
        try:
            bolt_request = await to_bolt_request(request)
        except ValueError:  # bolt parses the body before it checks the signature
            return web.Response(status=400, text="the body is not a Slack request")
        origin = f"{request.method} {request.path} from {request.remote}"
        bolt_request.context[HTTP_REQUEST_KEY] = origin
        response = await app.async_dispatch(bolt_request)
        return await to_aiohttp_response(response)

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    web_app = web.Application()
    web_app.router.add_post(path, events)
    web_app.router.add_get("/healthz", healthz)
    web_app.add_routes(extra_routes)
    return web_app


async def _start_http(app: AsyncApp, mode: HttpMode) -> RunningSlack:
    web_app = http_app(app, path=mode.path, extra_routes=mode.extra_routes)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((mode.host, mode.port))
        await web.SockSite(runner, sock).start()
    except OSError as exc:
        sock.close()
        await runner.cleanup()
        raise PortUnavailable(mode.host, mode.port, exc.strerror or str(exc)) from exc
    return RunningSlack(runner=runner, port=int(sock.getsockname()[1]))


async def _start_socket_mode(app: AsyncApp, mode: SocketMode) -> RunningSlack:
    handler = AsyncSocketModeHandler(app, mode.app_token, web_client=mode.web_client)
    try:
        # The SDK retries every failure of its own apps.connections.open forever, a
        # refused token too: open the first URL here, where a refusal can end the start.
        handler.client.wss_uri = await open_connection(handler.client.web_client, mode.app_token)
        await handler.connect_async()  # type: ignore[no-untyped-call]  # bolt is untyped here
    except BaseException:
        await handler.close_async()  # type: ignore[no-untyped-call]
        raise
    return RunningSlack(handler=handler)


async def open_connection(client: AsyncWebClient, app_token: str) -> str:
    """A Socket Mode WebSocket URL from ``apps.connections.open`` (Slack: an app-level
    ``xapp-`` token with ``connections:write``; the URL is good for one connection).

    Raises:
        AppTokenRefused: the token is not valid or not an app-level token.
        SlackCallFailed: any other failure (``SlackUnreachable``: no answer).
    """
    try:
        answer = await slack_call(
            "apps.connections.open", client.apps_connections_open(app_token=app_token)
        )
    except SlackCallFailed as exc:
        if exc.error in APP_TOKEN_REFUSALS:
            raise AppTokenRefused(exc.method, exc.error, status=exc.status) from exc
        raise
    return str(answer["url"])


async def _unless_stopped(
    starting: Awaitable[RunningSlack], stop: asyncio.Event
) -> RunningSlack | None:
    """``starting``'s result, or None when ``stop`` is set first (the start is cancelled)."""
    start_task = asyncio.ensure_future(starting)
    stop_task = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({start_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop_task.cancel()
        if not start_task.done():
            start_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await start_task
    if start_task.cancelled():
        logger.info("stopped while connecting to Slack")
        return None
    return start_task.result()


def _where(mode: SocketMode | HttpMode, running: RunningSlack) -> str:
    if isinstance(mode, HttpMode):
        return f"HTTP mode, listening on {mode.host}:{running.port}, Request URL path {mode.path}"
    return "Socket Mode, connected"
