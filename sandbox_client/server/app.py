"""SBX/1 routing: one connection handler serving health, process and filesystem calls."""

from __future__ import annotations

import contextlib
import json

from .config import ServerConfig
from .files import Filesystem
from .http import (
    ChunkedWriter,
    HttpError,
    Reply,
    Request,
    encode_reply,
    read_request,
)
from .isolation import from_inside
from .loop import IncompleteReadError, Stream, timeout
from .process import Process
from .table import ProcessTable

KILL_WAIT_S = 2.0
"""How long a kill waits for its process group to be gone before it answers anyway."""
_FILESYSTEM = "/filesystem/"
_PROCESS = "/process/"


class App:
    """Serves SBX/1 (a subset of Blaxel's sandbox API) for one sandbox, plus one call of its
    own: ``PUT /process/{name}``, start-or-follow by name in one request (``_start``)."""

    def __init__(self, config: ServerConfig) -> None:
        self._config = config
        self.processes = ProcessTable(config)
        self._files = Filesystem(config.root, config.max_read_bytes)

    async def handle_connection(self, stream: Stream) -> None:
        """Serve requests on one connection until the peer closes it; a process of the jail
        itself gets one 403 (``isolation.from_inside``)."""
        try:
            if from_inside(stream.socket):
                with contextlib.suppress(HttpError):  # read it, so the client gets the reply
                    await read_request(stream, self._config.max_body_bytes)
                reply = Reply.error(403, "the sandbox's API is served to the host only")
                stream.write(encode_reply(reply, keep_alive=False))
                return
            while await self._serve_one(stream):
                pass
        except (ConnectionError, IncompleteReadError):
            pass
        finally:
            stream.close()  # once what is buffered is sent

    async def _serve_one(self, writer: Stream) -> bool:
        try:
            request = await read_request(writer, self._config.max_body_bytes)
        except HttpError as exc:
            writer.write(encode_reply(Reply.error(exc.status, exc.message), keep_alive=False))
            await writer.drain()
            return False
        if request is None:
            return False
        if _wants_stream(request):
            return await self._stream_process(request, writer)
        try:
            reply = await self._dispatch(request)
        except HttpError as exc:
            reply = Reply.error(exc.status, exc.message)
        except Exception as exc:  # a bug must not take the sandbox's server down
            reply = Reply.error(500, f"internal error: {type(exc).__name__}: {exc}")
        writer.write(encode_reply(reply, request.keep_alive))
        await writer.drain()
        return request.keep_alive

    async def _dispatch(self, request: Request) -> Reply:
        method, path = request.method, request.path
        if path == "/health" and method == "GET":
            return Reply.of_json({"status": "ok", "isolated": self.processes.isolation.available})
        if path.startswith(_FILESYSTEM):
            return self._filesystem(request, path[len(_FILESYSTEM) :])
        if path in ("/process", "/process/"):
            if method == "GET":
                return Reply.of_json([p.record() for p in self.processes.all()])
            if method == "POST":
                return await self._start_and_wait(request)
        if path.startswith(_PROCESS) and method == "PUT":
            return await self._start_and_wait(request)
        if path.startswith(_PROCESS):
            return await self._process_call(method, path[len(_PROCESS) :])
        raise HttpError(404 if method in ("GET", "POST", "PUT", "DELETE") else 405, "not found")

    def _filesystem(self, request: Request, raw: str) -> Reply:
        handlers = {"GET": self._files.get, "PUT": self._files.put, "DELETE": self._files.delete}
        handler = handlers.get(request.method)
        if handler is None:
            raise HttpError(405, f"method {request.method} not allowed on /filesystem")
        return handler(request, raw)

    async def _process_call(self, method: str, rest: str) -> Reply:
        identifier, _, action = rest.partition("/")
        process = self.processes.find(identifier)
        if method == "GET" and action == "":
            return Reply.of_json(process.record())
        if method == "GET" and action == "logs":
            return Reply.of_json(process.logs())
        if method == "DELETE" and action in ("", "kill"):
            process.signal(9 if action == "kill" else 15)
            if action == "kill":  # the reply says they are gone: a pgrep after it finds none
                await process.group_gone(timeout_s=KILL_WAIT_S)
            verb = "killed" if action == "kill" else "stopped"
            return Reply.of_json({"message": f"Process {verb} successfully"})
        raise HttpError(404, "not found")

    async def _start(self, request: Request) -> Process:
        """``POST /process`` starts the body's command; ``PUT /process/{name}`` starts it only
        when ``name`` is new, else is the known process of that name (get-or-start, one
        request where a client would first look the name up)."""
        if request.method == "PUT":
            name = request.path[len(_PROCESS) :]
            if not name:
                raise HttpError(400, "PUT /process/{name} needs a name")
            known = self.processes.get(name)
            if known is not None:
                return known
        body = request.json()
        if not isinstance(body, dict) or not isinstance(body.get("command"), str):
            raise HttpError(400, "body must be a JSON object with a string 'command'")
        env = body.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise HttpError(400, "'env' must map names to strings")
        working_dir = str(body.get("workingDir") or self._config.root)
        if request.method != "PUT":
            name = str(body.get("name") or "")
        return await self.processes.start(name, body["command"], working_dir, env)

    async def _start_and_wait(self, request: Request) -> Reply:
        process = await self._start(request)
        body = request.json()
        if body.get("waitForCompletion"):
            timeout_s = float(body.get("timeout") or 0) or None
            with contextlib.suppress(TimeoutError):
                async with timeout(timeout_s):
                    await process.done.wait()
        return Reply.of_json(process.record())

    async def _stream_process(self, request: Request, writer: Stream) -> bool:
        """``POST /process`` (or ``PUT /process/{name}``) with ``Accept: text/event-stream``:
        NDJSON events, then the record as a ``result`` event (Blaxel's streaming format) in
        the same write as the reply's end."""
        try:
            process = await self._start(request)
        except HttpError as exc:
            writer.write(encode_reply(Reply.error(exc.status, exc.message), request.keep_alive))
            await writer.drain()
            return request.keep_alive
        subscription = process.subscribe()
        stream = ChunkedWriter(writer, "application/x-ndjson")
        try:
            while True:
                try:
                    async with timeout(self._config.keepalive_s):
                        event = await subscription.queue.get()
                except TimeoutError:
                    await stream.send(_event("keepalive", None))
                    continue
                if event is None:
                    break
                await stream.send(_event(event[0], event[1]))
            record = json.dumps(process.record(), ensure_ascii=False, separators=(",", ":"))
            await stream.end(_event("result", record))
        finally:
            process.unsubscribe(subscription)
        return request.keep_alive


def _wants_stream(request: Request) -> bool:
    starts = (request.method == "POST" and request.path in ("/process", "/process/")) or (
        request.method == "PUT" and request.path.startswith(_PROCESS)
    )
    return starts and "text/event-stream" in request.headers.get("accept", "")


def _event(kind: str, data: str | None) -> bytes:
    event: dict[str, str] = {"type": kind} if data is None else {"type": kind, "data": data}
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
