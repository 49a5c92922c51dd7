"""MCP servers outside the sandbox, under Claude Code's names (docs/architecture.md §12).

``config`` reads Claude Code's ``.mcp.json`` format; ``names`` makes ``mcp__<server>__<tool>``
names; ``servers`` keeps each server connected for the life of the process (over a ``transport``)
and calls its tools; ``policy`` decides which tools need a human's approval; ``search`` finds
deferred tools for ToolSearch.
"""
