"""One step of the agent loop over a checkpoint (docs/architecture.md §3).

``advance`` performs exactly one unit of work — a model call, or one tool call —
and returns the new checkpoint and the events to append. It never loops, never
sleeps, and keeps no state outside the checkpoint, so the durable layer can run
each step in a different worker process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from harness.approvals.gate import ApprovalGate
from harness.approvals.pending import (
    APPROVAL_KIND,
    ApprovalDecision,
    ApprovalStatus,
    PendingApproval,
    expired_call,
    input_sha256,
    rejected_text,
)
from harness.approvals.policy import Verdict
from harness.cost.caps import Spent
from harness.errors import CostLimitReached, LimitReached
from harness.loop.checkpoint import Checkpoint, Inbound
from harness.loop.events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    ToolBlocked,
    ToolFinished,
    ToolIntent,
    ToolUnknown,
)
from harness.loop.limits import Limits
from harness.loop.model_step import capped, model_step
from harness.loop.prompt import reminder
from harness.loop.wakeups import WAKE_KIND
from harness.mcp.servers import McpServers
from harness.model.adapter import Model
from harness.model.messages import ToolResultBlock, ToolUseBlock
from harness.record.incident import IncidentRecord
from harness.sandbox.workspace import StepWorkspace, WorkspaceSource
from harness.tools.contract import tool_error
from harness.tools.toolbox import ToolContext, call_detail, run_tool, summarize_call
from memory_store import FileStore

Save = Callable[[Checkpoint, Sequence[Event]], Awaitable[None]]


class Next(StrEnum):
    """What the durable layer does after committing a step.

    When the model ends its turn the step returns CONTINUE with
    ``checkpoint.answer`` set: posting it is the next step, the durable layer's.
    """

    CONTINUE = "continue"  # enqueue the next step
    WAIT = "wait"  # nothing to do until someone replies


class StepKind(StrEnum):
    """The session's next unit of work (see ``next_kind``): the one state machine.

    ``POST`` and ``ASK`` are the durable layer's (only it talks to Slack): it posts
    ``cp.answer`` then commits ``answer_posted(cp)``, or posts ``cp.approval`` with its
    buttons then commits ``approval_posted(cp, ts)`` and waits. Every other kind is
    ``advance``'s.
    """

    POST = "post"  # the turn's answer is set and not yet posted
    ASK = "ask"  # an approval is requested and its thread message not yet posted (§13)
    MODEL = "model"
    TOOL = "tool"
    RECOVER = "recover"  # a tool whose intent is committed and result is not
    WAIT = "wait"


def next_kind(cp: Checkpoint, inbox: Sequence[Inbound] = ()) -> StepKind:
    """The session's next unit of work, without doing it (pure).

    The order is the protocol's: an answer is posted before anything else (a reply that
    arrived meanwhile waits for the next model step); a committed intent without a
    result is resolved before any new call; the assistant's ``tool_use`` blocks are
    answered in order before the model is asked again (the API refuses a transcript
    with an unanswered ``tool_use``); the model is asked when there is input or
    results to give it, else the session waits.
    """
    if cp.answer is not None:
        return StepKind.POST
    if cp.in_flight is not None:
        return StepKind.RECOVER
    approval = cp.approval
    if approval is not None and approval.pending:
        if not approval.message_ts:
            return StepKind.ASK
        return StepKind.TOOL if inbox else StepKind.WAIT  # a decision, or input to hold
    if cp.next_call() is not None:
        return StepKind.TOOL
    idle = not (inbox or cp.pending_input or cp.pending_results)
    if idle and (_turn_ended(cp) or not cp.messages):
        return StepKind.WAIT
    return StepKind.MODEL


@dataclass(frozen=True)
class StepResult:
    """A step's outcome: commit ``checkpoint`` and ``events``, then do ``next``."""

    checkpoint: Checkpoint
    events: tuple[Event, ...]
    next: Next


@dataclass(frozen=True)
class Collaborators:
    """What a step may touch. ``save`` commits mid-step (intent before side effect);
    ``mcp`` is the process's MCP servers, if any; ``spent`` is what the session and its
    org have spent (read when ``limits`` has a spending cap; None: caps not checked);
    ``record`` generates ``/incident/timeline.md`` (None: not served); ``approvals`` is the
    approval policy every tool call passes (None: every call runs, docs/architecture.md §13)."""

    store: FileStore
    model: Model
    workspaces: WorkspaceSource
    save: Save
    limits: Limits = field(default_factory=Limits)
    mcp: McpServers | None = None
    spent: Spent | None = None
    record: IncidentRecord | None = None
    approvals: ApprovalGate | None = None


async def advance(cp: Checkpoint, deps: Collaborators, inbox: Sequence[Inbound] = ()) -> StepResult:
    """Advance the session by one step.

    Limits are typed errors (``LimitReached``) caught here, in one place: at a limit
    the pending tool calls are answered "not run" and the model is asked for a
    best-effort answer, so a session never ends on a bare error. At a spending cap
    (``CostLimitReached``) the answer is written without asking the model (a call
    would spend past the cap); it says which cap was hit and how to continue.

    Args:
        cp: the committed checkpoint.
        deps: store, model, sandbox access and the mid-step ``save``.
        inbox: user messages that arrived since the last step; the returned
            checkpoint holds them (as pending input, or in the model's message), the
            mid-step ``save`` does not (the inbox is consumed with the commit).

    Returns:
        The new checkpoint, its events and what to do next.

    Raises:
        ModelError: the model could not be reached after retries (nothing to commit).
        memory_store.Fenced (via ``save``): another worker owns the session now.
        ValueError: ``cp.answer`` is set: posting it is the durable layer's step.
    """
    inbox = tuple(item for item in inbox if not _stale_decision(cp, item))
    kind = next_kind(cp, inbox)
    if kind is StepKind.POST:
        raise ValueError("the answer is not posted yet: post it, then advance answer_posted(cp)")
    if kind is StepKind.ASK:
        raise ValueError("the approval is not posted yet: post it, then approval_posted(cp, ts)")
    if kind is StepKind.WAIT:
        return StepResult(cp, (), Next.WAIT)
    if kind is StepKind.RECOVER:
        return _taking(await _recover(cp, deps), inbox)
    if cp.approval is not None and cp.approval.pending:
        return _settle(cp, inbox, deps)
    if kind is StepKind.MODEL and not cp.pending_results and _turn_ended(cp):
        cp = replace(cp, turn_base=(cp.steps, cp.usage.total(), cp.tool_time_s))
    try:
        deps.limits.enforce(cp, deps.spent)
    except LimitReached as limit:
        if kind is StepKind.TOOL:
            return _taking(_skip_for_limit(cp, limit), inbox)
        if isinstance(limit, CostLimitReached):
            cp, events = capped(_with_inbox(cp, inbox), limit)
            return StepResult(cp, tuple(events), Next.CONTINUE)
        return await _model_step(_with_inbox(cp, inbox), deps, limit)
    if kind is StepKind.TOOL:
        call = cp.next_call()
        assert call is not None
        return _taking(await _tool_step(cp, call, deps), inbox)
    return await _model_step(_with_inbox(cp, inbox), deps)


def _with_inbox(cp: Checkpoint, inbox: Sequence[Inbound]) -> Checkpoint:
    return replace(cp, pending_input=cp.pending_input + tuple(inbox)) if inbox else cp


def _taking(result: StepResult, inbox: Sequence[Inbound]) -> StepResult:
    """A tool step's result holding the inbox for the next model step."""
    return replace(result, checkpoint=_with_inbox(result.checkpoint, inbox))


def _turn_ended(cp: Checkpoint) -> bool:
    return bool(cp.messages) and cp.messages[-1].role == "assistant"


def answer_posted(cp: Checkpoint) -> Checkpoint:
    """The checkpoint after the durable layer posted ``cp.answer`` (the ``POST`` step)."""
    return replace(cp, answer=None, best_effort=False)


def approval_posted(cp: Checkpoint, message_ts: str) -> Checkpoint:
    """The checkpoint after the durable layer posted ``cp.approval`` as the thread message
    ``message_ts`` (the ``ASK`` step); the session then waits for a decision.

    Raises:
        ValueError: no pending approval, or an empty ``message_ts``.
    """
    if cp.approval is None or not cp.approval.pending or not message_ts:
        raise ValueError("approval_posted needs a pending approval and its message ts")
    return replace(cp, approval=replace(cp.approval, message_ts=message_ts))


def _settle(cp: Checkpoint, inbox: Sequence[Inbound], deps: Collaborators) -> StepResult:
    """Apply what arrived for the pending approval: a decision bound to its call and input
    (``approval`` inputs), or its expiry (the ``wake`` the sweeper fires at ``expires_at``).
    A decision for another call or another input (a stale button) is dropped. Approved,
    the call runs at the next step; denied, expired or stopped, it is answered with Claude
    Code's rejected-tool-use result. Anything else is held for the next model step; with
    no decision the session waits on."""
    approval = cp.approval
    assert approval is not None
    now = deps.approvals.clock() if deps.approvals is not None else _utc_now()
    held: list[Inbound] = []
    for item in inbox:
        if item.kind == APPROVAL_KIND:
            decision = ApprovalDecision.from_text(item.text)
            bound = (
                decision is not None
                and decision.tool_use_id == approval.tool_use_id
                and decision.input_sha256 == approval.input_sha256
            )
            if decision is not None and bound and approval.pending:
                status = (
                    ApprovalStatus.APPROVED
                    if decision.approve
                    else ApprovalStatus.STOPPED
                    if decision.stopped
                    else ApprovalStatus.DENIED
                )
                approval = approval.decided(status, decision.user_id, decision.at)
        elif item.kind == WAKE_KIND and expired_call(item.text) is not None:
            if expired_call(item.text) == approval.tool_use_id and approval.pending:
                approval = approval.decided(ApprovalStatus.EXPIRED, "", now)
        else:
            held.append(item)
    cp = _with_inbox(replace(cp, approval=approval), held)
    if approval.pending:
        return StepResult(cp, (), Next.WAIT)
    assert approval.decided_at is not None
    events: list[Event] = [
        ApprovalDecided(
            tool_use_id=approval.tool_use_id,
            name=approval.tool,
            action=approval.action,
            status=approval.status.value,
            decided_by=approval.decided_by,
            decided_at=approval.decided_at.isoformat(),
        )
    ]
    if approval.status is not ApprovalStatus.APPROVED:
        result = ToolResultBlock(approval.tool_use_id, rejected_text(approval), is_error=True)
        cp = replace(cp, pending_results=(*cp.pending_results, result), steps=cp.steps + 1)
    return StepResult(cp, tuple(events), Next.CONTINUE)


def _stale_decision(cp: Checkpoint, item: Inbound) -> bool:
    """A decision or an expiry that arrived when no approval waits (a click that lost the
    race with the expiry, a wake-up for a request already settled): it is dropped, never
    given to the model."""
    pending = cp.approval is not None and cp.approval.pending
    if item.kind == APPROVAL_KIND:
        return not pending
    return item.kind == WAKE_KIND and expired_call(item.text) is not None and not pending


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _approved(cp: Checkpoint, call: ToolUseBlock) -> bool:
    """Whether a human approved exactly this call: its id and the hash of its input."""
    approval = cp.approval
    return (
        approval is not None
        and approval.status is ApprovalStatus.APPROVED
        and approval.tool_use_id == call.id
        and approval.input_sha256 == input_sha256(call.name, call.input)
    )


async def _gate(cp: Checkpoint, call: ToolUseBlock, deps: Collaborators) -> StepResult | None:
    """The approval policy's say on ``call`` before it runs: None to run it now; else the
    step that blocks it (an error result, not run) or asks a human (the session parks)."""
    gate = deps.approvals
    if gate is None or _approved(cp, call):
        return None
    mcp_approval = None
    if deps.mcp is not None and call.name.startswith("mcp__"):
        offered = {t.name: t.approval for t in deps.mcp.tools(cp.channel_id)}
        mcp_approval = offered.get(call.name)
    decision = await gate.decide(call.name, call.input, mcp_approval=mcp_approval)
    if decision.verdict is Verdict.ALLOWED:
        return None
    detail = call_detail(call.name, call.input)
    if decision.verdict is Verdict.BLOCKED:
        text = (
            f"Blocked by the organisation's approval policy: {decision.reason}. It was not "
            "run, and no approval can allow it. Do not retry it or work around it; tell the "
            "user what you wanted to do and why."
        )
        result = ToolResultBlock(call.id, tool_error(text).content, is_error=True)
        cp = replace(cp, pending_results=(*cp.pending_results, result), steps=cp.steps + 1)
        blocked = ToolBlocked(call.id, call.name, detail, decision.reason)
        return StepResult(cp, (blocked,), Next.CONTINUE)
    now = gate.clock()
    approval = PendingApproval(
        tool_use_id=call.id,
        tool=call.name,
        input_sha256=input_sha256(call.name, call.input),
        action=_action(call),
        reason=decision.reason,
        requested_at=now,
        expires_at=now + timedelta(seconds=gate.timeout_s),
    )
    requested = ApprovalRequested(
        tool_use_id=call.id,
        name=call.name,
        action=approval.action,
        reason=approval.reason,
        input_sha256=approval.input_sha256,
        expires_at=approval.expires_at.isoformat(),
    )
    return StepResult(replace(cp, approval=approval), (requested,), Next.CONTINUE)


def _action(call: ToolUseBlock) -> str:
    """Exactly what would run: the Bash command, else the tool and its input as JSON."""
    command = call.input.get("command") if call.name == "Bash" else None
    if isinstance(command, str):
        return command
    return f"{call.name} {json.dumps(dict(call.input), sort_keys=True, ensure_ascii=False)}"


def _canonical(call: ToolUseBlock) -> str:
    return json.dumps(call.input, sort_keys=True, separators=(",", ":"))


async def _tool_step(cp: Checkpoint, call: ToolUseBlock, deps: Collaborators) -> StepResult:
    gated = await _gate(cp, call, deps)
    if gated is not None:
        return gated
    summary = summarize_call(call.name, call.input)
    intent = ToolIntent(tool_use_id=call.id, name=call.name, summary=summary)
    cp = replace(cp, in_flight=call.id)
    await deps.save(cp, (intent,))
    workspace = _open_workspace(cp, deps)
    ctx = _context(cp, deps, workspace, call.id, approved=_approved(cp, call))
    started_s = time.monotonic()
    outcome = await run_tool(call.name, call.input, ctx)
    elapsed_s = time.monotonic() - started_s
    content = outcome.content
    repeats = _repeats(cp, call)
    if repeats >= deps.limits.loop_repeats:
        content += "\n" + reminder(
            f"You have made this exact {call.name} call {repeats} times in a row with the same "
            "input. Its result will not change; try a different approach."
        )
    events: list[Event] = [*workspace.events()]
    if outcome.todos is not None:
        cp = replace(cp, todos=outcome.todos)
        events.append(outcome.todos_event())
    result = ToolResultBlock(call.id, content, outcome.is_error, outcome.tool_references)
    cp = replace(
        _with_sandbox(cp, workspace),
        in_flight=None,
        pending_results=(*cp.pending_results, result),
        read_state={**cp.read_state, **outcome.read_updates},
        steps=cp.steps + 1,
        tool_time_s=cp.tool_time_s + elapsed_s,
        last_call=(call.name, _canonical(call), repeats),
    )
    events.append(
        ToolFinished(
            tool_use_id=call.id,
            name=call.name,
            summary=summary,
            is_error=outcome.is_error,
            output_chars=len(content),
            output_head=content[:500],
            detail=call_detail(call.name, call.input),
        )
    )
    return StepResult(cp, tuple(events), Next.CONTINUE)


def _context(
    cp: Checkpoint,
    deps: Collaborators,
    workspace: StepWorkspace,
    tool_use_id: str,
    *,
    approved: bool = False,
) -> ToolContext:
    limits = _call_limits(cp, deps)
    return ToolContext.for_session(
        cp,
        deps.store,
        workspace,
        tool_use_id,
        limits,
        mcp=deps.mcp,
        record=deps.record,
        approved=approved,
    )


def _call_limits(cp: Checkpoint, deps: Collaborators) -> Limits:
    """The limits of one call: Bash may not run past the session's tool-time budget."""
    limits = deps.limits
    left_ms = int((limits.max_tool_time_s - (cp.tool_time_s - cp.turn_base[2])) * 1000)
    return replace(limits, bash_max_timeout_ms=max(1, min(limits.bash_max_timeout_ms, left_ms)))


def _open_workspace(cp: Checkpoint, deps: Collaborators) -> StepWorkspace:
    """The step's workspace. A sandbox it provisions or replaces is saved with ``cp``
    before anything runs in it, so a worker that dies mid-tool leaves its handle behind
    for recovery (and no jail unaccounted for)."""

    async def record() -> None:
        await deps.save(_with_sandbox(cp, workspace), ())

    workspace = deps.workspaces.open(cp, on_new_sandbox=record)
    return workspace


def _with_sandbox(cp: Checkpoint, workspace: StepWorkspace) -> Checkpoint:
    """``cp`` with the step's sandbox handle and what the model must hear about it."""
    return replace(cp, sandbox=workspace.handle_json(), notices=cp.notices + workspace.notices())


def _repeats(cp: Checkpoint, call: ToolUseBlock) -> int:
    if cp.last_call and cp.last_call[:2] == (call.name, _canonical(call)):
        return cp.last_call[2] + 1
    return 1


async def _recover(cp: Checkpoint, deps: Collaborators) -> StepResult:
    """The previous worker died between a tool's intent and its result."""
    call = cp.next_call()
    if call is None or call.id != cp.in_flight:
        return StepResult(replace(cp, in_flight=None), (), Next.CONTINUE)
    workspace = _open_workspace(cp, deps)
    ctx = _context(cp, deps, workspace, call.id, approved=_approved(cp, call))
    started_s = time.monotonic()
    recovered = await run_tool(call.name, call.input, ctx, recovering=True)
    elapsed_s = time.monotonic() - started_s
    summary = summarize_call(call.name, call.input)
    if recovered is None:
        text = (
            "The worker running this tool call stopped before its result was recorded, and "
            "the outcome could not be recovered. The command may or may not have run; check "
            "its effects before running it again."
        )
        result = ToolResultBlock(tool_use_id=call.id, content=text, is_error=True)
        detail = call_detail(call.name, call.input)
        event: Event = ToolUnknown(call.id, call.name, summary, detail)
    else:
        result = ToolResultBlock(
            call.id, recovered.content, recovered.is_error, recovered.tool_references
        )
        event = ToolFinished(
            tool_use_id=call.id,
            name=call.name,
            summary=summary,
            is_error=recovered.is_error,
            output_chars=len(recovered.content),
            output_head=recovered.content[:500],
            detail=call_detail(call.name, call.input),
        )
        cp = replace(cp, read_state={**cp.read_state, **recovered.read_updates})
    cp = replace(
        _with_sandbox(cp, workspace),
        in_flight=None,
        pending_results=(*cp.pending_results, result),
        steps=cp.steps + 1,
        tool_time_s=cp.tool_time_s + elapsed_s,
    )
    return StepResult(cp, (*workspace.events(), event), Next.CONTINUE)


def _skip_for_limit(cp: Checkpoint, limit: LimitReached) -> StepResult:
    """Answer every call still pending "not run", so no ``tool_use`` goes unanswered."""
    text = f"Not run: {limit}"
    skipped = tuple(
        ToolResultBlock(tool_use_id=b.id, content=text, is_error=True)
        for b in cp.unanswered_calls()
    )
    cp = replace(cp, pending_results=(*cp.pending_results, *skipped))
    return StepResult(cp, (), Next.CONTINUE)


async def _model_step(
    cp: Checkpoint, deps: Collaborators, limit: LimitReached | None = None
) -> StepResult:
    """Ask the model (``model_step``) with the MCP tools up for the session's channel;
    at a ``limit``, for a final answer without tools."""
    offered = deps.mcp.tools(cp.channel_id) if deps.mcp is not None else ()
    cp, events = await model_step(cp, deps.store, deps.model, deps.limits, limit, offered)
    return StepResult(cp, tuple(events), Next.CONTINUE)
