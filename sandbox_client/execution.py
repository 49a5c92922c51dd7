"""One ``exec`` call: stream the reply, fall back to polling, kill (or leave) at the deadline.

Rules (docs/architecture.md §8): the process name makes a call idempotent (look it up
before sending); the caller's deadline is kept here and the process is killed when it
passes (Blaxel's ``timeout`` only ends a wait); a stream silent for
``stream_idle_timeout_s`` is dead, and the process is then followed by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from urllib.parse import quote

import httpx

from sandbox_client.errors import (
    NameInUse,
    ProcessNotFound,
    ProtocolError,
    RequestRejected,
    SandboxTimeout,
    SandboxUnavailable,
)
from sandbox_client.events import read_events
from sandbox_client.records import OutputChunk, ProcessRecord
from sandbox_client.transport import Transport
from sandbox_client.wire import ShapeError, error_message, parse_process

OutputCallback = Callable[[OutputChunk], None]


class _NoGetOrStart(Exception):
    """The server answered ``PUT /process/{name}`` with 404: it predates get-or-start."""


def process_path(name: str) -> str:
    """The path of process ``name`` (``/process/`` and the name, percent-encoded)."""
    return "/process/" + quote(name, safe="")


STARTING_WAIT_S = 10.0
"""How long a name another call is starting (the sandbox answered "already exists" but
does not list it yet: its process is still being made, a frozen jail's queued request
after a thaw, say) is looked for before the call gives up on it."""

STREAM_END_WAIT_S = 1.0
"""After the ``result`` event, how long the rest of the reply (its end) is read, so that its
connection is kept for the next call instead of being closed half-read."""


class Execution:
    """Runs (or re-attaches to) the process ``name`` until it ends or ``deadline`` passes.

    ``deadline`` is in ``loop.time()`` seconds. ``lookup`` is the client's
    ``get_process`` and ``kill`` its ``kill``. With ``detach``, a process still running at
    the deadline is left running and its record returned as it is then.
    """

    def __init__(
        self,
        transport: Transport,
        name: str,
        deadline: float,
        lookup: Callable[[str], Awaitable[ProcessRecord | None]],
        kill: Callable[[str], Awaitable[None]],
        *,
        detach: bool = False,
    ) -> None:
        self._http = transport
        self._options = transport.options
        self._name = name
        self._deadline = deadline
        self._lookup = lookup
        self._kill = kill
        self._detach = detach
        self._output_budget = self._options.max_output_chars

    async def run(
        self,
        command: str,
        working_dir: str,
        env: Mapping[str, str],
        on_output: OutputCallback | None,
    ) -> ProcessRecord:
        """Get-or-start: a known name is followed, never started again."""
        payload = {
            "command": command,
            "name": self._name,
            "workingDir": working_dir,
            "env": dict(env),
            "waitForCompletion": True,
            "timeout": max(1, math.ceil(self._deadline - asyncio.get_running_loop().time())),
        }
        failure: SandboxUnavailable | None = None
        by_name = self._http.get_or_start  # one request: the server starts only a new name
        attempts = 0
        while attempts < self._options.max_attempts:
            attempts += 1
            if not by_name:
                existing = await self._lookup(self._name)
                if existing is not None:
                    return existing if existing.finished else await self.follow()
            try:
                record = await self._stream(payload, on_output, by_name=by_name)
            except _NoGetOrStart:
                self._http.get_or_start = by_name = False  # an older server: look up, start
                attempts -= 1
                continue
            except NameInUse:
                by_name = False  # being started by another call this instant: look it up
                existing = await self._appearing()
                if existing is not None:
                    return existing if existing.finished else await self.follow()
                continue
            except SandboxTimeout:
                raise  # it may have started; a later call with the same name will know
            except SandboxUnavailable as exc:
                failure = exc  # the connection failed: look the name up (or resend the
                continue  # get-or-start as it is), then try again
            if record is not None and (record.finished or record.timed_out):
                return record
            return await self.follow()
        if failure is not None:
            raise failure
        return await self.follow()

    async def _stream(
        self, payload: dict[str, object], on_output: OutputCallback | None, *, by_name: bool
    ) -> ProcessRecord | None:
        """Start (``POST /process``) or get-or-start (``PUT /process/{name}``) and read the
        event stream: the record, or None when the stream died.

        Raises:
            _NoGetOrStart: the server has no ``PUT /process/{name}`` (404).
        """
        timeout = self._http.timeout(self._options.stream_idle_timeout_s)
        headers = {"Accept": "text/event-stream"}
        method, path = ("PUT", process_path(self._name)) if by_name else ("POST", "/process")
        try:
            async with asyncio.timeout_at(self._deadline):
                async with self._http.stream(
                    method, path, json=payload, headers=headers, timeouts=timeout
                ) as response:
                    if by_name and response.status_code == 404:
                        raise _NoGetOrStart
                    return await self._consume(response, on_output)
        except TimeoutError:
            return await self.expire()
        except (httpx.TimeoutException, httpx.TransportError):
            return None  # silent or broken after the process started: poll it

    async def _consume(
        self, response: httpx.Response, on_output: OutputCallback | None
    ) -> ProcessRecord | None:
        if response.status_code != 200:
            raise self._refusal(response, await response.aread())
        if response.headers.get("content-type", "").startswith("application/json"):
            return self._parse(json.loads(await response.aread()))  # a server that cannot stream
        events = read_events(response.aiter_bytes(), self._options.max_event_bytes)
        async for event in events:
            if event.type in ("stdout", "stderr") and on_output is not None:
                self._emit(on_output, OutputChunk(event.type, event.data))
            elif event.type == "result":
                record = self._parse(json.loads(event.data))
                await _read_to_end(events)
                return record
            elif event.type == "error":
                raise RequestRejected(self._http.sandbox_id, 422, event.data)
        return None

    def _refusal(self, response: httpx.Response, body: bytes) -> Exception:
        message = error_message(body)
        if response.status_code == 400 and "already exists" in message:
            return NameInUse(self._http.sandbox_id, self._name, message)
        return self._http.rejected(response, body)

    def _emit(self, on_output: OutputCallback, chunk: OutputChunk) -> None:
        if self._output_budget <= 0:
            return
        text = chunk.text[: self._output_budget]
        self._output_budget -= len(text)
        on_output(OutputChunk(chunk.stream, text))

    def _parse(self, data: object) -> ProcessRecord:
        try:
            return parse_process(data, max_chars=self._options.max_output_chars)
        except ShapeError as exc:
            raise ProtocolError(self._http.sandbox_id, str(exc)) from exc

    async def _appearing(self) -> ProcessRecord | None:
        """The record of the name another call is starting, once the sandbox lists it
        (within ``STARTING_WAIT_S`` and the deadline), else None."""
        loop = asyncio.get_running_loop()
        give_up = min(loop.time() + STARTING_WAIT_S, self._deadline)
        interval_s = self._options.poll_interval_s
        while (record := await self._lookup(self._name)) is None and loop.time() < give_up:
            await asyncio.sleep(min(interval_s, max(0.0, give_up - loop.time())))
            interval_s = min(interval_s * 2, self._options.max_poll_interval_s)
        return record

    async def follow(self) -> ProcessRecord:
        """Poll the process until it ends; kill it when the deadline passes.

        Raises:
            ProcessNotFound: the sandbox does not know the name (e.g. it was replaced).
        """
        loop = asyncio.get_running_loop()
        interval_s = self._options.poll_interval_s
        while True:
            record = await self._lookup(self._name)
            if record is None:
                raise ProcessNotFound(self._http.sandbox_id, self._name)
            if record.finished:
                return record
            remaining_s = self._deadline - loop.time()
            if remaining_s <= 0:
                return await self.expire()
            await asyncio.sleep(min(interval_s, remaining_s))
            interval_s = min(interval_s * 2, self._options.max_poll_interval_s)

    async def expire(self) -> ProcessRecord:
        """Kill the process group and return its final record marked ``timed_out``
        (with ``detach``: its record as it is now, still running, marked the same)."""
        if self._detach:
            record = await self._lookup(self._name)
            if record is None:
                raise ProcessNotFound(self._http.sandbox_id, self._name)
            return replace(record, timed_out=True)
        await self._kill(self._name)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._options.kill_wait_s
        interval_s = self._options.poll_interval_s
        while True:
            record = await self._lookup(self._name)
            if record is None:
                raise ProcessNotFound(self._http.sandbox_id, self._name)
            if record.finished or loop.time() >= give_up:
                return replace(record, timed_out=True)
            await asyncio.sleep(interval_s)


async def _read_to_end(events: AsyncIterator[object]) -> None:
    """Read what is left of a reply (nothing but its end, from a well-behaved server), for
    at most ``STREAM_END_WAIT_S``: a connection read to its end is kept for the next call."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(STREAM_END_WAIT_S):
            async for _ in events:
                pass
