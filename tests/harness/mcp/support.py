"""Real MCP servers nobody here wrote, for tests: the reference ``server-everything`` (npm; over
stdio, or over streamable HTTP on a port of its own) and ``mcp-server-time`` (PyPI, in its own
virtual environment so its dependencies stay out of ours). ``.ci/run`` installs both; without
them the tests skip loudly, or fail when ``CI`` is set. ``Relay`` stands between a client and an
HTTP server and keeps what the client sent (to see which headers reached the server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from harness import McpServers, parse_config
from tests.conftest import missing
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
TIME_SERVER = ROOT / ".venv-mcp" / "bin" / "mcp-server-time"


def everything_command() -> str:
    """The ``mcp-server-everything`` program (npm ``@modelcontextprotocol/server-everything``)."""
    found = shutil.which("mcp-server-everything")
    if found is None:
        missing("mcp-server-everything is not installed (npm): .ci/run installs it")
    return found


def time_command() -> str:
    """The ``mcp-server-time`` program from ``.venv-mcp`` (or PATH)."""
    if TIME_SERVER.exists():
        return str(TIME_SERVER)
    found = shutil.which("mcp-server-time")
    if found is None:
        missing("mcp-server-time is not installed (pip, in .venv-mcp): .ci/run installs it")
    return found


def config_text(**servers: dict[str, object]) -> str:
    """A ``.mcp.json`` text with these servers."""
    return json.dumps({"mcpServers": servers})


def everything(**extra: object) -> dict[str, object]:
    """The stdio configuration of server-everything."""
    return {"command": everything_command(), "args": ["stdio"], **extra}


@contextlib.asynccontextmanager
async def running(text: str, **options: Any) -> AsyncIterator[McpServers]:
    """The servers of ``text``, started (each up or down), stopped at the end."""
    servers = McpServers(parse_config(text, os.environ), **{"start_timeout_s": 60.0, **options})
    await servers.start()
    try:
        yield servers
    finally:
        await servers.aclose()


def children_named(word: str) -> list[int]:
    """The pids of this process's children whose command line contains ``word``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next(
            (line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), ""
        )
        if word.encode() in cmdline and ppid == str(os.getpid()):
            found.append(int(entry.name))
    return found


async def until(predicate: Callable[[], bool], what: str, *, timeout_s: float = 30.0) -> None:
    """Wait until ``predicate()`` holds, failing with ``what`` after ``timeout_s``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting: {what}"
        await asyncio.sleep(0.02)


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5):
            return True
    except OSError:
        return False


class HttpEverything:
    """server-everything over streamable HTTP (``mcp-server-everything streamableHttp``,
    which listens on ``$PORT`` at ``/mcp``), as a child process that can be stopped and
    started again on the same port."""

    def __init__(self) -> None:
        self.command = everything_command()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start it and wait until it accepts connections."""
        self._process = await asyncio.create_subprocess_exec(
            self.command,
            "streamableHttp",
            env={**os.environ, "PORT": str(self.port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await until(lambda: listening(self.port), f"server-everything listens on {self.port}")

    async def kill(self) -> None:
        """Kill it (SIGKILL) and wait until the port is closed."""
        if self._process is not None:
            self._process.kill()
            await self._process.wait()
            self._process = None
        await until(lambda: not listening(self.port), f"port {self.port} closes")


@contextlib.asynccontextmanager
async def http_everything() -> AsyncIterator[HttpEverything]:
    """A running ``HttpEverything``, killed at the end."""
    server = HttpEverything()
    await server.start()
    try:
        yield server
    finally:
        await server.kill()


class Relay:
    """A TCP relay from ``url`` (a free local port) to ``target_port``; ``sent`` is every byte
    clients sent through it, in order."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.sent = bytearray()
        self.url = ""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> Relay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(
            self._pipe(reader, up_writer, record=True),
            self._pipe(up_reader, writer, record=False),
            return_exceptions=True,
        )

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, record: bool
    ) -> None:
        try:
            while chunk := await reader.read(65536):
                if record:
                    self.sent.extend(chunk)
                writer.write(chunk)
                await writer.drain()
        finally:
            writer.close()
