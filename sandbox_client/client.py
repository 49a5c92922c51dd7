"""``SandboxClient``: the SBX/1 data plane, the same for local and Blaxel sandboxes."""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import time
from collections.abc import Iterator, Mapping
from types import TracebackType
from urllib.parse import quote

import httpx

from sandbox_client.errors import (
    FileNotFound,
    InvalidPath,
    IsADirectory,
    NotADirectory,
    ProcessNotFound,
    ProtocolError,
)
from sandbox_client.execution import Execution, OutputCallback, process_path
from sandbox_client.records import DirEntry, ProcessRecord
from sandbox_client.transport import ClientOptions, Transport
from sandbox_client.wire import ShapeError, error_message, is_listing, parse_listing, parse_process


class SandboxClient:
    """Runs commands and touches files in one sandbox over SBX/1.

    Build it with a provider's ``connect(handle)``; close it with ``aclose()`` (or use
    it as an async context manager). Every method may raise ``SandboxUnavailable`` (or
    its ``SandboxTimeout``) when the sandbox does not answer; a frozen sandbox hangs
    requests, so each one has a timeout (``ClientOptions``). Only idempotent calls are
    retried.

    Args:
        base_url: the sandbox's SBX/1 base URL (any host for a Unix-socket transport).
        sandbox_id: named in errors.
        transport: an httpx transport (e.g. ``httpx.AsyncHTTPTransport(uds=…)``).
        headers: sent with every request (Blaxel's authorization headers).
        options: timeouts, retries, caps.
    """

    def __init__(
        self,
        base_url: str,
        *,
        sandbox_id: str,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        options: ClientOptions | None = None,
    ) -> None:
        self.sandbox_id = sandbox_id
        self.options = options or ClientOptions()
        self._http = Transport(
            sandbox_id, base_url, self.options, transport=transport, headers=headers
        )
        self._in_flight = 0
        self._last_used = time.monotonic()
        self._unfinished: set[str] = set()

    async def __aenter__(self) -> SandboxClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections (the sandbox is not affected)."""
        await self._http.aclose()

    @property
    def unfinished_names(self) -> frozenset[str]:
        """Names this client ran (``exec``) whose end it has not seen: the call is
        still running, or it failed because the sandbox stopped answering."""
        return frozenset(self._unfinished)

    @property
    def idle_since(self) -> float | None:
        """``time.monotonic()`` of the end of the last call; None while a call runs."""
        return None if self._in_flight else self._last_used

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            self._last_used = time.monotonic()

    async def health(self) -> None:
        """Return when ``GET /health`` answers 200.

        Raises:
            SandboxUnavailable: it did not (``SandboxTimeout`` when it hung).
        """
        with self._busy():
            response = await self._http.request("GET", "/health", idempotent=True)
            if response.status_code != 200:
                raise self._http.rejected(response, response.content)

    # processes ------------------------------------------------------------------------

    async def exec(
        self,
        name: str,
        command: str,
        *,
        timeout_s: float,
        working_dir: str = "/workspace",
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
        detach_at_deadline: bool = False,
    ) -> ProcessRecord:
        """Run ``command`` with the sandbox's shell (``bash -c``) as process ``name``.

        Get-or-start: if the sandbox already knows ``name`` it is never started again;
        a running one is followed, a finished one returned. Output is streamed to
        ``on_output`` (capped at ``max_output_chars``); after a dead stream the client
        polls, and output produced meanwhile is only in the returned record.

        Args:
            name: the process name; the harness passes the ``tool_use`` id.
            timeout_s: the caller's deadline. When it passes the process group is
                killed and its record returned with ``timed_out=True``.
            working_dir: absolute directory to run in.
            env: variables added to the sandbox's own (which hold no secrets).
            detach_at_deadline: when the deadline passes, leave the process running
                (follow it with ``get_process``, end it with ``kill``) and return its
                record as it is then, ``timed_out=True`` and not ``finished``.

        Returns:
            The finished record (``exit_code`` None only if it outlived the kill wait),
            or with ``detach_at_deadline`` the running one.

        Raises:
            ValueError: ``timeout_s`` not positive, or ``working_dir`` not absolute.
            RequestRejected: the sandbox refused the command (e.g. no such directory).
            ProcessNotFound: the process vanished while followed (sandbox replaced).
            SandboxUnavailable, SandboxTimeout: the sandbox did not answer.
        """
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if not working_dir.startswith("/"):
            raise ValueError("working_dir must be absolute")
        with self._busy():
            self._unfinished.add(name)
            deadline = asyncio.get_running_loop().time() + timeout_s
            execution = Execution(
                self._http, name, deadline, self.get_process, self.kill, detach=detach_at_deadline
            )
            record = await execution.run(command, working_dir, env or {}, on_output)
            if record.finished or detach_at_deadline:  # a detached one is followed elsewhere
                self._unfinished.discard(name)
            return record

    async def start(
        self,
        name: str,
        command: str,
        *,
        working_dir: str = "/workspace",
        env: Mapping[str, str] | None = None,
    ) -> ProcessRecord:
        """Start ``command`` as process ``name`` and return at once, without waiting.

        Get-or-start, like ``exec``: a name the sandbox already knows (running or
        finished) is not started again; its record is returned. The process runs until
        it ends or is killed; follow it with ``get_process`` or ``wait``.

        Raises:
            ValueError: ``working_dir`` not absolute.
            RequestRejected: the sandbox refused the command.
            SandboxUnavailable, SandboxTimeout: the sandbox did not answer.
        """
        if not working_dir.startswith("/"):
            raise ValueError("working_dir must be absolute")
        payload = {
            "command": command,
            "name": name,
            "workingDir": working_dir,
            "env": dict(env or {}),
        }
        with self._busy():
            for _ in range(self.options.max_attempts):
                existing = await self.get_process(name)
                if existing is not None:
                    return existing
                response = await self._http.request(
                    "POST", "/process", json=payload, idempotent=False
                )
                if response.status_code == 400 and "already exists" in error_message(
                    response.content
                ):
                    continue  # started meanwhile by another call: the lookup finds it
                return self._record(self._json(response))
            existing = await self.get_process(name)
            if existing is None:
                raise ProcessNotFound(self.sandbox_id, name)
            return existing

    async def wait(self, name: str, *, timeout_s: float) -> ProcessRecord | None:
        """Follow process ``name`` for at most ``timeout_s`` without killing it.

        Returns None when the sandbox does not know ``name``; otherwise its record,
        still ``running`` if the time ran out.
        """
        with self._busy():
            record = await self.get_process(name)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            interval_s = self.options.poll_interval_s
            while record is not None and not record.finished and loop.time() < deadline:
                await asyncio.sleep(min(interval_s, max(0.0, deadline - loop.time())))
                interval_s = min(interval_s * 2, self.options.max_poll_interval_s)
                record = await self.get_process(name)
            return record

    async def get_process(self, name: str) -> ProcessRecord | None:
        """The record of process ``name`` (by name, or pid), or None when unknown."""
        with self._busy():
            response = await self._http.request("GET", process_path(name), idempotent=True)
            if response.status_code == 404:
                return None
            return self._record(self._json(response))

    async def list_processes(self) -> tuple[ProcessRecord, ...]:
        """Every process the sandbox knows (running and finished)."""
        with self._busy():
            response = await self._http.request("GET", "/process", idempotent=True)
            data = self._json(response)
            if not isinstance(data, list):
                raise ProtocolError(self.sandbox_id, "GET /process must answer a list")
            return tuple(self._record(item) for item in data)

    async def stop(self, name: str) -> None:
        """SIGTERM to the process group of ``name``.

        Raises:
            ProcessNotFound: no such process.
        """
        await self._signal(name, "")

    async def kill(self, name: str) -> None:
        """SIGKILL to the process group of ``name`` (also its leftover children).

        Raises:
            ProcessNotFound: no such process.
        """
        await self._signal(name, "/kill")

    async def _signal(self, name: str, suffix: str) -> None:
        with self._busy():
            path = process_path(name) + suffix
            response = await self._http.request("DELETE", path, idempotent=True)
            if response.status_code == 404:
                raise ProcessNotFound(self.sandbox_id, name)
            self._json(response)

    # files ----------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        """The bytes of the file at ``path`` (absolute, under ``fs_root``).

        Raises:
            InvalidPath, FileNotFound, IsADirectory; RequestRejected (e.g. 413 too large).
        """
        path = self.check_path(path)
        with self._busy():
            headers = {"Accept": "application/octet-stream"}
            response = await self._http.request(
                "GET", _fs_path(path), idempotent=True, headers=headers
            )
            self._raise_for_path(response, path)
            if "attachment" in response.headers.get("content-disposition", ""):
                return response.content
            data = self._json(response)
            if is_listing(data):
                raise IsADirectory(path)
            if isinstance(data, dict) and isinstance(data.get("content"), str):
                return str(data["content"]).encode()
            return response.content

    async def read_range(
        self, path: str, start: int, length: int | None = None
    ) -> tuple[bytes, int]:
        """Bytes of the file at ``path`` from ``start`` (a negative ``start``: its last
        ``-start`` bytes), at most ``length`` of them, and as many as the server sends at
        once (up to its read limit, so a file larger than the limit can be followed), and
        the file's size then.

        An HTTP range request (RFC 9110 §14); from a server that ignores it, the whole
        file is read and sliced here. Past the end: no bytes.

        Raises:
            InvalidPath, FileNotFound, IsADirectory; RequestRejected (e.g. 413 too large,
            from a server that ignores ranges).
        """
        path = self.check_path(path)
        if length is not None and (length < 1 or start < 0):
            raise ValueError("a length needs a start of 0 or more, and is 1 or more")
        wanted = f"bytes={start}-" if start >= 0 else f"bytes=-{-start}"
        if length is not None:
            wanted += str(start + length - 1)
        with self._busy():
            headers = {"Accept": "application/octet-stream", "Range": wanted}
            response = await self._http.request(
                "GET", _fs_path(path), idempotent=True, headers=headers
            )
            total = response.headers.get("content-range", "").rpartition("/")[2]
            if response.status_code == 416:
                return b"", int(total) if total.isdigit() else 0
            self._raise_for_path(response, path)
            if response.status_code == 206 and total.isdigit():
                return response.content, int(total)
        data = await self.read_file(path)  # a server without ranges: the whole file
        part = data[start:] if length is None else data[start : start + length]
        return part, len(data)

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace the file at ``path``, creating parent directories.

        Raises:
            InvalidPath, IsADirectory; RequestRejected for other refusals.
        """
        path = self.check_path(path)
        with self._busy():
            files = {"file": (posixpath.basename(path), data, "application/octet-stream")}
            response = await self._http.request("PUT", _fs_path(path), idempotent=True, files=files)
            if response.status_code == 422 and await self._is_dir(path):
                raise IsADirectory(path)
            self._raise_for_path(response, path)

    async def delete_file(self, path: str, *, recursive: bool = False) -> None:
        """Delete the file (or empty directory; with ``recursive`` any directory) at ``path``.

        Raises:
            InvalidPath, FileNotFound; RequestRejected (e.g. a directory not empty).
        """
        path = self.check_path(path)
        with self._busy():
            params = {"recursive": "true"} if recursive else None
            response = await self._http.request(
                "DELETE", _fs_path(path), idempotent=True, params=params
            )
            self._raise_for_path(response, path)

    async def list_dir(self, path: str) -> tuple[DirEntry, ...]:
        """The entries of the directory at ``path``: subdirectories first, then files.

        Raises:
            InvalidPath, FileNotFound, NotADirectory.
        """
        path = self.check_path(path)
        with self._busy():
            headers = {"Accept": "application/json"}
            response = await self._http.request(
                "GET", _fs_path(path), idempotent=True, headers=headers
            )
            self._raise_for_path(response, path)
            data = self._json(response)
            if not is_listing(data):
                raise NotADirectory(path)
            try:
                return parse_listing(data)
            except ShapeError as exc:
                raise ProtocolError(self.sandbox_id, str(exc)) from exc

    async def _is_dir(self, path: str) -> bool:
        headers = {"Accept": "application/json"}
        response = await self._http.request("GET", _fs_path(path), idempotent=True, headers=headers)
        return response.status_code == 200 and is_listing(self._json(response))

    def check_path(self, path: str) -> str:
        """``path`` normalised; it must be absolute and inside ``options.fs_root``.

        Raises:
            InvalidPath: relative, control characters, or outside the root.
        """
        if not path.startswith("/"):
            raise InvalidPath(path, "must be an absolute path")
        if any(ord(c) < 32 or ord(c) == 127 for c in path):
            raise InvalidPath(path, "contains control characters")
        normal = "/" + posixpath.normpath(path).lstrip("/")
        root = self.options.fs_root.rstrip("/") or "/"
        if normal != root and not normal.startswith(root.rstrip("/") + "/"):
            raise InvalidPath(path, f"outside {root}: only the sandbox workspace is reachable")
        return normal

    def _raise_for_path(self, response: httpx.Response, path: str) -> None:
        status = response.status_code
        if status < 300:
            return
        if status == 404:
            raise FileNotFound(path)
        if status == 400:
            raise InvalidPath(path, error_message(response.content))
        raise self._http.rejected(response, response.content)

    # replies --------------------------------------------------------------------------

    def _json(self, response: httpx.Response) -> object:
        if response.status_code >= 300:
            raise self._http.rejected(response, response.content)
        try:
            return response.json()
        except ValueError as exc:
            raise ProtocolError(self.sandbox_id, f"not JSON: {response.text[:200]!r}") from exc

    def _record(self, data: object) -> ProcessRecord:
        try:
            return parse_process(data, max_chars=self.options.max_output_chars)
        except ShapeError as exc:
            raise ProtocolError(self.sandbox_id, str(exc)) from exc


def _fs_path(path: str) -> str:
    """Blaxel's form for an absolute path: ``/filesystem//workspace/x`` (double slash)."""
    return "/filesystem/" + quote(path, safe="/")
