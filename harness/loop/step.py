"""One step of the agent loop over a checkpoint (docs/architecture.md §3).

``advance`` performs exactly one unit of work — a model call, or one tool call —
and returns the new checkpoint and the events to append. It never loops, never
sleeps, and keeps no state outside the checkpoint, so the durable layer can run
each step in a different worker process.
"""

from __future__ import annotations

import functools
import json
import logging
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
from harness.loop.checkpoint import Checkpoint, Inbound, ScheduledWakeup, TaskRecord
from harness.loop.cited import checked
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
from harness.recall.related import Recall
from harness.recall.summary import SUMMARY_PATH
from harness.record.incident import IncidentRecord
from harness.sandbox.workspace import StepWorkspace, WorkspaceSource
from harness.tools.agent import AGENT_RESULT_KIND, AgentSpawner, parse_agent_result
from harness.tools.background import NOTIFICATION_KIND, notified_status, notified_task_id
from harness.tools.contract import tool_error
from harness.tools.toolbox import (
    ToolContext,
    call_detail,
    reruns_safely,
    run_tool,
    summarize_call,
)
from memory_store import BackgroundTasks, CronJobs, FileStore, StoreError

Save = Callable[[Checkpoint, Sequence[Event]], Awaitable[None]]

_log = logging.getLogger(__name__)
WAKE_SLACK_S = 5.0
"""A wake input up to this early still counts as the pending wake-up firing (clocks)."""
MISSED_WAKEUP_S = 60.0
"""A wake-up this far past its time that did not fire was cancelled by ``stop``."""


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
    if cp.awaited_calls() & {b.id for b in cp.unanswered_calls()}:
        return StepKind.WAIT  # subagents' answers are due first (the API needs every result)
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
    approval policy every tool call passes (None: every call runs, docs/architecture.md §13);
    ``announce`` is
    told of a tool call starting whose intent is not saved mid-step (one that is simply
    run again after a crash: ``reruns_safely``), so a live display can show it; ``tasks``
    holds the background tasks' rows (None: background commands are refused); ``agents``
    starts subagents (None: ``Agent`` is refused); ``cron`` holds the cron jobs' rows (None:
    the Cron tools are refused); ``small_model`` reads WebFetch's pages (None: WebFetch is
    refused); ``recall`` is the org's past incidents: related ones in the first message,
    ``/incidents``, and this incident's summary at each answer (None: none of these)."""

    store: FileStore
    model: Model
    workspaces: WorkspaceSource
    save: Save
    limits: Limits = field(default_factory=Limits)
    mcp: McpServers | None = None
    spent: Spent | None = None
    record: IncidentRecord | None = None
    tasks: BackgroundTasks | None = None
    agents: AgentSpawner | None = None
    cron: CronJobs | None = None
    announce: Callable[[Sequence[Event]], None] = field(default=lambda events: None)
    approvals: ApprovalGate | None = None
    small_model: Model | None = None
    recall: Recall | None = None


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
    cp, inbox = _agent_results(cp, inbox)
    inbox = tuple(item for item in inbox if not _stale_decision(cp, item))
    kind = next_kind(cp, inbox)
    if kind is StepKind.POST:
        raise ValueError("the answer is not posted yet: post it, then advance answer_posted(cp)")
    if kind is StepKind.ASK:
        raise ValueError("the approval is not posted yet: post it, then approval_posted(cp, ts)")
    if kind is StepKind.WAIT:
        return StepResult(_with_inbox(cp, inbox), (), Next.WAIT)
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
    """``cp`` holding ``inbox`` for the next model step; a background task a notification
    reports ended is recorded so."""
    if not inbox:
        return cp
    for item in inbox:
        task_id = notified_task_id(item.text) if item.kind == NOTIFICATION_KIND else None
        known = next((t for t in cp.tasks if t.task_id == task_id), None)
        status = notified_status(item.text)
        if known is not None and status is not None:  # None: a monitor's event
            cp = cp.with_task(replace(known, status=status))
        child = next((a for a in cp.agents if a.session_id == task_id and a.running), None)
        if child is not None and status is not None:  # a background subagent ended
            cp = replace(
                cp, agents=tuple(replace(a, status=status) if a is child else a for a in cp.agents)
            )
    if cp.wakeup is not None and _wakeup_spent(cp, cp.wakeup, inbox):
        cp = replace(cp, wakeup=None)
    return replace(cp, pending_input=cp.pending_input + tuple(inbox))


def _agent_results(
    cp: Checkpoint, inbox: Sequence[Inbound]
) -> tuple[Checkpoint, tuple[Inbound, ...]]:
    """Subagents' answers in ``inbox`` (kind ``agent``) made their calls' ``tool_result``s,
    in call order; the rest of the inbox. An answer for a call that already has a result
    (a repeat, or a call a limit answered) is dropped."""
    rest: list[Inbound] = []
    for item in inbox:
        parsed = parse_agent_result(item.text) if item.kind == AGENT_RESULT_KIND else None
        if item.kind != AGENT_RESULT_KIND:
            rest.append(item)
            continue
        if parsed is None:
            continue
        tool_use_id, answer, failed = parsed
        known = next((a for a in cp.agents if a.tool_use_id == tool_use_id), None)
        if known is None or not known.running:
            continue
        status = "failed" if failed else "completed"
        agents = tuple(replace(a, status=status) if a is known else a for a in cp.agents)
        cp = replace(cp, agents=agents)
        if tool_use_id in {b.id for b in cp.unanswered_calls()}:
            block = ToolResultBlock(tool_use_id, answer or "(the subagent said nothing)", failed)
            cp = replace(cp, pending_results=(*cp.pending_results, block))
    order = {b.id: n for n, b in enumerate(_last_calls(cp))}
    results = sorted(cp.pending_results, key=lambda r: order.get(r.tool_use_id, len(order)))
    return replace(cp, pending_results=tuple(results)), tuple(rest)


def _last_calls(cp: Checkpoint) -> tuple[ToolUseBlock, ...]:
    if not cp.messages or cp.messages[-1].role != "assistant":
        return ()
    return tuple(b for b in cp.messages[-1].content if isinstance(b, ToolUseBlock))


def _wakeup_spent(cp: Checkpoint, wakeup: ScheduledWakeup, inbox: Sequence[Inbound]) -> bool:
    """Whether the inbox ends the pending wake-up: it fired (an input of kind ``wake``
    at or after its time), or the session waited past its time without it firing (the
    session was stopped meanwhile, and a stopped session's wake-up is cancelled)."""
    now = time.time()
    fired = any(i.kind == WAKE_KIND for i in inbox) and wakeup.due_at <= now + WAKE_SLACK_S
    missed = _turn_ended(cp) and wakeup.due_at < now - MISSED_WAKEUP_S
    return fired or missed


def held(cp: Checkpoint, inbox: Sequence[Inbound]) -> Checkpoint:
    """``cp`` holding ``inbox`` for its next model step, as a tool step holds what arrives
    while it runs: subagents' answers become their calls' results, stale approval
    decisions are dropped, the rest waits as pending input. For a step that ends without
    running (its worker could not set it up), so committing it loses no input.

    >>> from harness.loop.checkpoint import Requester
    >>> cp = held(Checkpoint("s1", "T1", "C1", Requester("U1")), [Inbound("U1", "hi")])
    >>> [i.text for i in cp.pending_input]
    ['hi']
    """
    cp, rest = _agent_results(cp, inbox)
    return _with_inbox(cp, tuple(item for item in rest if not _stale_decision(cp, item)))


def _taking(result: StepResult, inbox: Sequence[Inbound]) -> StepResult:
    """A tool step's result holding the inbox for the next model step."""
    return replace(result, checkpoint=_with_inbox(result.checkpoint, inbox))


def _turn_ended(cp: Checkpoint) -> bool:
    return bool(cp.messages) and cp.messages[-1].role == "assistant"


STOPPED_SUBAGENT = "The subagent was stopped (someone wrote stop in the thread) before it answered."


def after_stop(cp: Checkpoint) -> Checkpoint:
    """``cp`` of a session that ``stop`` cancelled since its last step, now revived by a
    reply: the stop ended its background processes, subagents and pending wake-up, so
    they are recorded as ended, and each ``Agent`` call still waiting gets a result saying
    its subagent was stopped (else the session would wait for it for ever).

    >>> from harness.loop.checkpoint import Requester, ScheduledWakeup
    >>> cp = Checkpoint("s1", "T1", "C1", Requester("U1"), wakeup=ScheduledWakeup(1.0, "", "p"))
    >>> after_stop(cp).wakeup is None
    True
    """
    waiting = {b.id for b in cp.unanswered_calls()} & cp.awaited_calls()
    stopped = tuple(
        ToolResultBlock(b.id, STOPPED_SUBAGENT, is_error=True)
        for b in cp.unanswered_calls()
        if b.id in waiting
    )
    return replace(
        cp,
        wakeup=None,
        tasks=tuple(replace(t, status="killed") if t.running else t for t in cp.tasks),
        agents=tuple(replace(a, status="stopped") if a.running else a for a in cp.agents),
        pending_results=(*cp.pending_results, *stopped),
    )


def holds_long_work(cp: Checkpoint) -> bool:
    """Whether ``cp`` has work a ``stop`` ends: a running background process or
    subagent, or a pending wake-up."""
    running = any(t.running for t in cp.tasks) or any(a.running for a in cp.agents)
    return running or cp.wakeup is not None


def resumes(cp: Checkpoint, inbox: Sequence[Inbound] = ()) -> bool:
    """Whether the step ``advance(cp, …, inbox)`` takes picks the session up from a wait and
    works (asks the model or runs a tool): the session has not started yet, or its turn
    had ended (a reply, a fired wake-up, a background command's notice), or it waited for
    an approval that ``inbox`` settles (a decision, the expiry), or for subagents that
    have all answered. A step that only holds what arrived (a reply while an approval or a
    subagent is pending) does not resume it (pure).

    >>> from harness.loop.checkpoint import Requester
    >>> new = Checkpoint("s1", "T1", "C1", Requester("U1"))
    >>> resumes(new, [Inbound("U1", "pods are down")]), resumes(new)
    (True, False)
    """
    ready, rest = _agent_results(cp, inbox)
    rest = tuple(item for item in rest if not _stale_decision(ready, item))
    if next_kind(ready, rest) not in (StepKind.MODEL, StepKind.TOOL, StepKind.RECOVER):
        return False
    if not cp.messages or waits_mid_turn(cp):
        return True
    if cp.approval is not None and cp.approval.pending:
        return any(_settles(item) for item in rest)
    return _turn_ended(cp) and not cp.pending_results and not cp.unanswered_calls()


def process_label(cp: Checkpoint, process: str) -> str:
    """What a sandbox process of ``cp``'s session ran, for people: a Bash call's command,
    a background task's description, another call's summary; "a command" when unknown.
    A process is named by its ``tool_use`` id, maybe with a suffix (``<id>.so-far``).

    >>> from harness.loop.checkpoint import Requester
    >>> process_label(Checkpoint("s1", "T1", "C1", Requester("U1")), "toolu_1")
    'a command'
    """
    call_id = process.split(".", 1)[0]
    task = next((t for t in cp.tasks if t.tool_use_id == call_id and t.description), None)
    if task is not None:
        return task.description
    for message in reversed(cp.messages):
        for block in message.content if message.role == "assistant" else ():
            if isinstance(block, ToolUseBlock) and block.id == call_id:
                command = block.input.get("command") if block.name == "Bash" else None
                if isinstance(command, str) and command.strip():
                    line = " ".join(command.split())
                    return f"`{line if len(line) <= 80 else line[:79] + '…'}`"
                return summarize_call(block.name, block.input)
    return "a command"


def _settles(item: Inbound) -> bool:
    """Whether ``item`` settles a pending approval: a decision, or its expiry."""
    return item.kind == APPROVAL_KIND or (
        item.kind == WAKE_KIND and expired_call(item.text) is not None
    )


def waits_mid_turn(cp: Checkpoint) -> bool:
    """Whether ``cp``, committed by a model or tool step, leaves the session waiting with
    neither an answer to post nor an approval request: it waits for its subagents'
    answers (the durable layer shows the session parked from that step)."""
    pending = cp.approval is not None and cp.approval.pending
    return cp.answer is None and not pending and next_kind(cp) is StepKind.WAIT


def answer_posted(cp: Checkpoint) -> Checkpoint:
    """The checkpoint after the durable layer posted ``cp.answer`` (the ``POST`` step)."""
    return replace(cp, answer=None, best_effort=False, answers=cp.answers + 1)


def answer_key(session_id: str, cp: Checkpoint) -> str:
    """The idempotency key of posting ``cp.answer``: ``<session>:answer:<messages>``, the
    same for every retry of the post and new for each answer. An answer the model wrote
    adds a message; one that ends a turn without it (a refused request, a spending cap,
    a refusal, an overflow: ``best_effort``) may not, so its key also counts the answers
    posted before it (``.N``): the same key twice would take the second answer for the
    first, already posted, and post nothing.

    >>> from harness.loop.checkpoint import Requester
    >>> cp = Checkpoint("s1", "T1", "C1", Requester("U1"))
    >>> answer_key("s1", cp), answer_key("s1", replace(cp, best_effort=True, answers=2))
    ('s1:answer:0', 's1:answer:0.2')
    """
    key = f"{session_id}:answer:{len(cp.messages)}"
    return f"{key}.{cp.answers}" if cp.best_effort else key


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
    decision = await gate.decide(call.name, call.input, mcp_approval=mcp_approval, org_id=cp.org_id)
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
    detail = call_detail(call.name, call.input)
    intent = ToolIntent(tool_use_id=call.id, name=call.name, summary=summary, detail=detail)
    rerun = reruns_safely(call.name)
    if rerun:  # a crash now just runs it again: the intent is committed with the result
        deps.announce((intent,))
    else:  # intent before side effect (docs/architecture.md §5)
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
    events: list[Event] = [intent] if rerun else []
    events.extend(workspace.events(functools.partial(process_label, cp)))
    if outcome.todos is not None:
        cp = replace(cp, todos=outcome.todos)
        events.append(outcome.todos_event())
    if outcome.task is not None:
        cp = _with_task(cp, outcome.task)
    if outcome.wakeup is not None:
        cp = replace(cp, wakeup=outcome.wakeup)
    if outcome.cancel_wakeup:
        cp = replace(cp, wakeup=None)
    if outcome.agent is not None:
        cp = replace(cp, agents=(*cp.agents, outcome.agent))
    if outcome.cwd is not None:
        cp = replace(cp, cwd=outcome.cwd)
    if outcome.follow_up:
        cp = replace(cp, follow_ups=(*cp.follow_ups, *outcome.follow_up))
    result = ToolResultBlock(call.id, content, outcome.is_error, outcome.tool_references)
    cp = replace(
        _with_sandbox(cp, workspace),
        in_flight=None,
        pending_results=cp.pending_results if outcome.pending else (*cp.pending_results, result),
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
            elapsed_ms=round(elapsed_s * 1000),
        )
    )
    return StepResult(cp, tuple(events), Next.CONTINUE)


def _with_task(cp: Checkpoint, task: TaskRecord) -> Checkpoint:
    """``cp`` with a task a call started or stopped (a stop keeps the start's time)."""
    known = next((t for t in cp.tasks if t.task_id == task.task_id), None)
    if known is not None:
        task = replace(task, started_at=known.started_at)
    return cp.with_task(task)


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
        recall=deps.recall,
        tasks=deps.tasks,
        agents=deps.agents,
        cron=deps.cron,
        approved=approved,
        small_model=deps.small_model,
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
    ran_s = recovered.ran_s() if recovered is not None else None
    if ran_s is not None:  # the command ran before this call: its own time, not ours
        elapsed_s = ran_s
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
            elapsed_ms=round(elapsed_s * 1000),
            ended_at=_iso(recovered.ended_at) if ran_s is not None else "",
        )
        cp = replace(
            cp,
            read_state={**cp.read_state, **recovered.read_updates},
            follow_ups=(*cp.follow_ups, *recovered.follow_up),
        )
        if recovered.task is not None:
            cp = _with_task(cp, recovered.task)
        if recovered.agent is not None and not any(a.tool_use_id == call.id for a in cp.agents):
            cp = replace(cp, agents=(*cp.agents, recovered.agent))
    pending = recovered is not None and recovered.pending
    cp = replace(
        _with_sandbox(cp, workspace),
        in_flight=None,
        pending_results=cp.pending_results if pending else (*cp.pending_results, result),
        steps=cp.steps + 1,
        tool_time_s=cp.tool_time_s + elapsed_s,
    )
    named = workspace.events(functools.partial(process_label, cp))
    return StepResult(cp, (*named, event), Next.CONTINUE)


def _iso(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).isoformat()


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
    at a ``limit``, for a final answer without tools. An answer's citations are checked
    against the timeline before it is posted (``cited.checked``)."""
    offered = deps.mcp.tools(cp.channel_id) if deps.mcp is not None else ()

    async def ask(cp: Checkpoint) -> tuple[Checkpoint, list[Event]]:
        return await model_step(
            cp, deps.store, deps.model, deps.limits, limit, offered, recall=deps.recall
        )

    cp, events = await ask(cp)
    if cp.answer is not None and limit is None and deps.record is not None:
        cp, events = await checked(cp, events, deps.record, deps.store, ask)
    if cp.answer is not None and cp.parent is None and deps.recall is not None:
        cp = await summarised(cp, deps.recall, deps.store, cp.answer)
    return StepResult(cp, tuple(events), Next.CONTINUE)


async def summarised(cp: Checkpoint, recall: Recall, store: FileStore, answer: str) -> Checkpoint:
    """The turn's answer is ready: record the incident's summary (``Recall.on_answer``);
    the session knows the file's version then, so it is not told of it as another's.
    Best effort: a failure is logged, never the step's (the answer matters more)."""
    try:
        incident = await recall.on_answer(cp, store, answer)
    except StoreError:
        _log.warning("could not record the summary of %s", cp.channel_id, exc_info=True)
        return cp
    if incident is None or not incident.summary_version:
        return cp
    known = {**cp.known_files, f"/incident{SUMMARY_PATH}": incident.summary_version}
    return replace(cp, known_files=known)
