"""MCP server configuration in Claude Code's ``.mcp.json`` format.

``{"mcpServers": {"<name>": {"command": …, "args": […], "env": {…}}}}`` runs a stdio server;
``{"type": "http", "url": …, "headers": {…}}`` reaches a streamable HTTP server. ``${VAR}`` and
``${VAR:-default}`` in any string are read from the environment the caller passes (the worker's:
credentials stay on the harness host, never in a sandbox). Warroom adds two optional keys:
``channels``, the Slack channel ids whose sessions may use the server (default: all), and
``warroom``, the approval policy of its tools (``{"default": …, "tools": {"<tool>": …}}`` with
``allow``, ``ask`` or ``deny``; ``policy``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.mcp.policy import Approval, ServerPolicy

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpConfigError(ValueError):
    """The configuration is not valid; the message names the server and the problem."""


@dataclass(frozen=True)
class StdioServer:
    """A server run as a child process speaking MCP on its stdin/stdout."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    channels: tuple[str, ...] = ()
    policy: ServerPolicy = field(default_factory=ServerPolicy)


@dataclass(frozen=True)
class HttpServer:
    """A server reached over streamable HTTP."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    channels: tuple[str, ...] = ()
    policy: ServerPolicy = field(default_factory=ServerPolicy)


ServerConfig = StdioServer | HttpServer


def parse_config(text: str, environ: Mapping[str, str]) -> tuple[ServerConfig, ...]:
    """The servers of a ``.mcp.json`` text, in name order, with ``${VAR}`` expanded.

    Raises:
        McpConfigError: not JSON, not the expected shape, an unknown ``type``, a bad server name,
            a ``${VAR}`` with no value and no default, or a policy that is not ``allow``,
            ``ask`` or ``deny``.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"not JSON: {exc}") from exc
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError('expected {"mcpServers": {"<name>": {…}}}')
    return tuple(_server(name, servers[name], environ) for name in sorted(servers))


def _server(name: str, raw: Any, environ: Mapping[str, str]) -> ServerConfig:
    if not _NAME.match(name):
        raise McpConfigError(f"server {name!r}: names are 1-64 letters, digits, '_' or '-'")
    if not isinstance(raw, dict):
        raise McpConfigError(f"server {name}: expected an object")
    spec = _expand(raw, environ, name)
    kind = spec.get("type", "stdio" if "command" in spec else None)
    channels = tuple(str(c) for c in spec.get("channels", ()))
    policy = _policy(name, spec.get("warroom", {}))
    if kind == "stdio":
        if not isinstance(spec.get("command"), str):
            raise McpConfigError(f"server {name}: a stdio server needs a command")
        return StdioServer(
            name,
            spec["command"],
            tuple(str(a) for a in spec.get("args", ())),
            {str(k): str(v) for k, v in spec.get("env", {}).items()},
            channels,
            policy,
        )
    if kind in ("http", "streamable-http"):
        if not isinstance(spec.get("url"), str):
            raise McpConfigError(f"server {name}: an http server needs a url")
        headers = {str(k): str(v) for k, v in spec.get("headers", {}).items()}
        return HttpServer(name, spec["url"], headers, channels, policy)
    if kind is None:
        raise McpConfigError(
            f'server {name}: no "command" (a stdio server: "command" and "args") and no '
            '"type" (an http server: "type": "http" and "url"); say how to start or reach it'
        )
    raise McpConfigError(f"server {name}: type {kind!r} is not supported (stdio or http)")


def _policy(server: str, raw: Any) -> ServerPolicy:
    """The ``warroom`` key of a server entry: ``{"default": …, "tools": {"<tool>": …}}``."""
    if not isinstance(raw, dict) or set(raw) - {"default", "tools"}:
        raise McpConfigError(
            f'server {server}: "warroom" takes {{"default": …, "tools": {{"<tool>": …}}}}'
        )
    tools = raw.get("tools", {})
    if not isinstance(tools, dict):
        raise McpConfigError(f'server {server}: "warroom.tools" maps tool names to decisions')
    default = raw.get("default")
    return ServerPolicy(
        None if default is None else _approval(server, "default", default),
        {str(t): _approval(server, f"tools.{t}", v) for t, v in sorted(tools.items())},
    )


def _approval(server: str, where: str, value: Any) -> Approval:
    try:
        return Approval(value)
    except ValueError:
        raise McpConfigError(
            f"server {server}: warroom.{where} is {value!r}; expected allow, ask or deny"
        ) from None


def _expand(value: Any, environ: Mapping[str, str], server: str) -> Any:
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise McpConfigError(f"server {server}: ${{{name}}} is not set")

        return _VAR.sub(one, value)
    if isinstance(value, list):
        return [_expand(v, environ, server) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, environ, server) for k, v in value.items()}
    return value
