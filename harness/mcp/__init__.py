"""MCP servers outside the sandbox, under Claude Code's names (docs/architecture.md §12).

``config`` reads Claude Code's ``.mcp.json`` format; ``names`` makes ``mcp__<server>__<tool>``
names; ``servers`` keeps each server connected for the life of the process and calls its tools.
"""
