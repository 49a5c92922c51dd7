"""Finding deferred MCP tools for ToolSearch: Claude Code's query forms over names and descriptions.

``select:a,b`` picks tools by exact name; other queries are keywords, each word scored against the
parts of a tool's name (``mcp__grafana__search_dashboards`` → grafana, search, dashboards), the
whole name, its description and its parameter names; a ``+word`` must appear in the name. The
best ``max_results`` come back, ties in name order (the same query always loads the same tools).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.mcp.servers import McpTool

SELECT = "select:"
_PARTS = re.compile(r"[_\-.\s]+")
_WORD = re.compile(r"[a-z0-9]+")


def search_tools(query: str, tools: Sequence[McpTool], max_results: int = 5) -> tuple[str, ...]:
    """The names of the tools ``query`` finds among ``tools``, best first.

    >>> tools = [McpTool("mcp__k8s__list_pods", "k8s", "list_pods", "List pods", {}),
    ...          McpTool("mcp__grafana__search", "grafana", "search", "Find dashboards", {})]
    >>> search_tools("select:mcp__grafana__search,nope", tools)
    ('mcp__grafana__search',)
    >>> search_tools("pods", tools), search_tools("dashboards", tools)
    (('mcp__k8s__list_pods',), ('mcp__grafana__search',))
    >>> search_tools("+k8s dashboards", tools)
    ('mcp__k8s__list_pods',)
    """
    query = query.strip()
    if query.lower().startswith(SELECT):
        wanted = [n.strip() for n in query[len(SELECT) :].split(",") if n.strip()]
        known = {t.name for t in tools}
        return tuple(dict.fromkeys(n for n in wanted if n in known))
    exact = [t.name for t in tools if t.name == query]
    if exact:
        return tuple(exact)
    words = query.lower().split()
    required = [w[1:] for w in words if w.startswith("+") and len(w) > 1]
    optional = [w for w in words if not w.startswith("+")]
    scored: list[tuple[int, str]] = []
    for tool in tools:
        name = tool.name.lower()
        if not all(r in name for r in required):
            continue
        score = sum(_score(word, tool) for word in optional)
        if required or score > 0:
            scored.append((-score, tool.name))
    return tuple(name for _, name in sorted(scored)[: max(max_results, 1)])


def _score(word: str, tool: McpTool) -> int:
    parts = set(_PARTS.split(tool.name.lower()))
    if word in parts:
        return 10
    if word in tool.name.lower():
        return 5
    described = set(_WORD.findall(tool.description.lower()))
    properties = tool.input_schema.get("properties")
    params = {str(p).lower() for p in properties} if isinstance(properties, dict) else set()
    if word in described or word in params:
        return 2
    return 1 if word in tool.description.lower() else 0
