"""harness: the agent (one step of the loop, the model adapter, tools, path routing, bash guard).

The door: other packages import only these names. Each is imported on first use (PEP 562
``__getattr__``), so a process that needs one light part (the model catalog for the fake
Messages API, a constant) does not pay for the whole agent: the Anthropic SDK, MCP, the
approval policy, the store. A new public name goes in the ``TYPE_CHECKING`` imports,
``__all__`` and ``_MODULES`` (a test checks the three agree).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.approvals.gate import DEFAULT_TIMEOUT_S as APPROVAL_TIMEOUT_S
    from harness.approvals.gate import ApprovalGate
    from harness.approvals.pending import (
        APPROVAL_KIND,
        REJECTED,
        ApprovalDecision,
        ApprovalStatus,
        PendingApproval,
        decision_key,
        input_sha256,
    )
    from harness.approvals.policy import (
        Decision,
        Policy,
        PolicyError,
        Verdict,
        default_policy,
        request_decision,
        with_org_policy,
    )
    from harness.approvals.reach import EgressReach, NoNetwork, OpenNetwork, Reach
    from harness.cost.caps import Spent, day_start
    from harness.cost.metered import MeteredModel, token_usage
    from harness.cost.pricing import (
        Cost,
        Price,
        PriceTable,
        default_prices,
        nanousd,
        parse_prices,
        usd,
    )
    from harness.errors import (
        CostLimitReached,
        HarnessError,
        InvalidMessage,
        LimitReached,
        ModelContextOverflow,
        ModelError,
        ModelRejected,
        ModelStalled,
        ModelUnavailable,
        OrgDayCostLimitReached,
        SessionCostLimitReached,
        StepLimitReached,
        TokenLimitReached,
        ToolTimeLimitReached,
        WorkspaceCannotStart,
        WorkspaceError,
        WorkspaceFileNotFound,
        WorkspaceIsADirectory,
        WorkspaceRefused,
        WorkspaceUnavailable,
    )
    from harness.guard.check import Allow, Deny, GuardDecision, check_bash
    from harness.loop.checkpoint import (
        AgentRecord,
        Checkpoint,
        Inbound,
        ParentLink,
        ReadRecord,
        Requester,
        ScheduledWakeup,
        TaskRecord,
        Todo,
        TodoStatus,
        holds_messages,
        in_flight_tool,
    )
    from harness.loop.events import (
        Answered,
        ApprovalDecided,
        ApprovalRequested,
        Event,
        InputGiven,
        ModelResponded,
        Notice,
        NoticeTopic,
        TodosChanged,
        ToolBlocked,
        ToolFinished,
        ToolIntent,
        ToolUnknown,
        shown_events,
    )
    from harness.loop.limits import Limits
    from harness.loop.notices import change_notices
    from harness.loop.services import Service, services_section
    from harness.loop.step import (
        Collaborators,
        Next,
        StepKind,
        StepResult,
        advance,
        after_stop,
        answer_key,
        answer_posted,
        approval_posted,
        held,
        holds_long_work,
        next_kind,
        resumes,
        waits_mid_turn,
    )
    from harness.loop.wakeups import WAKE_KIND, next_wake
    from harness.mcp.config import (
        HttpServer,
        McpConfigError,
        ServerConfig,
        StdioServer,
        parse_config,
    )
    from harness.mcp.errors import McpApprovalRequired, McpError, McpTimeout, McpUnavailable
    from harness.mcp.policy import Approval, ServerPolicy
    from harness.mcp.servers import McpResult, McpServers, McpTool, ServerState
    from harness.model.adapter import (
        DEFAULT_BASE_URL,
        AnthropicModel,
        Model,
        ModelReply,
        RefusalDetails,
    )
    from harness.model.catalog import (
        DEFAULT_MAX_TOKENS,
        DEFAULT_MODEL,
        DEFAULT_SMALL_MODEL,
        MODELS,
        ModelSpec,
        current_models,
        lifecycle,
    )
    from harness.model.messages import (
        ContentBlock,
        Message,
        RedactedThinkingBlock,
        TextBlock,
        ThinkingBlock,
        ToolResultBlock,
        ToolUseBlock,
        Usage,
        from_wire,
        to_wire,
    )
    from harness.model.request import ToolSpec, build_request
    from harness.model.spliced import MessagesMemo
    from harness.model.transcript import StoredMessages, Transcript, appended
    from harness.recall.related import Recall
    from harness.recall.summary import parse_summary
    from harness.record.incident import TIMELINE_PATH, IncidentRecord
    from harness.record.kinds import Actor, ActorKind, EntryKind
    from harness.record.links import permalink
    from harness.record.postmortem import (
        NO_EVIDENCE,
        POSTMORTEM_PATH,
        Citations,
        citations,
        is_postmortem_request,
        postmortem_request,
        request_for_model,
    )
    from harness.record.render import timeline_json, timeline_markdown
    from harness.record.timeline import Entry, Timeline, build_timeline
    from harness.sandbox.session import EgressBinder, SandboxWorkspaces, SessionWorkspace
    from harness.sandbox.workspace import (
        CommandResult,
        NewSandbox,
        StepWorkspace,
        Workspace,
        WorkspaceSource,
    )
    from harness.tools.agent import (
        AGENT_RESULT_KIND,
        AgentSpawner,
        agent_notification,
        agent_result_text,
    )
    from harness.tools.background import (
        NOTIFICATION_KIND,
        end_session_tasks,
        event_lines,
        monitor_event,
        notified_task_id,
        task_notification,
    )
    from harness.tools.contract import Tool, ToolContext, ToolOutcome
    from harness.tools.toolbox import TOOLS, canonical_name, run_tool, summarize_call, tool_specs
    from harness.vfs import Mount, PathError, Resolved, resolve

__all__ = [
    # approvals (docs/architecture.md §13)
    "APPROVAL_KIND",
    "APPROVAL_TIMEOUT_S",
    "REJECTED",
    "ApprovalDecided",
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalRequested",
    "ApprovalStatus",
    "Decision",
    "EgressReach",
    "NoNetwork",
    "OpenNetwork",
    "PendingApproval",
    "Policy",
    "PolicyError",
    "Reach",
    "ToolBlocked",
    "Verdict",
    "approval_posted",
    "decision_key",
    "default_policy",
    "input_sha256",
    "request_decision",
    "with_org_policy",
    # errors
    "CostLimitReached",
    "HarnessError",
    "InvalidMessage",
    "LimitReached",
    "ModelContextOverflow",
    "ModelError",
    "ModelRejected",
    "ModelStalled",
    "ModelUnavailable",
    "OrgDayCostLimitReached",
    "SessionCostLimitReached",
    "StepLimitReached",
    "TokenLimitReached",
    "ToolTimeLimitReached",
    "WorkspaceCannotStart",
    "WorkspaceError",
    "WorkspaceFileNotFound",
    "WorkspaceIsADirectory",
    "WorkspaceRefused",
    "WorkspaceUnavailable",
    # cost: prices, metering, caps
    "Cost",
    "MeteredModel",
    "Price",
    "PriceTable",
    "Spent",
    "day_start",
    "default_prices",
    "nanousd",
    "parse_prices",
    "token_usage",
    "usd",
    # the incident record
    "POSTMORTEM_PATH",
    "TIMELINE_PATH",
    "Citations",
    "NO_EVIDENCE",
    "citations",
    "request_for_model",
    "is_postmortem_request",
    "postmortem_request",
    "Actor",
    "ActorKind",
    "Entry",
    "EntryKind",
    "IncidentRecord",
    "Recall",
    "parse_summary",
    "Timeline",
    "build_timeline",
    "permalink",
    "timeline_json",
    "timeline_markdown",
    # the step
    "Collaborators",
    "after_stop",
    "holds_long_work",
    "resumes",
    "waits_mid_turn",
    "StoredMessages",
    "Transcript",
    "appended",
    "Limits",
    "Next",
    "StepKind",
    "StepResult",
    "advance",
    "next_kind",
    "answer_key",
    "answer_posted",
    "held",
    "next_wake",
    "WAKE_KIND",
    # events
    "Answered",
    "Event",
    "InputGiven",
    "ModelResponded",
    "Notice",
    "NoticeTopic",
    "TodosChanged",
    "ToolFinished",
    "ToolIntent",
    "ToolUnknown",
    "shown_events",
    # sandbox
    "EgressBinder",
    "SandboxWorkspaces",
    "Service",
    "services_section",
    "SessionWorkspace",
    # checkpoint
    "Checkpoint",
    "Inbound",
    "ReadRecord",
    "Requester",
    "AgentRecord",
    "ParentLink",
    "AGENT_RESULT_KIND",
    "AgentSpawner",
    "agent_notification",
    "agent_result_text",
    "ScheduledWakeup",
    "TaskRecord",
    "NOTIFICATION_KIND",
    "notified_task_id",
    "event_lines",
    "monitor_event",
    "task_notification",
    "end_session_tasks",
    "Todo",
    "TodoStatus",
    "holds_messages",
    "in_flight_tool",
    # messages
    "ContentBlock",
    "Message",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
    "from_wire",
    "to_wire",
    # model
    "DEFAULT_BASE_URL",
    "AnthropicModel",
    "Model",
    "ModelReply",
    "RefusalDetails",
    "ToolSpec",
    "build_request",
    "MessagesMemo",
    # model catalogue
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL",
    "DEFAULT_SMALL_MODEL",
    "MODELS",
    "ModelSpec",
    "current_models",
    "lifecycle",
    # tools
    "TOOLS",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "canonical_name",
    "change_notices",
    "run_tool",
    "summarize_call",
    "tool_specs",
    # MCP servers
    "Approval",
    "HttpServer",
    "McpApprovalRequired",
    "McpConfigError",
    "McpError",
    "McpResult",
    "McpServers",
    "McpTimeout",
    "McpTool",
    "McpUnavailable",
    "ServerConfig",
    "ServerPolicy",
    "ServerState",
    "StdioServer",
    "parse_config",
    # bash guard
    "Allow",
    "Deny",
    "GuardDecision",
    "check_bash",
    # paths
    "Mount",
    "PathError",
    "Resolved",
    "resolve",
    # workspace (the sandbox as the tools see it)
    "CommandResult",
    "NewSandbox",
    "StepWorkspace",
    "Workspace",
    "WorkspaceSource",
]


_MODULES: dict[str, tuple[str, ...]] = {
    "harness.approvals.gate": ("ApprovalGate",),
    "harness.approvals.pending": (
        "APPROVAL_KIND",
        "REJECTED",
        "ApprovalDecision",
        "ApprovalStatus",
        "PendingApproval",
        "decision_key",
        "input_sha256",
    ),
    "harness.approvals.policy": (
        "Decision",
        "Policy",
        "PolicyError",
        "Verdict",
        "default_policy",
        "request_decision",
        "with_org_policy",
    ),
    "harness.approvals.reach": (
        "EgressReach",
        "NoNetwork",
        "OpenNetwork",
        "Reach",
    ),
    "harness.cost.caps": (
        "Spent",
        "day_start",
    ),
    "harness.cost.metered": (
        "MeteredModel",
        "token_usage",
    ),
    "harness.cost.pricing": (
        "Cost",
        "Price",
        "PriceTable",
        "default_prices",
        "nanousd",
        "parse_prices",
        "usd",
    ),
    "harness.errors": (
        "CostLimitReached",
        "HarnessError",
        "InvalidMessage",
        "LimitReached",
        "ModelContextOverflow",
        "ModelError",
        "ModelRejected",
        "ModelStalled",
        "ModelUnavailable",
        "OrgDayCostLimitReached",
        "SessionCostLimitReached",
        "StepLimitReached",
        "TokenLimitReached",
        "ToolTimeLimitReached",
        "WorkspaceCannotStart",
        "WorkspaceError",
        "WorkspaceFileNotFound",
        "WorkspaceIsADirectory",
        "WorkspaceRefused",
        "WorkspaceUnavailable",
    ),
    "harness.guard.check": (
        "Allow",
        "Deny",
        "GuardDecision",
        "check_bash",
    ),
    "harness.loop.checkpoint": (
        "AgentRecord",
        "Checkpoint",
        "Inbound",
        "ParentLink",
        "ReadRecord",
        "Requester",
        "ScheduledWakeup",
        "TaskRecord",
        "Todo",
        "TodoStatus",
        "holds_messages",
        "in_flight_tool",
    ),
    "harness.loop.events": (
        "Answered",
        "ApprovalDecided",
        "ApprovalRequested",
        "Event",
        "InputGiven",
        "ModelResponded",
        "Notice",
        "NoticeTopic",
        "TodosChanged",
        "ToolBlocked",
        "ToolFinished",
        "ToolIntent",
        "ToolUnknown",
        "shown_events",
    ),
    "harness.loop.limits": ("Limits",),
    "harness.loop.notices": ("change_notices",),
    "harness.loop.services": (
        "Service",
        "services_section",
    ),
    "harness.loop.step": (
        "Collaborators",
        "Next",
        "StepKind",
        "StepResult",
        "advance",
        "after_stop",
        "answer_key",
        "answer_posted",
        "approval_posted",
        "held",
        "holds_long_work",
        "next_kind",
        "resumes",
        "waits_mid_turn",
    ),
    "harness.loop.wakeups": (
        "WAKE_KIND",
        "next_wake",
    ),
    "harness.mcp.config": (
        "HttpServer",
        "McpConfigError",
        "ServerConfig",
        "StdioServer",
        "parse_config",
    ),
    "harness.mcp.errors": (
        "McpApprovalRequired",
        "McpError",
        "McpTimeout",
        "McpUnavailable",
    ),
    "harness.mcp.policy": (
        "Approval",
        "ServerPolicy",
    ),
    "harness.mcp.servers": (
        "McpResult",
        "McpServers",
        "McpTool",
        "ServerState",
    ),
    "harness.model.adapter": (
        "DEFAULT_BASE_URL",
        "AnthropicModel",
        "Model",
        "ModelReply",
        "RefusalDetails",
    ),
    "harness.model.catalog": (
        "DEFAULT_MAX_TOKENS",
        "DEFAULT_MODEL",
        "DEFAULT_SMALL_MODEL",
        "MODELS",
        "ModelSpec",
        "current_models",
        "lifecycle",
    ),
    "harness.model.messages": (
        "ContentBlock",
        "Message",
        "RedactedThinkingBlock",
        "TextBlock",
        "ThinkingBlock",
        "ToolResultBlock",
        "ToolUseBlock",
        "Usage",
        "from_wire",
        "to_wire",
    ),
    "harness.model.request": (
        "ToolSpec",
        "build_request",
    ),
    "harness.model.spliced": ("MessagesMemo",),
    "harness.model.transcript": ("StoredMessages", "Transcript", "appended"),
    "harness.recall.related": ("Recall",),
    "harness.recall.summary": ("parse_summary",),
    "harness.record.incident": (
        "TIMELINE_PATH",
        "IncidentRecord",
    ),
    "harness.record.kinds": (
        "Actor",
        "ActorKind",
        "EntryKind",
    ),
    "harness.record.links": ("permalink",),
    "harness.record.postmortem": (
        "NO_EVIDENCE",
        "POSTMORTEM_PATH",
        "Citations",
        "citations",
        "is_postmortem_request",
        "postmortem_request",
        "request_for_model",
    ),
    "harness.record.render": (
        "timeline_json",
        "timeline_markdown",
    ),
    "harness.record.timeline": (
        "Entry",
        "Timeline",
        "build_timeline",
    ),
    "harness.sandbox.session": (
        "EgressBinder",
        "SandboxWorkspaces",
        "SessionWorkspace",
    ),
    "harness.sandbox.workspace": (
        "CommandResult",
        "NewSandbox",
        "StepWorkspace",
        "Workspace",
        "WorkspaceSource",
    ),
    "harness.tools.agent": (
        "AGENT_RESULT_KIND",
        "AgentSpawner",
        "agent_notification",
        "agent_result_text",
    ),
    "harness.tools.background": (
        "NOTIFICATION_KIND",
        "end_session_tasks",
        "event_lines",
        "monitor_event",
        "notified_task_id",
        "task_notification",
    ),
    "harness.tools.contract": (
        "Tool",
        "ToolContext",
        "ToolOutcome",
    ),
    "harness.tools.toolbox": (
        "TOOLS",
        "canonical_name",
        "run_tool",
        "summarize_call",
        "tool_specs",
    ),
    "harness.vfs": (
        "Mount",
        "PathError",
        "Resolved",
        "resolve",
    ),
}
"""Where each name of the door lives: module -> names."""
_RENAMED: dict[str, tuple[str, str]] = {
    "APPROVAL_TIMEOUT_S": ("harness.approvals.gate", "DEFAULT_TIMEOUT_S"),
}
"""Names the door gives another name than their module: name -> (module, name there)."""
_WHERE = {
    **{name: (module, name) for module, names in _MODULES.items() for name in names},
    **_RENAMED,
}


def __getattr__(name: str) -> Any:
    """A name of the door, imported from its module on first use (then kept here)."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = where
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
