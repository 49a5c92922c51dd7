"""The org's MCP servers, connected once per process and kept connected (docs/architecture.md §12).

Each server has a supervisor task that holds its client open (the ``mcp`` SDK's ``Client``: a
stdio child process, or streamable HTTP), lists its tools, and reconnects with back-off when the
connection ends. A server that fails to start or dies is *down*: its tools leave the list (the
model never sees a tool that will fail) until it is back. Calls have a timeout; the SDK's errors
become ``McpUnavailable``, ``McpTimeout`` or an error result, never a crash of the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types.jsonrpc import CONNECTION_CLOSED

from harness.mcp.config import HttpServer, ServerConfig, StdioServer
from harness.mcp.names import tool_name

log = logging.getLogger(__name__)
MAX_RESULT_CHARS = 16_000_000  # a hard cap in memory; the tool runner keeps big results in a file
RESTART_DELAYS_S = (1.0, 2.0, 5.0, 15.0, 30.0)


class ServerState(StrEnum):
    """Where a server stands."""

    STARTING = "starting"
    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class McpTool:
    """One tool as the model sees it: ``name`` is ``mcp__<server>__<tool>``; ``tool`` is the
    server's own name; the schema and description are the server's."""

    name: str
    server: str
    tool: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True)
class McpResult:
    """A tool's result as text (images and resources described), and whether it is an error."""

    text: str
    is_error: bool


class McpError(Exception):
    """An MCP call could not be made or finished."""


class McpUnavailable(McpError):
    """The tool's server is down (``reason`` says why), or the tool is unknown."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


class McpTimeout(McpError):
    """The call did not finish within ``timeout_s``; whether it took effect is unknown."""

    def __init__(self, name: str, timeout_s: float) -> None:
        super().__init__(f"{name}: no result within {timeout_s:g} s")
        self.name = name
        self.timeout_s = timeout_s


@dataclass
class _Server:
    config: ServerConfig
    state: ServerState = ServerState.STARTING
    reason: str = ""
    client: Client | None = None
    tools: tuple[McpTool, ...] = ()
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    broken: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class McpServers:
    """Every configured server of this process.

    Args:
        configs: the servers (``parse_config``).
        start_timeout_s: how long ``start`` waits for each server's first listing.
        call_timeout_s: the default time limit of one call.
    """

    def __init__(
        self,
        configs: Sequence[ServerConfig],
        *,
        start_timeout_s: float = 30.0,
        call_timeout_s: float = 120.0,
    ) -> None:
        self._servers = {c.name: _Server(c) for c in configs}
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self._closing = False

    async def start(self) -> None:
        """Connect every server (concurrently) and wait until each is up or down."""
        for server in self._servers.values():
            server.task = asyncio.create_task(self._supervise(server), name=server.config.name)
        waits = [
            asyncio.wait_for(s.settled.wait(), self.start_timeout_s) for s in self._servers.values()
        ]
        for server, outcome in zip(
            self._servers.values(),
            await asyncio.gather(*waits, return_exceptions=True),
            strict=True,
        ):
            if isinstance(outcome, BaseException):
                server.state, server.reason = ServerState.DOWN, "did not start in time"

    def states(self) -> dict[str, tuple[ServerState, str]]:
        """Each server's state and, when down, why."""
        return {name: (s.state, s.reason) for name, s in sorted(self._servers.items())}

    def tools(self, channel_id: str | None = None) -> tuple[McpTool, ...]:
        """The tools of the servers that are up and serve ``channel_id``, in a stable order
        (server, then tool name: they sit in the cached prompt prefix)."""
        listed: list[McpTool] = []
        for name in sorted(self._servers):
            server = self._servers[name]
            channels = server.config.channels
            if server.state is ServerState.UP and (not channels or channel_id in channels):
                listed.extend(server.tools)
        return tuple(listed)

    def serves(self, name: str, channel_id: str | None) -> bool:
        """Whether ``name`` is a tool the server it belongs to lists (now or before it went
        down) and that server serves ``channel_id``: a call to it may be tried."""
        for server in self._servers.values():
            channels = server.config.channels
            if any(t.name == name for t in server.tools):
                return not channels or channel_id in channels
        return False

    async def call(
        self, name: str, arguments: Mapping[str, Any], *, timeout_s: float | None = None
    ) -> McpResult:
        """Call the tool the model names ``name``.

        Raises:
            McpUnavailable: no such tool, or its server is down (a lost connection marks it
                down and starts a reconnect).
            McpTimeout: no result within ``timeout_s`` (default ``call_timeout_s``).
        """
        server, tool = self._find(name)
        client = server.client
        if server.state is not ServerState.UP or client is None:
            raise McpUnavailable(name, f"the {server.config.name} server is down: {server.reason}")
        limit = timeout_s or self.call_timeout_s
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool.tool, dict(arguments), read_timeout_seconds=limit), limit
            )
        except TimeoutError as exc:
            raise McpTimeout(name, limit) from exc
        except Exception as exc:  # the SDK raises many kinds; the server answered an error
            if _connection_lost(exc):
                self._mark_down(server, f"connection lost ({type(exc).__name__})")
                raise McpUnavailable(name, server.reason) from exc
            return McpResult(f"MCP error: {exc}", is_error=True)
        return McpResult(_text(result.content, result.structured_content), bool(result.is_error))

    async def aclose(self) -> None:
        """Disconnect every server (stdio children end)."""
        self._closing = True
        tasks = [s.task for s in self._servers.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _find(self, name: str) -> tuple[_Server, McpTool]:
        for server in self._servers.values():
            for tool in server.tools:
                if tool.name == name:
                    return server, tool
        raise McpUnavailable(name, "no such MCP tool")

    def _mark_down(self, server: _Server, reason: str) -> None:
        server.state, server.reason, server.client = ServerState.DOWN, reason, None
        server.broken.set()
        log.warning("MCP server %s is down: %s", server.config.name, reason)

    async def _supervise(self, server: _Server) -> None:
        attempt = 0
        while not self._closing:
            try:
                async with Client(_transport(server.config), mode="auto") as client:
                    server.tools = await _list_tools(client, server.config.name)
                    server.client, server.state, server.reason = client, ServerState.UP, ""
                    server.broken.clear()
                    server.settled.set()
                    attempt = 0
                    log.info(
                        "MCP server %s is up (%d tools)", server.config.name, len(server.tools)
                    )
                    await server.broken.wait()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._mark_down(server, _reason(exc))
            finally:
                server.client = None
            server.settled.set()
            delay = RESTART_DELAYS_S[min(attempt, len(RESTART_DELAYS_S) - 1)]
            attempt += 1
            await asyncio.sleep(delay)  # back-off before reconnecting, not synchronisation


def _transport(config: ServerConfig) -> StdioServerParameters | str:
    if isinstance(config, StdioServer):
        return StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env) or None
        )
    assert isinstance(config, HttpServer)
    return config.url


async def _list_tools(client: Client, server: str) -> tuple[McpTool, ...]:
    tools: list[McpTool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            schema = getattr(tool, "input_schema", None) or {"type": "object"}
            tools.append(
                McpTool(
                    tool_name(server, tool.name), server, tool.name, tool.description or "", schema
                )
            )
        cursor = page.next_cursor
        if not cursor:
            return tuple(sorted(tools, key=lambda t: t.name))


def _text(content: Sequence[Any], structured: Any) -> str:
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS]


def _connection_lost(exc: BaseException) -> bool:
    """Whether the connection (not the tool) failed: the SDK's ``CONNECTION_CLOSED`` error or
    a transport error anywhere in the chain."""
    for e in _chain(exc):  # the SDK's own closed-connection error (servers may send -32000 too)
        error = getattr(e, "error", None)
        if getattr(error, "code", None) == CONNECTION_CLOSED and "closed" in str(e).lower():
            return True
    names = {type(e).__name__ for e in _chain(exc)}
    return bool(
        names
        & {
            "ClosedResourceError",
            "BrokenResourceError",
            "EndOfStream",
            "ConnectionError",
            "BrokenPipeError",
        }
    )


def _chain(exc: BaseException) -> list[BaseException]:
    seen = [exc]
    with contextlib.suppress(Exception):
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                seen.extend(_chain(inner))
        if exc.__cause__ is not None:
            seen.extend(_chain(exc.__cause__))
    return seen


def _reason(exc: BaseException) -> str:
    leaves = [e for e in _chain(exc) if not isinstance(e, BaseExceptionGroup)]
    leaf = leaves[-1] if leaves else exc
    return f"{type(leaf).__name__}: {leaf}"[:300]
