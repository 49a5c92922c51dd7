"""Real MCP servers nobody here wrote, for tests: the reference ``server-everything`` (npm) and
``mcp-server-time`` (PyPI, in its own virtual environment so its dependencies stay out of ours).
``.ci/run`` installs both; without them the tests skip loudly, or fail when ``CI`` is set."""

from __future__ import annotations

import shutil
from pathlib import Path

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
