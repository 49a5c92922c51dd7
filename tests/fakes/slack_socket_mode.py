"""A local fake of Slack's Socket Mode for tests: ``apps.connections.open`` plus the WebSocket.

The real ``slack_sdk`` Socket Mode client (inside slack-bolt's ``AsyncSocketModeHandler``)
talks to it: it asks ``POST /api/apps.connections.open`` (app-level token as Bearer) for
a ``ws://`` URL, connects, and receives ``{"type": "hello", …}``. The test then pushes
envelopes (``events_api``, ``slash_commands``, ``interactive``; shapes in
``tests/bot/data/slack/socket_mode_*.json``) and reads the client's acks, which
Slack expects as ``{"envelope_id": …, "payload"?: …}`` (docs.slack.dev, "Using Socket
Mode").
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from aiohttp import WSMsgType, web

JsonDict = dict[str, Any]
HELLO: JsonDict = {
    "type": "hello",
    "num_connections": 1,
    "debug_info": {"host": "applink-fake-1", "build_number": 1},
    "connection_info": {"app_id": "A0FAKEAPP"},
}


class FakeSocketMode:
    """``await start()``; ``base_url`` for the handler's ``web_client``; ``await stop()``."""

    def __init__(self, *, app_token: str = "xapp-fake-token") -> None:
        self.app_token = app_token
        self.connections_opened = 0
        self.refuse_links = False  # answer the WebSocket URL with HTTP 503 (a Slack outage)
        self.links_refused = 0
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._sockets: list[web.WebSocketResponse] = []
        self._connected = asyncio.Event()
        self._acks: dict[str, JsonDict] = {}
        self._changed = asyncio.Condition()

    @property
    def base_url(self) -> str:
        """The Web API ``base_url`` that answers ``apps.connections.open``."""
        return f"http://127.0.0.1:{self._port}/api/"

    async def start(self) -> None:
        """Listen on 127.0.0.1 on a free port."""
        app = web.Application()
        app.router.add_post("/api/apps.connections.open", self._open)
        app.router.add_get("/link/", self._link)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        """Close every WebSocket and the listener."""
        for ws in self._sockets:
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def send(self, envelope: JsonDict, *, timeout_s: float = 5.0) -> None:
        """Push one envelope to the connected client (waits for a connection)."""
        async with asyncio.timeout(timeout_s):
            await self._connected.wait()
        await self._sockets[-1].send_str(json.dumps(envelope))

    async def ack_for(self, envelope_id: str, *, timeout_s: float = 5.0) -> JsonDict:
        """The client's ack of ``envelope_id``; AssertionError if none within ``timeout_s``."""
        try:
            async with asyncio.timeout(timeout_s), self._changed:
                await self._changed.wait_for(lambda: envelope_id in self._acks)
        except TimeoutError:
            raise AssertionError(f"no ack of envelope {envelope_id} in {timeout_s} s") from None
        return self._acks[envelope_id]

    async def wait_for_sockets(self, count: int, *, timeout_s: float = 5.0) -> None:
        """Wait until ``count`` WebSockets have connected in all (reconnects included)."""
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(lambda: len(self._sockets) >= count)

    async def wait_for_refusals(self, count: int, *, timeout_s: float = 5.0) -> None:
        """Wait until ``count`` WebSocket connections were refused (``refuse_links``)."""
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(lambda: self.links_refused >= count)

    def acked(self, envelope_id: str) -> bool:
        """Whether ``envelope_id`` was acked."""
        return envelope_id in self._acks

    async def _open(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.app_token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        self.connections_opened += 1
        url = f"ws://127.0.0.1:{self._port}/link/?ticket=fake{self.connections_opened}"
        return web.json_response({"ok": True, "url": url})

    async def _link(self, request: web.Request) -> web.StreamResponse:
        if self.refuse_links:
            async with self._changed:
                self.links_refused += 1
                self._changed.notify_all()
            return web.Response(status=503, text="service unavailable")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps(HELLO))
        async with self._changed:
            self._sockets.append(ws)
            self._changed.notify_all()
        self._connected.set()
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await self._record_ack(json.loads(message.data))
        return ws

    async def _record_ack(self, ack: JsonDict) -> None:
        async with self._changed:
            self._acks[str(ack.get("envelope_id"))] = ack
            self._changed.notify_all()
