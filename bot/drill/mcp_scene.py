"""The drill's MCP step: dave's session checks the status page through an MCP server.

When ``mcp-server-everything`` (npm ``@modelcontextprotocol/server-everything``) is installed,
the drill's settings name a ``.mcp.json`` running it over stdio on the workers' host, outside
every sandbox; its tools reach the model as ``mcp__everything__*``. Dave's scripted model
sees ``mcp__everything__echo`` in its tool list and calls it once; the checklist line
(``checks.mcp_tool_called``) says the call went through and came back, or that it was skipped
because the server is not installed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bot.drill.steps import Step
from bot.drill.transcript import Call, Transcript

SERVER = "mcp-server-everything"
ECHO = "mcp__everything__echo"
STATUS = "status page: checkout-api degraded since 14:02"
CONFIG_NAME = "mcp.json"


def missing() -> str | None:
    """Why the MCP step cannot run here, or None when it can."""
    if shutil.which(SERVER) is None:
        return f"{SERVER} is not installed (npm install -g @modelcontextprotocol/server-everything)"
    return None


def write_config(data_dir: Path) -> Path | None:
    """Write the drill's ``.mcp.json`` (server-everything over stdio) into ``data_dir``;
    None, writing nothing, when the server is not installed."""
    command = shutil.which(SERVER)
    if command is None:
        return None
    path = data_dir / CONFIG_NAME
    data_dir.mkdir(parents=True, exist_ok=True)
    servers = {"everything": {"command": command, "args": ["stdio"]}}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def status_call() -> Call:
    """The echo call dave's model makes."""
    return Call("", ECHO, {"message": STATUS})


def status_step(t: Transcript) -> Step:
    """Dave's plan step: made when the request offers the echo tool."""
    return Step("Checking the status page through MCP.", status_call(), wanted=ECHO in t.tools)


def status_line(t: Transcript) -> list[str]:
    """The answer's line quoting the MCP result, when the call was made."""
    found = t.last(status_call())
    return [f"Status page (MCP): {found.output}"] if found is not None else []
