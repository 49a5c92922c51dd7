"""The tool contract: what a tool call gets (``ToolContext``), what it returns
(``ToolOutcome``), and the ``Tool`` protocol with its input validation.

A tool never raises for a mistake the model can fix: it returns
``ToolOutcome(is_error=True)`` with text in Claude Code's wording, wrapped in
``<tool_use_error>`` (docs/tools.md, "Errors and notices"). Infrastructure failures
(``memory_store.DatabaseUnavailable``, ``WorkspaceUnavailable``) do raise: the step
is retried, not reported to the model.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from harness.loop.checkpoint import (
    AgentRecord,
    Checkpoint,
    ReadRecord,
    ScheduledWakeup,
    TaskRecord,
    Todo,
)
from harness.loop.events import TodosChanged
from harness.loop.limits import Limits
from harness.model.adapter import Model, ToolSpec
from harness.model.messages import ToolResultBlock
from harness.model.transcript import referenced_tools
from harness.record.incident import IncidentRecord
from harness.sandbox.workspace import Workspace
from harness.vfs import WORKSPACE, Mount
from memory_store import BackgroundTasks, CronJobs, FileStore, Namespace, Origin, Scope

if TYPE_CHECKING:
    from harness.mcp.servers import McpServers
    from harness.recall.related import Recall
    from harness.tools.agent import AgentSpawner

AGENT_ACTOR = "agent"
_SCOPES = {Mount.MEMORY: Scope.MEMORY, Mount.SKILLS: Scope.SKILLS, Mount.INCIDENT: Scope.INCIDENT}


def namespace_for(mount: Mount, org_id: str, channel_id: str) -> Namespace:
    """The store namespace behind a virtual mount (the channel only for /incident).

    Raises:
        KeyError: ``Mount.SANDBOX`` has no namespace.
    """
    scope = _SCOPES[mount]
    return Namespace(org_id, scope, channel_id if scope is Scope.INCIDENT else "")


@dataclass(frozen=True)
class ToolContext:
    """Everything one tool call may use.

    Attributes:
        store: the org file store (virtual mounts).
        workspace: the session's sandbox (every other path, and Bash).
        org_id, channel_id, session_id: the tenant, the incident and the session.
        actor: recorded on every revision (``"agent"`` for the model's calls).
        tool_use_id: the call's id: the store's idempotency key and the sandbox
            process name.
        read_state: path as the model sees it (``/memory/x.md``, ``/workspace/a.py``) →
            what this session has seen of it (for a sandbox file, ``version`` is a
            fingerprint of the content read).
        agent_may_write_skills: org setting; by default humans edit skills and the
            agent edits memory and notes (docs/architecture.md §6).
        bash_max_timeout_ms: the highest Bash ``timeout`` accepted (Claude Code: 600000);
            also the most an MCP call may take (what is left of the tool-time budget).
        mcp: this process's MCP servers (``mcp__…`` tools), or None when none are set up.
        loaded_tools: the deferred tools whose definitions this session loaded (ToolSearch
            results in its transcript).
        record: the incident record that generates ``/incident/timeline.md`` (None: the
            file is not served).
        approved: a human approved this very call in the thread (docs/architecture.md
            §13): an MCP tool the org asks approval for may run.
        tasks: the background tasks' rows (None: background commands are refused).
        min_wakeup_s: the shortest ``ScheduleWakeup`` delay, in seconds.
        wakeup_pending: the session has a ``ScheduleWakeup`` pending (``stop`` says so).
        agents: starts subagents (None: ``Agent`` is refused, as in a subagent).
        cwd: the session's working directory in the sandbox (where the last Bash call's
            ``cd`` left it): relative paths of the file tools are taken from it.
        todos: the session's todo list (TodoWrite's, which the Task tools also edit).
        cron: the cron jobs' rows (None: the Cron tools are refused, as in a subagent).
        cron_seconds: accept 6-field expressions (seconds last; test-only,
            ``WARROOM_CRON_SECONDS``).
        small_model: the small, fast model WebFetch reads pages with, its calls on the
            model-call ledger like the session's own (None: WebFetch is refused).
        recall: the org's past incidents: serves ``/incidents`` and indexes
            ``/incident/summary.md`` when it is written (None: neither).
    """

    store: FileStore
    workspace: Workspace
    org_id: str
    channel_id: str
    session_id: str
    actor: str
    tool_use_id: str
    read_state: Mapping[str, ReadRecord] = field(default_factory=dict)
    agent_may_write_skills: bool = False
    bash_max_timeout_ms: int = 600_000
    mcp: McpServers | None = None
    loaded_tools: frozenset[str] = frozenset()
    record: IncidentRecord | None = None
    approved: bool = False
    tasks: BackgroundTasks | None = None
    min_wakeup_s: float = 60.0
    wakeup_pending: bool = False
    agents: AgentSpawner | None = None
    cwd: str = WORKSPACE
    todos: tuple[Todo, ...] = ()
    cron: CronJobs | None = None
    cron_seconds: bool = False
    small_model: Model | None = None
    recall: Recall | None = None

    @classmethod
    def for_session(
        cls,
        cp: Checkpoint,
        store: FileStore,
        workspace: Workspace,
        tool_use_id: str,
        limits: Limits | None = None,
        *,
        mcp: McpServers | None = None,
        record: IncidentRecord | None = None,
        approved: bool = False,
        tasks: BackgroundTasks | None = None,
        agents: AgentSpawner | None = None,
        cron: CronJobs | None = None,
        small_model: Model | None = None,
        recall: Recall | None = None,
    ) -> ToolContext:
        """The context of one call made by the model in the session ``cp`` (``limits``
        give the Bash timeout maximum and whether the agent may write /skills)."""
        limits = limits or Limits()
        return cls(
            store=store,
            workspace=workspace,
            org_id=cp.org_id,
            channel_id=cp.channel_id,
            session_id=cp.session_id,
            actor=AGENT_ACTOR,
            tool_use_id=tool_use_id,
            read_state=cp.read_state,
            agent_may_write_skills=limits.agent_may_write_skills,
            bash_max_timeout_ms=limits.bash_max_timeout_ms,
            mcp=mcp,
            loaded_tools=loaded_tools(cp),
            record=record,
            approved=approved,
            tasks=tasks,
            min_wakeup_s=limits.min_wakeup_s,
            wakeup_pending=cp.wakeup is not None,
            agents=agents if cp.parent is None else None,
            cwd=cp.cwd,
            todos=cp.todos,
            cron=cron if cp.parent is None else None,
            cron_seconds=limits.cron_seconds,
            small_model=small_model,
            recall=recall,
        )

    def namespace(self, mount: Mount) -> Namespace:
        """The store namespace behind a virtual mount. Raises KeyError for SANDBOX."""
        return namespace_for(mount, self.org_id, self.channel_id)

    def absolute(self, path: str) -> str:
        """``path`` taken from the working directory when relative (``absolute_path``)."""
        return absolute_path(path, self.cwd)

    def origin(self) -> Origin:
        """Who makes a change through this call (recorded on the revision)."""
        return Origin(self.actor, self.session_id, self.tool_use_id)


def absolute_path(path: str, cwd: str) -> str:
    """``path`` taken from ``cwd`` when it is relative (Claude Code's rule); an absolute
    or empty path unchanged.

    >>> absolute_path("a.txt", "/workspace/sub"), absolute_path("/memory/x", "/workspace")
    ('/workspace/sub/a.txt', '/memory/x')
    """
    return path if path.startswith("/") or not path else posixpath.join(cwd, path)


def loaded_tools(cp: Checkpoint) -> frozenset[str]:
    """The deferred tools the transcript of ``cp`` loaded (``tool_reference``s in results).

    Each message's references are computed once (``Message.referenced_tools``), and of
    a transcript read from the store only the messages holding a reference are decoded
    (``transcript.referenced_tools``), so a long session's tool call does not walk its
    history."""
    pending = (
        name
        for block in cp.pending_results
        if isinstance(block, ToolResultBlock)
        for name in block.tool_references
    )
    return frozenset(pending) | referenced_tools(cp.messages)


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call produced.

    Attributes:
        content: the ``tool_result`` text the model reads.
        is_error: sent as the ``tool_result``'s ``is_error``.
        read_updates: merged into the checkpoint's ``read_state``.
        todos: TodoWrite's new list (replaces the old one), or None.
        tool_references: deferred tools the result loads (ToolSearch).
        task: a background task the call started or stopped (recorded in the
            checkpoint), or None.
        wakeup: a wake-up the call scheduled (replaces the checkpoint's), or None.
        agent: a subagent the call started, or None.
        pending: the call has no result yet (a subagent's answer will be its result).
        cwd: the working directory the call left (Bash's ``cd``), or None: unchanged.
        cancel_wakeup: the call cancelled the pending wake-up (ScheduleWakeup ``stop``).
        follow_up: text blocks the model gets after the call's result, in the same user
            message (Claude Code sends a loaded skill's body so, apart from the result).
        started_at, ended_at: when the command the call ran started and ended, as its
            sandbox recorded them (aware UTC), or None: a call's time is then its own. A
            call that found the outcome of a command an earlier call started (recovery
            after a crash) is timed by these, not by itself.
    """

    content: str
    is_error: bool = False
    read_updates: Mapping[str, ReadRecord] = field(default_factory=dict)
    todos: tuple[Todo, ...] | None = None
    tool_references: tuple[str, ...] = ()
    task: TaskRecord | None = None
    wakeup: ScheduledWakeup | None = None
    agent: AgentRecord | None = None
    pending: bool = False
    cwd: str | None = None
    cancel_wakeup: bool = False
    follow_up: tuple[str, ...] = ()
    started_at: datetime | None = None
    ended_at: datetime | None = None

    def ran_s(self) -> float | None:
        """How long the command ran, from its sandbox's record (None: not recorded)."""
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0.0, (self.ended_at - self.started_at).total_seconds())

    def todos_event(self) -> TodosChanged:
        """The progress event for a changed todo list (empty when ``todos`` is None)."""
        items = self.todos or ()
        return TodosChanged(todos=tuple((t.status.value, t.content, t.active_form) for t in items))


def tool_error(text: str) -> ToolOutcome:
    """An error result in Claude Code's shape: ``<tool_use_error>text</tool_use_error>``."""
    return ToolOutcome(f"<tool_use_error>{text}</tool_use_error>", is_error=True)


def schema_error(issue: Mapping[str, object]) -> ToolOutcome:
    """An input error in the shape Claude Code gives for its deferred tools (Monitor,
    WebFetch): ``InputValidationError:`` then the schema validator's issue list as JSON
    indented by two, wrapped as a tool error (captured from 2.1.336)."""
    return tool_error("InputValidationError: " + json.dumps([dict(issue)], indent=2))


class Tool(Protocol):
    """One model-facing tool.

    ``run`` validates the raw input and never raises for model mistakes.
    ``recover`` runs after a worker died between the call's intent and its result:
    it returns the call's outcome when it can be known or safely redone, else None
    (the model is then told the call may or may not have run).
    """

    @property
    def name(self) -> str: ...

    def spec(self) -> ToolSpec: ...

    async def run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome: ...

    async def recover(
        self, tool_input: Mapping[str, Any], ctx: ToolContext
    ) -> ToolOutcome | None: ...


P = TypeVar("P", bound=BaseModel)
Runner = Callable[[P, ToolContext], Awaitable[ToolOutcome]]
Recoverer = Callable[[P, ToolContext], Awaitable[ToolOutcome | None]]


@dataclass(frozen=True)
class ModelTool(Generic[P]):
    """A ``Tool`` made of a pydantic input model and an async function.

    ``recoverer`` None means the call is safe to run again (read-only, or idempotent
    by ``tool_use_id``).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    params: type[P]
    runner: Runner[P]
    recoverer: Recoverer[P] | None = None

    def spec(self) -> ToolSpec:
        """The definition sent to the model."""
        return ToolSpec(self.name, self.description, self.input_schema)

    async def run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Validate ``tool_input`` and run; a validation failure is an error outcome."""
        try:
            params = self.params.model_validate(tool_input)
        except ValidationError as exc:
            return tool_error(validation_message(self.name, exc))
        return await self.runner(params, ctx)

    async def recover(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome | None:
        """Redo or look up the call after a crash (see ``Tool``)."""
        if self.recoverer is None:
            return await self.run(tool_input, ctx)
        try:
            params = self.params.model_validate(tool_input)
        except ValidationError as exc:
            return tool_error(validation_message(self.name, exc))
        return await self.recoverer(params, ctx)


def validation_message(tool_name: str, exc: ValidationError) -> str:
    """Claude Code's ``InputValidationError`` text for a pydantic failure.

    >>> from pydantic import BaseModel
    >>> class In(BaseModel):
    ...     file_path: str
    >>> try:
    ...     In.model_validate({})
    ... except ValidationError as e:
    ...     print(validation_message("Read", e))
    InputValidationError: Read failed due to the following issue:
    The required parameter `file_path` is missing
    """
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "missing")  # missing first
    issues = [_issue(error) for error in errors]
    noun = "issue" if len(issues) == 1 else "issues"
    return f"InputValidationError: {tool_name} failed due to the following {noun}:\n" + "\n".join(
        issues
    )


_EXPECTED = {
    "int": "number",
    "float": "number",
    "string": "string",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
    "model": "object",
}


def _issue(error: ErrorDetails) -> str:
    name = _location(error["loc"])
    kind = error["type"]
    if kind == "missing":
        return f"The required parameter `{name}` is missing"
    if kind == "extra_forbidden":
        return f"An unexpected parameter `{name}` was provided"
    expected = _EXPECTED.get(kind.split("_", 1)[0])
    if expected is not None and kind.endswith(("_type", "_parsing")):
        if not name:
            return f"The input is expected as `{expected}` but provided as `{_json_type(error)}`"
        return (
            f"The parameter `{name}` type is expected as `{expected}` "
            f"but provided as `{_json_type(error)}`"
        )
    if kind == "literal_error":
        return f"The parameter `{name}` is invalid: {_invalid_option(error)}"
    return f"The parameter `{name}` is invalid: {error['msg']}"


def _invalid_option(error: ErrorDetails) -> str:
    """Claude Code's sentence for a value outside an enum.

    >>> _invalid_option({"ctx": {"expected": "'a', 'b' or 'c'"}})
    'Invalid option: expected one of "a"|"b"|"c"'
    """
    expected = str((error.get("ctx") or {}).get("expected", ""))
    options = re.findall(r"'((?:[^'\\]|\\.)*)'", expected)
    return "Invalid option: expected one of " + "|".join(f'"{o}"' for o in options)


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _json_type(error: ErrorDetails) -> str:
    value = error.get("input")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"
