"""The org's MCP servers, connected once per process and kept connected (docs/architecture.md §12).

Each server has a supervisor task that holds its client open (the ``mcp`` SDK's ``Client`` over
a ``Link``: a stdio child process, or streamable HTTP through a pooled client), lists its tools,
and reconnects with back-off when the connection ends. An HTTP server is also asked for its tool
list every ``health_interval_s`` (nothing else notices that it went away). A server that fails to
start or dies is *down*: its tools leave the list (the model never sees a tool that will fail)
until it is back, and a stdio server's last stderr lines say why. Calls have a timeout; the SDK's
errors become ``McpUnavailable``, ``McpTimeout`` or an error result, never a crash of the caller.

Each tool carries the org's decision (``policy``): ``deny`` tools are never listed, ``ask``
tools are listed but a call raises ``McpApprovalRequired`` without reaching the server. When the
listed tools' definitions would take more than ``defer_above_tokens``, every one is marked
``deferred``: the model gets their names and loads definitions with ToolSearch (``search``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from mcp import Client

from harness.mcp.config import HttpServer, ServerConfig
from harness.mcp.content import connection_lost, reason, result_text
from harness.mcp.errors import McpApprovalRequired, McpTimeout, McpUnavailable
from harness.mcp.names import tool_name
from harness.mcp.policy import Approval
from harness.mcp.transport import Link

log = logging.getLogger(__name__)
RESTART_DELAYS_S = (1.0, 2.0, 5.0, 15.0, 30.0)
CHARS_PER_TOKEN = 4  # the estimate used for every size in the prompt (docs/tools.md)


class ServerState(StrEnum):
    """Where a server stands."""

    STARTING = "starting"
    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class McpTool:
    """One tool as the model sees it.

    Attributes:
        name: ``mcp__<server>__<tool>``; ``tool`` is the server's own name.
        description, input_schema: the server's.
        read_only: the tool's ``readOnlyHint`` annotation (MCP: false when absent).
        approval: the org's decision for it (``ServerPolicy.decide``).
        deferred: its definition is loaded on demand (ToolSearch), not sent up front.
    """

    name: str
    server: str
    tool: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool = False
    approval: Approval = Approval.ASK
    deferred: bool = False

    def definition_chars(self) -> int:
        """The length of its definition as the API gets it (name, description, schema)."""
        return len(self.name) + len(self.description) + len(json.dumps(self.input_schema))


@dataclass(frozen=True)
class McpResult:
    """A tool's result as text (images and resources described), and whether it is an error."""

    text: str
    is_error: bool


@dataclass
class _Server:
    config: ServerConfig
    link: Link
    state: ServerState = ServerState.STARTING
    reason: str = ""
    stderr: str = ""
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
        defer_above_tokens: defer the tools offered to a session when their definitions
            would take more than this many tokens (estimated at 4 characters a token);
            0 defers always, None never.
        health_interval_s: how often an HTTP server is asked for its tools while up.
    """

    def __init__(
        self,
        configs: Sequence[ServerConfig],
        *,
        start_timeout_s: float = 30.0,
        call_timeout_s: float = 120.0,
        defer_above_tokens: int | None = None,
        health_interval_s: float = 30.0,
    ) -> None:
        self._servers = {c.name: _Server(c, Link(c)) for c in configs}
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self.defer_above_tokens = defer_above_tokens
        self.health_interval_s = health_interval_s
        self._closing = False
        self._offers: dict[str | None, tuple[McpTool, ...]] = {}

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
                self._offers.clear()

    def states(self) -> dict[str, tuple[ServerState, str]]:
        """Each server's state and, when down, why."""
        return {name: (s.state, s.reason) for name, s in sorted(self._servers.items())}

    def stderr_tail(self, name: str) -> str:
        """The last lines a stdio server wrote to stderr before it went down (or, while it
        starts, so far); empty for an HTTP server or a silent one."""
        server = self._servers[name]
        return server.stderr or server.link.stderr_tail()

    def listing(self) -> dict[str, tuple[McpTool, ...]]:
        """Every server's tools as last listed, ``deny`` ones included (for ``mcp list``)."""
        return {name: s.tools for name, s in sorted(self._servers.items())}

    def unknown_in_policy(self) -> dict[str, tuple[str, ...]]:
        """Per server that is up, the tools its ``warroom.tools`` names that it does not have
        (a typo, or a tool since renamed: the decision applies to nothing, so a ``deny``
        meant for a tool guards nothing); servers with none are left out."""
        unknown = {}
        for name, server in sorted(self._servers.items()):
            if server.state is ServerState.UP:
                listed = {t.tool for t in server.tools}
                if extra := tuple(t for t in server.config.policy.tools if t not in listed):
                    unknown[name] = extra
        return unknown

    def tools(self, channel_id: str | None = None) -> tuple[McpTool, ...]:
        """The tools offered to a session of ``channel_id``: those of the servers that are
        up and serve it, ``deny`` ones left out, in a stable order (server, then tool name:
        they sit in the cached prompt prefix), all ``deferred`` when over the threshold."""
        offered = self._offers.get(channel_id)
        if offered is not None:
            return offered
        listed: list[McpTool] = []
        for name in sorted(self._servers):
            server = self._servers[name]
            channels = server.config.channels
            if server.state is ServerState.UP and (not channels or channel_id in channels):
                listed.extend(t for t in server.tools if t.approval is not Approval.DENY)
        limit = self.defer_above_tokens
        chars = sum(t.definition_chars() for t in listed)
        if limit is not None and chars / CHARS_PER_TOKEN > limit:
            listed = [replace(t, deferred=True) for t in listed]
        self._offers[channel_id] = offered = tuple(listed)
        return offered

    def serves(self, name: str, channel_id: str | None) -> bool:
        """Whether ``name`` is a tool the server it belongs to lists (now or before it went
        down), the org does not deny, and that server serves ``channel_id``: a call to it
        may be tried."""
        for server in self._servers.values():
            channels = server.config.channels
            for tool in server.tools:
                if tool.name == name:
                    allowed = tool.approval is not Approval.DENY
                    return allowed and (not channels or channel_id in channels)
        return False

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        timeout_s: float | None = None,
        approved: bool = False,
    ) -> McpResult:
        """Call the tool the model names ``name`` (``approved``: a human approved this
        call in the thread, so an ``ask`` tool may run).

        Raises:
            McpUnavailable: no such tool (or one the org denies), or its server is down (a
                lost connection marks it down and starts a reconnect).
            McpApprovalRequired: the org's policy asks a human first; nothing was sent.
            McpTimeout: no result within ``timeout_s`` (default ``call_timeout_s``).
        """
        server, tool = self._find(name)
        if tool.approval is Approval.ASK and not approved:
            raise McpApprovalRequired(name)
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
            if connection_lost(exc) or not await self._healthy(server, client):
                self._mark_down(server, f"connection lost ({reason(exc)})")
                raise McpUnavailable(name, server.reason) from exc
            return McpResult(f"MCP error: {exc}", is_error=True)
        text = result_text(result.content, result.structured_content)
        return McpResult(text, bool(result.is_error))

    async def aclose(self) -> None:
        """Disconnect every server (stdio children end, HTTP connections close)."""
        self._closing = True
        tasks = [s.task for s in self._servers.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for server in self._servers.values():
            await server.link.aclose()

    def _find(self, name: str) -> tuple[_Server, McpTool]:
        for server in self._servers.values():
            for tool in server.tools:
                if tool.name == name and tool.approval is not Approval.DENY:
                    return server, tool
        raise McpUnavailable(name, "no such MCP tool")

    async def _healthy(self, server: _Server, client: Client) -> bool:
        """After an error answer from an HTTP server, whether it still knows our session
        (one that restarted answers every request with an error): it lists its tools."""
        if not isinstance(server.config, HttpServer):
            return True
        try:
            await asyncio.wait_for(
                client.list_tools(cache_mode="bypass"), min(self.call_timeout_s, 10.0)
            )
        except Exception:
            return False
        return True

    def _mark_down(self, server: _Server, why: str) -> None:
        server.stderr = server.link.stderr_tail() or server.stderr  # the latest start's
        server.state, server.reason, server.client = ServerState.DOWN, why, None
        self._offers.clear()
        server.broken.set()
        tail = f"; its stderr ends: {server.stderr[-300:]}" if server.stderr else ""
        log.warning("MCP server %s is down: %s%s", server.config.name, why, tail)

    async def _supervise(self, server: _Server) -> None:
        attempt = 0
        while not self._closing:
            try:
                async with Client(server.link.transport(), mode="auto") as client:
                    server.tools = await _list_tools(client, server.config)
                    server.client, server.state, server.reason = client, ServerState.UP, ""
                    server.stderr = ""
                    self._offers.clear()
                    server.broken.clear()
                    server.settled.set()
                    attempt = 0
                    log.info(
                        "MCP server %s is up (%d tools)", server.config.name, len(server.tools)
                    )
                    _warn_unknown(server)
                    await self._while_up(server, client)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._mark_down(server, reason(exc))
            finally:
                server.client = None
            server.settled.set()
            delay = RESTART_DELAYS_S[min(attempt, len(RESTART_DELAYS_S) - 1)]
            attempt += 1
            await asyncio.sleep(delay)  # back-off before reconnecting, not synchronisation

    async def _while_up(self, server: _Server, client: Client) -> None:
        """Return when the connection broke; an HTTP server is asked for its tools every
        ``health_interval_s`` meanwhile (a failed answer marks it down)."""
        if not isinstance(server.config, HttpServer):
            await server.broken.wait()
            return
        while not server.broken.is_set():
            try:
                await asyncio.wait_for(server.broken.wait(), self.health_interval_s)
            except TimeoutError:
                tools = await asyncio.wait_for(
                    _list_tools(client, server.config, fresh=True), self.call_timeout_s
                )
                if tools != server.tools:
                    server.tools = tools
                    self._offers.clear()


def _warn_unknown(server: _Server) -> None:
    """Log the tools the server's ``warroom.tools`` names that it does not have."""
    listed = {t.tool for t in server.tools}
    for tool, decision in server.config.policy.tools.items():
        if tool not in listed:
            log.warning(
                'MCP server %s has no tool %r: its "warroom.tools" decision (%s) applies to '
                "nothing; check the name against `warroom mcp list`",
                server.config.name,
                tool,
                decision.value,
            )


async def _list_tools(
    client: Client, config: ServerConfig, *, fresh: bool = False
) -> tuple[McpTool, ...]:
    tools: list[McpTool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass" if fresh else "use")
        for tool in page.tools:
            schema = getattr(tool, "input_schema", None) or {"type": "object"}
            hints = getattr(tool, "annotations", None)
            read_only = bool(getattr(hints, "read_only_hint", False))
            tools.append(
                McpTool(
                    tool_name(config.name, tool.name),
                    config.name,
                    tool.name,
                    tool.description or "",
                    schema,
                    read_only,
                    config.policy.decide(tool.name, read_only=read_only),
                )
            )
        cursor = page.next_cursor
        if not cursor:
            return tuple(sorted(tools, key=lambda t: t.name))
