"""Benchmark of MCP tool calls through the harness, against the real server-everything (stdio).

Prints one JSON line:
    direct_ms_p50/p99     ``McpServers.call`` of server-everything's ``echo`` (the server's
                          own time, with the SDK's stdio round trip): the floor
    run_tool_ms_p50/p99   the same call through ``run_tool`` (tool-list check, dispatch,
                          result bounds): what the harness adds on top
    added_ms_p50/p99      run_tool minus direct, pairwise (the two are interleaved in
                          one run, so the machine's load hits both alike)
    added_ms_p50_of_p50s  run_tool_ms_p50 minus direct_ms_p50
    goal_added_ms_p50     the goal (≤ 5 ms p50 added)
    start_s_3_servers     ``McpServers.start()`` with everything, time and a second
                          everything configured (every server up)
    start_s_1_server      the same with everything alone, for scale

Needs ``mcp-server-everything`` on PATH (npm) and ``mcp-server-time`` in ``.venv-mcp``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# This file's own folder leaves the path: this script is named like the ``mcp`` SDK.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

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
ECHO = "mcp__everything__echo"
GOAL_ADDED_MS_P50 = 5.0


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


def config(*, three: bool) -> str:
    everything = shutil.which("mcp-server-everything")
    time_server = ROOT / ".venv-mcp" / "bin" / "mcp-server-time"
    if everything is None or not time_server.exists():
        sys.exit("needs mcp-server-everything (npm) and .venv-mcp/bin/mcp-server-time (pip)")
    servers: dict[str, object] = {"everything": {"command": everything, "args": ["stdio"]}}
    if three:
        servers["everything2"] = {"command": everything, "args": ["stdio"]}
        servers["time"] = {"command": str(time_server), "args": ["--local-timezone", "UTC"]}
    return json.dumps({"mcpServers": servers})


async def start_s(*, three: bool) -> float:
    servers = McpServers(parse_config(config(three=three), os.environ))
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


async def latencies(servers: McpServers, ctx: ToolContext) -> tuple[list[float], list[float]]:
    direct: list[float] = []
    through: list[float] = []
    for i in range(WARMUP + ROUNDS):
        message = {"message": f"ping {i}"}
        t0 = time.perf_counter()
        await servers.call(ECHO, message)
        t1 = time.perf_counter()
        outcome = await run_tool(ECHO, message, ctx)
        t2 = time.perf_counter()
        assert outcome.content == f"Echo: ping {i}", outcome
        if i >= WARMUP:
            direct.append((t1 - t0) * 1000)
            through.append((t2 - t1) * 1000)
    return direct, through


async def main() -> None:
    start_3 = await start_s(three=True)
    start_1 = await start_s(three=False)
    with tempfile.TemporaryDirectory() as data:
        db = Database.from_url(None, data_dir=Path(data))
        await db.migrate()
        servers = McpServers(parse_config(config(three=False), os.environ))
        await servers.start()
        try:
            ctx = ToolContext(
                store=FileStore(db),
                workspace=NoSandbox(),
                org_id="T-BENCH",
                channel_id="C-BENCH",
                session_id="s-bench",
                actor="agent",
                tool_use_id="toolu_bench",
                mcp=servers,
            )
            direct, through = await latencies(servers, ctx)
        finally:
            await servers.aclose()
            await db.dispose()
    added = [b - a for a, b in zip(direct, through, strict=True)]
    print(
        json.dumps(
            {
                "transport": "stdio",
                "rounds": ROUNDS,
                "direct_ms_p50": round(statistics.median(direct), 3),
                "direct_ms_p99": round(pct(direct, 0.99), 3),
                "run_tool_ms_p50": round(statistics.median(through), 3),
                "run_tool_ms_p99": round(pct(through, 0.99), 3),
                "added_ms_p50": round(statistics.median(added), 3),
                "added_ms_p99": round(pct(added, 0.99), 3),
                "added_ms_p50_of_p50s": round(
                    statistics.median(through) - statistics.median(direct), 3
                ),
                "goal_added_ms_p50": GOAL_ADDED_MS_P50,
                "start_s_3_servers": round(start_3, 3),
                "start_s_1_server": round(start_1, 3),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
