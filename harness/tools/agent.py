"""Agent: run a subagent, a session of its own, on a task (Claude Code 2.1.332's
``description``, ``prompt``, ``subagent_type``, ``run_in_background``; docs/tools.md).

The subagent is a durable child session: its own transcript and checkpoint, the
parent's org, incident files and sandbox, run step by step by whichever workers are
free, so several ``Agent`` calls of one assistant message run in parallel. The durable
layer creates it (``AgentSpawner``). The parent does not wait in a worker: the call is
recorded as awaiting its answer (``AgentRecord``), and once every call of the message is
answered or awaiting, the session parks until the answers come back as inputs of kind
``agent`` (``agent_result_text``), each becoming its call's ``tool_result``. With
``run_in_background`` the call returns at once and the answer arrives as a
``<task-notification>``. A subagent cannot start subagents.
"""

from __future__ import annotations

import html
import json
import time
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from harness.loop.checkpoint import AgentRecord
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, tool_error

AGENT_RESULT_KIND = "agent"
"""The ``Inbound.kind`` of a foreground subagent's answer (becomes its ``tool_result``)."""
SUBAGENT_TYPES = ("general-purpose", "Explore", "Plan")
"""The ``subagent_type`` names Claude Code's model knows that Warroom runs; the first is
the default. ``Explore`` and ``Plan`` are general-purpose subagents told to change nothing
(``READ_ONLY_NOTE``): the approval policy and the guard still bound what they run."""

READ_ONLY_NOTE = (
    "<system-reminder>You are a {kind} subagent: investigate and report what you find. Change "
    "nothing: do not write or edit files, and run only commands that read.</system-reminder>\n\n"
)


class AgentSpawner(Protocol):
    """Starts child sessions (the durable layer's part of ``Agent``)."""

    async def spawn(
        self, *, tool_use_id: str, description: str, prompt: str, background: bool
    ) -> str:
        """Create (once per ``tool_use_id``: a repeat finds the same child) and start the
        child session of this call; returns its session id.

        Raises:
            memory_store.DatabaseUnavailable: retry the step.
        """
        ...


class AgentInput(BaseModel):
    """Agent's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str = Field(min_length=1, max_length=200)
    prompt: str = Field(min_length=1, max_length=100_000)
    subagent_type: str | None = None
    run_in_background: bool | None = None
    model: Literal["sonnet", "opus", "haiku", "fable"] | None = None
    """Accepted (Claude Code's names); the subagent runs on the session's model."""
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    """Accepted (Claude Code's names); the subagent uses the session's settings."""


async def agent(p: AgentInput, ctx: ToolContext) -> ToolOutcome:
    """Start the subagent; a foreground call's result comes later (``pending``)."""
    if ctx.agents is None:
        return tool_error("Subagents cannot start subagents of their own; do the work yourself.")
    kind = p.subagent_type or SUBAGENT_TYPES[0]
    if kind not in SUBAGENT_TYPES:
        return tool_error(
            f"Agent type '{kind}' not found. Available agents: {', '.join(SUBAGENT_TYPES)}"
        )
    background = bool(p.run_in_background)
    prompt = p.prompt if kind == SUBAGENT_TYPES[0] else READ_ONLY_NOTE.format(kind=kind) + p.prompt
    child = await ctx.agents.spawn(
        tool_use_id=ctx.tool_use_id,
        description=p.description,
        prompt=prompt,
        background=background,
    )
    record = AgentRecord(ctx.tool_use_id, child, p.description, background, time.time())
    if background:
        text = (
            f"Async agent launched successfully\nagentId: {child}\n"
            "You will be notified when it completes."
        )
        return ToolOutcome(text, agent=record)
    return ToolOutcome("", agent=record, pending=True)


def agent_result_text(tool_use_id: str, answer: str, *, failed: bool = False) -> str:
    """The input that carries a foreground subagent's answer to its parent (kind
    ``agent``): the parent's harness turns it into the call's ``tool_result``."""
    return json.dumps({"tool_use_id": tool_use_id, "answer": answer, "failed": failed})


def parse_agent_result(text: str) -> tuple[str, str, bool] | None:
    """``(tool_use_id, answer, failed)`` of an ``agent_result_text``, or None."""
    try:
        data = json.loads(text)
        return str(data["tool_use_id"]), str(data["answer"]), bool(data.get("failed"))
    except (ValueError, KeyError, TypeError):
        return None


def agent_notification(record: AgentRecord, answer: str, *, failed: bool = False) -> str:
    """What the parent is told when a background subagent ends.

    >>> r = AgentRecord("toolu_1", "s-child", "Check the pods", True, 0.0)
    >>> print(agent_notification(r, "All pods healthy."))
    <task-notification>
    <task-id>s-child</task-id>
    <tool-use-id>toolu_1</tool-use-id>
    <status>completed</status>
    <summary>Agent "Check the pods" completed</summary>
    <result>All pods healthy.</result>
    </task-notification>
    """
    status = "failed" if failed else "completed"
    label = html.escape(record.description, quote=False)
    return "\n".join(
        (
            "<task-notification>",
            f"<task-id>{record.session_id}</task-id>",
            f"<tool-use-id>{record.tool_use_id}</tool-use-id>",
            f"<status>{status}</status>",
            f'<summary>Agent "{label}" {status}</summary>',
            f"<result>{answer}</result>",
            "</task-notification>",
        )
    )


AGENT = ModelTool(
    name="Agent",
    description=(
        "Hand a self-contained task to a subagent: a separate session with its own context "
        "that can use the same tools, sandbox and incident files (but not start subagents). "
        "Its final answer comes back as this call's result. Several Agent calls in one "
        "message run in parallel, so split independent checks (three hypotheses, three "
        "services) across them. The prompt must say everything the subagent needs: it does "
        "not see this conversation. With run_in_background the call returns at once and you "
        "are notified when it finishes. subagent_type: general-purpose (the default); Explore "
        "and Plan run the same subagent told to only read and report."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "description": {
                "type": "string",
                "description": "The task in 3-5 words (shown to the team).",
            },
            "prompt": {"type": "string", "description": "The task, in full."},
            "subagent_type": {
                "type": "string",
                "description": "The kind of subagent: general-purpose, Explore or Plan.",
            },
            "run_in_background": {
                "type": "boolean",
                "description": "Return at once and be notified when the subagent finishes.",
            },
            "model": {
                "type": "string",
                "enum": ["sonnet", "opus", "haiku", "fable"],
                "description": "Accepted; the subagent runs on this session's model.",
            },
            "effort": {
                "type": "string",
                "enum": ["low", "medium", "high", "xhigh", "max"],
                "description": "Accepted; the subagent uses this session's settings.",
            },
        },
        "required": ["description", "prompt"],
        "additionalProperties": False,
    },
    params=AgentInput,
    runner=agent,
    recoverer=agent,  # spawning is idempotent by tool_use id
)
