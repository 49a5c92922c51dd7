"""How a worker reaches one MCP server, across its reconnects: a stdio child whose stderr is kept
(so a server that dies can say why), or streamable HTTP through one connection-pooled client kept
for the life of the process.
"""

from __future__ import annotations

import os
import tempfile
from typing import IO

import httpx2
from mcp import StdioServerParameters
from mcp.client import Transport
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from harness.mcp.config import HttpServer, ServerConfig, StdioServer

STDERR_TAIL_CHARS = 2_000
# The mcp SDK's own defaults for its HTTP client (``create_mcp_http_client``): 30 s to connect,
# write or wait for the pool; 300 s to read, as a server may hold a response stream open.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class Link:
    """What one server's connections reuse.

    For a stdio server, a fresh file takes the child's stderr at each start (``stderr_tail``
    reads its end); for an HTTP server, one ``httpx2.AsyncClient`` carries the configured
    headers and keeps its connections open between calls and reconnects. Close with ``aclose``.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._stderr: IO[str] | None = None
        self._http: httpx2.AsyncClient | None = None

    def transport(self) -> Transport:
        """A new transport for one connection (the ``mcp`` SDK's ``Transport``)."""
        if isinstance(self.config, StdioServer):
            if self._stderr is not None:
                self._stderr.close()
            self._stderr = tempfile.TemporaryFile(  # noqa: SIM115 (open while the child runs)
                "w+", encoding="utf-8", errors="replace"
            )
            params = StdioServerParameters(
                command=self.config.command,
                args=list(self.config.args),
                env=dict(self.config.env) or None,
            )
            return stdio_client(params, errlog=self._stderr)
        assert isinstance(self.config, HttpServer)
        if self._http is None:
            self._http = httpx2.AsyncClient(headers=dict(self.config.headers), timeout=HTTP_TIMEOUT)
        return streamable_http_client(self.config.url, http_client=self._http)

    def stderr_tail(self, max_chars: int = STDERR_TAIL_CHARS) -> str:
        """The last ``max_chars`` the stdio child of the latest start wrote to stderr, whole
        lines, stripped; empty for an HTTP server or a silent child."""
        if self._stderr is None or self._stderr.closed:
            return ""
        fd = self._stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - max_chars * 4)  # pread leaves the child's write offset alone
        text = os.pread(fd, size - start, start).decode("utf-8", "replace")
        if len(text) > max_chars or start > 0:
            text = text[-max_chars:].partition("\n")[2] or text[-max_chars:]
        return text.strip()

    async def aclose(self) -> None:
        """Close the HTTP client (its pooled connections) and the stderr file."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
