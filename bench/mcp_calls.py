"""Benchmark of MCP tool calls through the harness, against the real server-everything over
stdio and over streamable HTTP.

Prints one JSON line; for each transport (``stdio_…``, ``http_…``):
    direct_ms_p50/p99     ``McpServers.call`` of server-everything's ``echo`` (the server's
                          own time, with the SDK's round trip): the floor
    run_tool_ms_p50/p99   the same call through ``run_tool`` (tool-list check, policy,
                          dispatch, result bounds): what the model's call costs
    added_ms_p50/p99      run_tool minus direct, pairwise (the two are interleaved in
                          one run, so the machine's load hits both alike)
then:
    goal_added_ms_p50     the goal (≤ 5 ms p50 added)
    start_s_3_servers     ``McpServers.start()`` of a worker with three servers: everything
                          over stdio, time over stdio, everything over HTTP (every one up)
    start_s_1_server      the same with everything over stdio alone, for scale

Needs ``mcp-server-everything`` on PATH (npm) and ``mcp-server-time`` in ``.venv-mcp``; the
HTTP server is started here (``mcp-server-everything streamableHttp`` on a free port).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# This file's own folder leaves the path: this script is named like the ``mcp`` SDK.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]
sys.path.append(str(HERE))  # last, for bench/goals.py alone

from goals import verdict  # noqa: E402

from harness import (  # noqa: E402
    CommandResult,
    McpServers,
    ServerState,
    ToolContext,
    parse_config,
    run_tool,
)
from memory_store import Database, FileStore  # noqa: E402

ROUNDS = 300
WARMUP = 20
ECHO = {"stdio": "mcp__everything__echo", "http": "mcp__web__echo"}
GOAL_ADDED_MS_P50 = 5.0
GOALS = {f"{kind}_added_ms_p50": ("<=", GOAL_ADDED_MS_P50) for kind in ("stdio", "http")}


class NoSandbox:
    """An echo result never reaches the sandbox (it is far below the persisted-output cap)."""

    async def exec(self, name: str, command: str, *, timeout_s: float) -> CommandResult:
        raise AssertionError("not used")

    async def lookup(self, name: str, *, timeout_s: float) -> CommandResult | None:
        raise AssertionError("not used")

    async def read_file(self, path: str) -> bytes:
        raise AssertionError("not used")

    async def write_file(self, path: str, data: bytes) -> None:
        raise AssertionError("not used")


def commands() -> tuple[str, Path]:
    everything = shutil.which("mcp-server-everything")
    time_server = ROOT / ".venv-mcp" / "bin" / "mcp-server-time"
    if everything is None or not time_server.exists():
        sys.exit("needs mcp-server-everything (npm) and .venv-mcp/bin/mcp-server-time (pip)")
    return everything, time_server


def config(servers: list[str], http_url: str) -> str:
    everything, time_server = commands()
    known: dict[str, object] = {
        "everything": {"command": everything, "args": ["stdio"]},
        "time": {"command": str(time_server), "args": ["--local-timezone", "UTC"]},
        "web": {"type": "http", "url": http_url},
    }
    return json.dumps({"mcpServers": {name: known[name] for name in servers}})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def http_server() -> tuple[asyncio.subprocess.Process, str]:
    """server-everything over streamable HTTP on a free port, accepting connections."""
    everything, _ = commands()
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        everything,
        "streamableHttp",
        env={**os.environ, "PORT": str(port)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("server-everything (streamableHttp) did not start listening")
            await asyncio.sleep(0.05)  # polling a condition with a deadline
            continue
        writer.close()
        return process, f"http://127.0.0.1:{port}/mcp"


async def start_s(names: list[str], http_url: str) -> float:
    servers = McpServers(parse_config(config(names, http_url), os.environ))
    started = time.perf_counter()
    await servers.start()
    elapsed = time.perf_counter() - started
    try:
        states = servers.states()
        assert all(s is ServerState.UP for s, _ in states.values()), states
    finally:
        await servers.aclose()
    return elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latencies(
    servers: McpServers, ctx: ToolContext, name: str
) -> tuple[list[float], list[float]]:
    direct: list[float] = []
    through: list[float] = []
    for i in range(WARMUP + ROUNDS):
        message = {"message": f"ping {i}"}
        t0 = time.perf_counter()
        await servers.call(name, message)
        t1 = time.perf_counter()
        outcome = await run_tool(name, message, ctx)
        t2 = time.perf_counter()
        assert outcome.content == f"Echo: ping {i}", outcome
        if i >= WARMUP:
            direct.append((t1 - t0) * 1000)
            through.append((t2 - t1) * 1000)
    return direct, through


async def transport(kind: str, http_url: str, store: FileStore) -> dict[str, float]:
    """The latency figures of one transport, keys prefixed with its name."""
    name = ECHO[kind]
    servers = McpServers(parse_config(config([name.split("__")[1]], http_url), os.environ))
    await servers.start()
    try:
        ctx = ToolContext(
            store=store,
            workspace=NoSandbox(),
            org_id="T-BENCH",
            channel_id="C-BENCH",
            session_id="s-bench",
            actor="agent",
            tool_use_id="toolu_bench",
            mcp=servers,
        )
        direct, through = await latencies(servers, ctx, name)
    finally:
        await servers.aclose()
    added = [b - a for a, b in zip(direct, through, strict=True)]
    figures = {
        "direct_ms_p50": statistics.median(direct),
        "direct_ms_p99": pct(direct, 0.99),
        "run_tool_ms_p50": statistics.median(through),
        "run_tool_ms_p99": pct(through, 0.99),
        "added_ms_p50": statistics.median(added),
        "added_ms_p99": pct(added, 0.99),
    }
    return {f"{kind}_{key}": round(value, 3) for key, value in figures.items()}


async def main() -> None:
    process, http_url = await http_server()
    try:
        start_3 = await start_s(["everything", "time", "web"], http_url)
        start_1 = await start_s(["everything"], http_url)
        with tempfile.TemporaryDirectory() as data:
            db = Database.from_url(None, data_dir=Path(data))
            await db.migrate()
            try:
                stdio = await transport("stdio", http_url, FileStore(db))
                http = await transport("http", http_url, FileStore(db))
            finally:
                await db.dispose()
    finally:
        process.kill()
        await process.wait()
    figures = {
        "rounds": ROUNDS,
        **stdio,
        **http,
        "goal_added_ms_p50": GOAL_ADDED_MS_P50,
        "start_s_3_servers": round(start_3, 3),
        "start_s_1_server": round(start_1, 3),
    }
    print(json.dumps(figures | verdict(figures, GOALS)))


if __name__ == "__main__":
    asyncio.run(main())
