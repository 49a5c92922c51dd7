"""Claude Code tool names Warroom does not offer, and the sentence each one gets instead.

A model trained on Claude Code may call any of its tools. These are refused with a tool
error that says what to use in Warroom (docs/tools.md, "Claude Code's other tools");
any other unknown name gets Claude Code's own ``No such tool available`` (so do
``TaskOutput`` and ``BashOutput``, which Claude Code itself no longer offers).
"""

from __future__ import annotations

from collections.abc import Mapping

_SUBAGENTS = "Subagents answer their Agent call; start one with Agent and wait for its result."
_WORKTREE = (
    "The sandbox is this session's own checkout: work in /workspace (git worktree through "
    "Bash if you need a second one)."
)

REFUSED: Mapping[str, str] = {
    "ListAgents": _SUBAGENTS,
    "SendMessage": (
        "To tell the people in the thread something, say it in your answer; to hand work to a "
        "subagent, start one with Agent."
    ),
    "ReportFindings": "Write your findings in your answer, or in a file under /incident/.",
    "Workflow": (
        "Run the steps yourself with the tools, or hand independent parts to subagents with "
        "Agent (several Agent calls in one message run in parallel)."
    ),
    "EnterWorktree": _WORKTREE,
    "ExitWorktree": _WORKTREE,
    "NotebookEdit": (
        "Edit the notebook's JSON with Read and Edit, or run nbformat/jupyter through Bash."
    ),
    "WebSearch": (
        "There is no web search from Warroom; use the org's MCP tools, or fetch a known URL "
        "with WebFetch when the org's egress rules allow it."
    ),
}
"""Tool name → what the model should use instead (the text after "X is not available")."""
