"""Real MCP servers nobody here wrote, for tests: the reference ``server-everything`` (npm) and
``mcp-server-time`` (PyPI, in its own virtual environment so its dependencies stay out of ours).
``.ci/run`` installs both; without them the tests skip loudly, or fail when ``CI`` is set."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from harness import McpServers, parse_config
from tests.conftest import missing

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
async def running(text: str, **options: float) -> AsyncIterator[McpServers]:
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
