"""The durable step driver: claim → one harness step (or one Slack post) → commit → enqueue.

This is the body of the ``advance`` actor, as a plain class tests can call
directly. Postgres (through ``SessionStore``) is the source of truth; a queue
message only names a pending token (docs/architecture.md §5):

- a duplicate or stale message claims nothing and is dropped;
- the lease is renewed while the step runs; when a renewal finds the claim fenced
  (the session was stopped, or another worker took it over) the step is cancelled,
  since nothing it did could be committed any more;
- a step that raises gives its lease up at once, so a retry can claim it without
  waiting for the lease to run out (the re-claim counts as another attempt);
- before a ``Bash`` call's intent is committed the session has a sandbox, so a
  worker that dies mid-command leaves the handle behind and the next worker can ask
  that sandbox for the command's real outcome;
- a tool's intent is committed before the tool runs (the harness calls ``save``);
- the answer is posted in its own step, idempotently (outbox + message metadata),
  and the session then waits holding nothing: its sandbox is suspended;
- the thread shows a session parked (Slack's agent session ``suspended``: after an answer
  when it waits for a wake-up or background work, or mid-turn for its subagents) from the
  step that parks it, before its commit (``ParkingPoster``, once per step token), so no
  crash leaves it shown as working;
- a step that picks the session up from a wait (``harness.resumes``, or a reply after a
  stop) shows it working before its model call or tool (``ResumingPoster``, once per step
  token), so a turn that answers at once shows it too;
- the next message is enqueued only after the commit, and before the thread's
  progress is shown (a Slack call the next step need not wait for);
- for ``carry_on_s`` from a message's first step, a step that continues is followed by
  the next in this worker: the commit claims it (``SessionStore.commit_then_claim``), so
  there is no queue round trip between steps; its lease is an ordinary lease, so a
  worker that dies there is recovered by the sweeper as any other. Whether to carry on
  is decided at the commit (``carry_on``): a worker told to stop during a step hands the
  next one to the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from bot.durable.agents import ChildSessions, answer_parent
from bot.durable.carry_on import NEVER, CarryOn
from bot.durable.crash_points import Crasher, CrashHooks, CrashPoint, no_crash
from bot.durable.lease import StepLease
from bot.durable.setup_notice import failure_key, setup_failed_event, step_failed_event, told
from bot.durable.shared_transcripts import SharedCopy, SharedTranscripts
from bot.durable.transcripts import StoredTranscript, TranscriptCache
from bot.errors import SlackRefused
from bot.logs import log_context
from bot.metrics import StepOutcome, StepReport, default_metrics
from bot.slack.spend import spend_text
from harness import (
    AgentSpawner,
    ApprovalDecided,
    ApprovalGate,
    Checkpoint,
    Collaborators,
    Event,
    Inbound,
    IncidentRecord,
    Limits,
    McpServers,
    MeteredModel,
    Next,
    PendingApproval,
    Recall,
    Spent,
    StepKind,
    WorkspaceCannotStart,
    WorkspaceSource,
    advance,
    after_stop,
    answer_key,
    answer_posted,
    approval_posted,
    canonical_name,
    day_start,
    end_session_tasks,
    held,
    holds_long_work,
    next_kind,
    next_wake,
    resumes,
    waits_mid_turn,
)
from harness import Model as ModelProtocol
from memory_store import (
    BackgroundTasks,
    Claim,
    Continue,
    CronJobs,
    DatabaseUnavailable,
    Fenced,
    FileStore,
    Finish,
    ModelCallLog,
    NewEvent,
    SessionOrigin,
    SessionStatus,
    SessionStore,
    TokenUsage,
    Wait,
    utc_now,
)

log = logging.getLogger(__name__)

Enqueue = Callable[[str, str], Awaitable[None]]


class ThreadPoster(Protocol):
    """What the driver needs from the Slack side. Both calls are idempotent."""

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        """Post the answer once per ``key`` (retries find the earlier post); returns its ts."""
        ...

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        """Update the thread's status message from a committed step (best effort)."""
        ...


@runtime_checkable
class LiveReporter(Protocol):
    """A poster that also shows a step while it runs (the terminal of ``warroom chat``).

    Both calls are made on the worker's event loop and must not block for long.
    """

    def step_started(self, *, session_id: str, kind: str) -> None:
        """A ``model`` or ``tool`` step of the session begins."""
        ...

    def events_saved(self, *, session_id: str, events: Sequence[Event]) -> None:
        """A tool call starts now: its intent event (saved mid-step, or, for a call that is
        simply run again after a crash, committed later with its result)."""
        ...


@runtime_checkable
class ApprovalPoster(Protocol):
    """A poster that can ask for approval in the thread (docs/architecture.md §13)."""

    async def ask_approval(
        self,
        *,
        key: str,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        approval: PendingApproval,
        requester_id: str,
    ) -> str:
        """Post the approval message once per ``key`` (retries find it); returns its ts."""
        ...

    async def show_decision(
        self, *, session_id: str, channel_id: str, approval: PendingApproval, requester_id: str
    ) -> None:
        """Update the approval message with the decision (best effort)."""
        ...


@runtime_checkable
class ParkingPoster(Protocol):
    """A poster whose thread shows the session's state (Slack's agent session: listening
    ``active``, or parked ``suspended``) from the durable step that changes it, before its
    commit: a worker that dies after the commit leaves no session shown as still working
    (issue #28)."""

    async def post_answer(
        self,
        *,
        key: str,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        markdown: str,
        checkpoint: Checkpoint | None = None,
    ) -> str:
        """``ThreadPoster.post_answer``; ``checkpoint`` (the session's, the answer not yet
        posted) says what the session then waits for: a reply only (it listens), or also a
        wake-up or background work (``harness.holds_long_work``: it is parked)."""
        ...

    async def show_parked(
        self,
        *,
        key: str,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        """The step ``key`` parks the session mid-turn (``harness.waits_mid_turn``): show
        it parked with the step's ``events``, once per ``key`` (a retried step has the
        same key). Slack failures are logged; raises DatabaseUnavailable."""
        ...


@runtime_checkable
class ResumingPoster(Protocol):
    """A poster whose thread shows the session working again (Slack's agent session
    ``processing``, with its Stop) from the step that picks it up from a wait, before that
    step's model call or tool: a turn that answers at once shows it too (issue #28)."""

    async def show_resumed(
        self,
        *,
        key: str,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        inputs: Sequence[str],
    ) -> None:
        """The step ``key`` resumes the session (its ``checkpoint`` from before the step;
        ``inputs``: what people wrote that it takes): show it working, once per ``key``.
        Slack failures are logged; raises DatabaseUnavailable."""
        ...


@runtime_checkable
class FailurePoster(Protocol):
    """A poster that tells a thread its session failed (Slack); without it the thread
    reads the failure's ``notice`` event itself (``warroom chat``)."""

    async def show_failure(
        self,
        *,
        key: str,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        text: str,
    ) -> None:
        """Post ``text`` once per ``key`` and close the turn's status (no live Stop)."""
        ...


class SandboxKeeper(Protocol):
    """The driver's two uses of sandboxes outside a harness step."""

    async def provision(self, session_id: str) -> str:
        """A new, ready sandbox; returns its handle as JSON (``Checkpoint.sandbox``).

        Raises:
            WorkspaceCannotStart: no sandbox will start until someone fixes the host.
            WorkspaceUnavailable: no sandbox could be made now (transient).
        """
        ...

    async def park(self, handle_json: str) -> None:
        """Suspend the sandbox of a session that now waits for a human (idempotent)."""
        ...


@dataclass(frozen=True)
class _Report:
    """What a committed step shows in its thread, in step order: its progress (its
    checkpoint and events), or, with ``failure`` (outbox key, text), that the session
    failed."""

    checkpoint: Checkpoint
    events: Sequence[Event] = ()
    failure: tuple[str, str] | None = None


@dataclass
class _Saved:
    """The step's checkpoint from before it ran, with the sandbox its mid-step saves
    recorded last (a sandbox provisioned for the step is not lost with the step)."""

    before: Checkpoint
    sandbox: str | None = None

    def __post_init__(self) -> None:
        self.sandbox = self.before.sandbox

    @property
    def latest(self) -> Checkpoint:
        """``before`` with the last recorded sandbox."""
        return replace(self.before, sandbox=self.sandbox)


@dataclass
class StepDriver:
    """Runs one step of one session per call.

    Attributes:
        lease_s: the claim's lease (docs/architecture.md §5), renewed while a step runs
            (``lease.StepLease``).
        wait_s: how long an answered session waits for a reply before it is done.
        sandboxes: provisions a sandbox before a session's first ``Bash`` intent and
            suspends it when the session waits; None leaves both to the harness.
        origin: the only origin of sessions this driver claims (its poster serves it).
        observe: told about every step (metrics; default: the process's counters).
        mcp: the process's MCP servers, whose tools every step offers; None: no MCP.
        ledger: the model-call ledger every answered call is written to, priced (§14),
            and the spending caps are checked against; None: calls are not metered.
        record: the incident record behind ``/incident/timeline.md`` (None: not served).
        tasks: the background tasks' rows (None: background commands are refused).
        cron: the cron jobs' rows (None: the Cron tools are refused).
        carry_on_s: for this long from a message's first step, a step that continues is
            followed by the next in this worker, claimed by its commit, with no queue
            message between (docs/architecture.md §5; ``carry_on.CarryOn``); 0: one step
            per message.
        draining: the worker is stopping: carry on no further (set by ``drain``; read
            when a step commits, so a step running when it is set hands the next back).
        approvals: the approval policy every tool call passes (§13); the poster must then
            be an ``ApprovalPoster``. None: every call runs.
        small_model: the small model WebFetch reads pages with, metered on ``ledger`` like
            ``model``; None: WebFetch is refused.
        shared: the copies of long transcripts every worker reads (``shared_transcripts``):
            a step whose session this worker has not cached claims with its copy's mark,
            and a commit that hands the session on adds what the copy lacks; None: a
            worker that lacks a transcript reads it from the database.
    """

    sessions: SessionStore
    files: FileStore
    model: ModelProtocol
    workspaces: WorkspaceSource
    poster: ThreadPoster
    enqueue: Enqueue
    worker_id: str
    limits: Limits = field(default_factory=Limits)
    lease_s: float = 15.0
    wait_s: float = 7 * 24 * 3600.0
    crash: Crasher = no_crash
    sandboxes: SandboxKeeper | None = None
    origin: SessionOrigin = SessionOrigin.SLACK
    observe: Callable[[StepReport], None] = field(
        default_factory=lambda: default_metrics().observe_step
    )
    transcripts: TranscriptCache = field(default_factory=TranscriptCache)
    mcp: McpServers | None = None
    ledger: ModelCallLog | None = None
    record: IncidentRecord | None = None
    tasks: BackgroundTasks | None = None
    cron: CronJobs | None = None
    carry_on_s: float = 0.0
    draining: bool = False
    approvals: ApprovalGate | None = None
    small_model: ModelProtocol | None = None
    recall: Recall | None = None
    shared: SharedTranscripts | None = None
    crash_hooks: CrashHooks = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.crash_hooks = CrashHooks(self.crash)
        if self.approvals is not None and not isinstance(self.poster, ApprovalPoster):
            raise ValueError("approvals need a poster that can ask for them (ApprovalPoster)")

    async def run(self, session_id: str, token: str) -> StepOutcome:
        """Advance ``session_id`` by one step if ``token`` is still its pending token, and
        by the steps that follow it while ``carry_on_s`` lasts; returns the last outcome.

        Raises:
            ModelError, WorkspaceUnavailable, DatabaseUnavailable: transient failures;
                nothing was committed and the lease was given up, so the actor's retry
                (or the sweeper) runs the step again as its next attempt; the attempt's
                reason is logged (a ``step_failed`` event).
            Exception: anything else a step raises, after the same release.
        """
        cached, copy = self.transcripts.mark(session_id), None
        if cached is None and self.shared is not None:
            copy = await self.shared.read(session_id)
            cached = copy.mark if copy is not None else None
        claim = await self.sessions.claim(
            session_id,
            token,
            worker_id=self.worker_id,
            lease_s=self.lease_s,
            cached=cached,
            origin=self.origin,
        )
        if claim is None:
            self.observe(StepReport(None, StepOutcome.SKIPPED, 0.0))
            return StepOutcome.SKIPPED
        key = claim.key
        with log_context(session_id=session_id, org_id=key.org_id, channel_id=key.channel_id):
            return await self._run_from(claim, copy)

    async def _run_from(self, claim: Claim, copy: SharedCopy | None = None) -> StepOutcome:
        """Run the claimed step, then, while ``carry_on_s`` lasts, the steps that follow
        it, each claimed by the previous one's commit (no queue message between). The
        thread's progress is shown in order, each update while the next step runs.
        ``copy``: the shared copy of the transcript the first claim was made with.
        Returns the last step's outcome."""
        carry = CarryOn.from_now(self.carry_on_s, lambda: self.draining)
        shown: asyncio.Task[None] | None = None
        try:
            while True:
                outcome, following, report = await self._run_claimed(claim, carry=carry, copy=copy)
                if report is not None:
                    shown = asyncio.create_task(self._progress_after(shown, claim, report))
                if following is None:
                    return outcome
                claim, copy = following, None
        finally:
            if shown is not None:
                await shown

    async def _run_claimed(
        self, claim: Claim, *, carry: CarryOn, copy: SharedCopy | None = None
    ) -> tuple[StepOutcome, Claim | None, _Report | None]:
        """One claimed step: its outcome, the next step's claim when ``carry`` allows it
        at the commit and the step continues (else its token was enqueued), and the
        progress to show."""
        session_id, started = claim.session_id, time.monotonic()
        cp: Checkpoint | None = None
        try:
            async with StepLease(self.sessions, claim, self.lease_s) as lease:
                # read under the lease (rows the cache and the copy lack, on a cold worker)
                cp, stored = await self.transcripts.load(claim, self.sessions.transcript, copy)
                outcome, next_step, report = await self._step(
                    claim, _checkpoint(claim, cp), stored, lease, carry=carry
                )
        except Fenced:
            log.warning("session %s: step fenced (stopped, or taken over)", session_id)
            self.transcripts.forget(session_id)
            self._observe(_kind(claim, cp), StepOutcome.FENCED, started)
            return StepOutcome.FENCED, None, None
        except Exception as exc:
            self.transcripts.forget(session_id)
            self._observe(_kind(claim, cp), StepOutcome.ERROR, started)
            await self._note_failure(claim, exc)
            await self._release(claim)
            raise
        self.crash_hooks.reached(
            CrashPoint.AFTER_COMMIT,
            session_id=session_id,
            step=cp.steps if cp is not None else 0,
            attempt=claim.crash_count,
        )
        if isinstance(next_step, Claim):
            return outcome, next_step, report
        if next_step is not None:  # before progress is shown: the next step need not wait
            await self.enqueue(session_id, next_step)
        return outcome, None, report

    async def _step(
        self,
        claim: Claim,
        cp: Checkpoint,
        stored: StoredTranscript,
        lease: StepLease,
        *,
        carry: CarryOn = NEVER,
    ) -> tuple[StepOutcome, str | Claim | None, _Report | None]:
        started = time.monotonic()
        inbox = _inbound(claim)
        resuming = resumes(cp, inbox)
        revived = False
        if any(i.from_user for i in inbox) and (holds_long_work(cp) or not resuming):
            revived = await self._stopped(claim)  # a reply after a stop: it resumes too
        if revived and holds_long_work(cp):
            cp = after_stop(cp)
        kind = next_kind(cp, inbox)
        if kind is StepKind.POST:  # the inbox stays for the model step after the post
            return await self._post_answer(claim, cp, stored, lease)
        if kind is StepKind.ASK:  # likewise: what arrives is held until it is decided
            return await self._ask(claim, cp, stored, lease)
        if resuming or (revived and kind is not StepKind.WAIT):
            await self._show_resumed(claim, cp, inbox)
        point = self._point(claim, cp)
        if kind is StepKind.MODEL:
            point(CrashPoint.BEFORE_MODEL)
        saved = _Saved(cp)
        try:
            ready = await self._with_sandbox_for_bash(cp) if kind is StepKind.TOOL else cp
            saved.sandbox = ready.sandbox
            if isinstance(self.poster, LiveReporter):
                self.poster.step_started(session_id=claim.session_id, kind=kind.value)
            deps = self._collaborators(claim, stored, ready, await self._spent(claim, kind), saved)
            result = await advance(ready, deps, inbox)
        except WorkspaceCannotStart as exc:  # permanent: the session fails, saying why
            return await self._cannot_start(claim, saved.latest, stored, lease, exc, kind)
        cp = ready
        point(CrashPoint.AFTER_MODEL if kind is StepKind.MODEL else CrashPoint.AFTER_TOOL)
        new = result.checkpoint
        if kind is not StepKind.WAIT and await self._show_parked(claim, new, result.events):
            point(CrashPoint.AFTER_PARK)
        waits = result.next is not Next.CONTINUE
        lease.committing()
        end: dict[str, Any] = {
            "events": _log_events(result.events),
            "consumed_inbox_upto": claim.inbox_upto if inbox else None,
            "usage": _usage_delta(cp, new),
        }
        next_step: str | Claim | None
        if not waits and carry.allows():  # decided now: a stop during the step counts
            next_step = await self._commit_then_claim(claim, stored, new, **end)
        else:
            outcome = self._wait(new) if waits else Continue()
            next_step = await self._commit(claim, stored, new, outcome=outcome, **end)
        status = StepOutcome.WAITING if waits else StepOutcome.STEPPED
        self._observe(kind, status, started, result.events)
        return status, next_step, _Report(new, result.events)

    async def _post_answer(
        self, claim: Claim, cp: Checkpoint, stored: StoredTranscript, lease: StepLease
    ) -> tuple[StepOutcome, str | None, _Report | None]:
        assert cp.answer is not None
        if cp.parent is not None:
            return await self._answer_parent(claim, cp, stored, lease)
        started = time.monotonic()
        key = answer_key(claim.session_id, cp)
        posting = self.crash_hooks.posting(
            key, session_id=claim.session_id, step=cp.steps, attempt=claim.crash_count
        )
        markdown = await self._with_footer(claim, cp.answer)
        where = {
            "key": key,
            "session_id": claim.session_id,
            "channel_id": claim.key.channel_id,
            "thread_ts": claim.key.thread_ts,
            "markdown": markdown,
        }
        parked = isinstance(self.poster, ParkingPoster) and holds_long_work(cp)
        try:
            with posting:
                if isinstance(self.poster, ParkingPoster):  # shown parked when it waits on
                    ts = await self.poster.post_answer(**where, checkpoint=cp)
                else:
                    ts = await self.poster.post_answer(**where)
        except SlackRefused as refused:
            return await self._give_up_post(claim, cp, stored, lease, key, refused, started)
        if parked:
            self.crash_hooks.reached(
                CrashPoint.AFTER_PARK,
                session_id=claim.session_id,
                step=cp.steps,
                attempt=claim.crash_count,
            )
        done = answer_posted(cp)
        lease.committing()
        next_token = await self._commit(
            claim,
            stored,
            done,
            outcome=self._wait(done),
            events=(NewEvent("post_done", f'{{"key":"{key}","ts":"{ts}"}}'),),
        )
        if next_token is None:
            await self._park(done)
        self._observe(StepKind.POST, StepOutcome.POSTED, started)
        return StepOutcome.POSTED, next_token, None

    async def _answer_parent(
        self, claim: Claim, cp: Checkpoint, stored: StoredTranscript, lease: StepLease
    ) -> tuple[StepOutcome, str | None, _Report | None]:
        """A subagent's answer goes to its parent's inbox (once, by key), not to Slack;
        then the subagent ends ``done`` (its shared sandbox stays the parent's) and so do
        its background processes: nothing of an ended subagent runs on (or wakes it)."""
        assert cp.answer is not None
        started = time.monotonic()
        await answer_parent(self.sessions, self.enqueue, cp, cp.answer, failed=False)
        if self.tasks is not None:
            await end_session_tasks(self.tasks, self.workspaces.open(cp), claim.session_id)
        done = answer_posted(cp)
        lease.committing()
        next_token = await self._commit(
            claim,
            stored,
            done,
            outcome=Finish(SessionStatus.DONE),
            events=(NewEvent("post_done", json.dumps({"key": "parent", "ts": ""})),),
            consumed_inbox_upto=claim.inbox_upto,
        )
        self._observe(StepKind.POST, StepOutcome.POSTED, started)
        return StepOutcome.POSTED, next_token, None

    async def _ask(
        self, claim: Claim, cp: Checkpoint, stored: StoredTranscript, lease: StepLease
    ) -> tuple[StepOutcome, str | None, _Report | None]:
        """Post the pending approval with its buttons, then wait holding nothing: no
        worker, the sandbox suspended, woken by a decision or by the expiry (``wake_at``)."""
        approval = cp.approval
        assert approval is not None
        assert isinstance(self.poster, ApprovalPoster)
        started = time.monotonic()
        key = f"{claim.session_id}:approval:{approval.tool_use_id}"
        try:
            ts = await self.poster.ask_approval(
                key=key,
                session_id=claim.session_id,
                channel_id=claim.key.channel_id,
                thread_ts=claim.key.thread_ts,
                approval=approval,
                requester_id=cp.requester.user_id,
            )
        except SlackRefused as refused:  # nobody can be asked in that thread: never retried
            return await self._give_up_post(claim, cp, stored, lease, key, refused, started)
        asked = approval_posted(cp, ts)
        lease.committing()
        detail = json.dumps({"key": key, "ts": ts, "tool_use_id": approval.tool_use_id})
        next_token = await self._commit(
            claim,
            stored,
            asked,
            outcome=self._wait(asked),
            events=(NewEvent("approval_posted", detail),),
        )
        if next_token is None:
            await self._park(asked)
        self._observe(StepKind.ASK, StepOutcome.WAITING, started)
        return StepOutcome.WAITING, next_token, None

    async def _show_parked(self, claim: Claim, cp: Checkpoint, events: Sequence[Event]) -> bool:
        """Before the commit of a step that parks the session mid-turn (``waits_mid_turn``),
        show it parked (``ParkingPoster``), keyed by the step's token (a retry of the step
        has it too). Returns whether it did."""
        if not isinstance(self.poster, ParkingPoster) or cp.parent is not None:
            return False  # a subagent shows in its parent's thread
        if not waits_mid_turn(cp):
            return False
        await self.poster.show_parked(
            key=f"{claim.session_id}:park:{claim.token}",
            session_id=claim.session_id,
            channel_id=claim.key.channel_id,
            thread_ts=claim.key.thread_ts,
            checkpoint=cp,
            events=events,
        )
        return True

    async def _show_resumed(self, claim: Claim, cp: Checkpoint, inbox: Sequence[Inbound]) -> None:
        """Before a step that picks the session up from a wait (``harness.resumes``, or a
        reply after a stop) calls the model or runs a tool, show it working
        (``ResumingPoster``), keyed by the step's token (a retry of the step has it too)."""
        if not isinstance(self.poster, ResumingPoster) or cp.parent is not None:
            return  # a subagent shows in its parent's thread
        await self.poster.show_resumed(
            key=f"{claim.session_id}:resume:{claim.token}",
            session_id=claim.session_id,
            channel_id=claim.key.channel_id,
            thread_ts=claim.key.thread_ts,
            checkpoint=cp,
            inputs=tuple(i.text for i in inbox if i.from_user),
        )

    async def _show_decision(self, claim: Claim, cp: Checkpoint, events: Sequence[Event]) -> None:
        """After a step that settled an approval: the thread message says who and when."""
        if cp.approval is None or not any(isinstance(e, ApprovalDecided) for e in events):
            return
        if not isinstance(self.poster, ApprovalPoster):
            return
        try:
            await self.poster.show_decision(
                session_id=claim.session_id,
                channel_id=claim.key.channel_id,
                approval=cp.approval,
                requester_id=cp.requester.user_id,
            )
        except Exception:  # the decision is committed; the message is best effort
            log.exception("session %s: approval message not updated", claim.session_id)

    async def _with_footer(self, claim: Claim, answer: str) -> str:
        """The answer with the session's spend so far (from the ledger) as its footer."""
        if self.ledger is None:
            return answer
        spend = await self.ledger.session(claim.session_id)
        return f"{answer}\n\n_{spend_text(spend)} so far in this thread_"

    async def _cannot_start(
        self,
        claim: Claim,
        cp: Checkpoint,
        stored: StoredTranscript,
        lease: StepLease,
        error: WorkspaceCannotStart,
        kind: StepKind,
    ) -> tuple[StepOutcome, str | None, _Report | None]:
        """No sandbox will start for this step until someone fixes the host: end the
        session ``failed`` at once (no retry, no crash), with a ``setup_failed`` notice
        naming the reason, and tell its parent, or its thread (``FailurePoster``, after
        the previous step's progress: the returned report).

        What is committed is the checkpoint from before the step (``cp``: the command
        needed the sandbox first, so nothing of it ran and no intent stays in flight),
        with the sandbox the step recorded, if any, and holding the inbox as pending
        input. A reply revives the session and the same call is tried again.
        """
        started = time.monotonic()
        reason, text = told(error)
        log.error("session %s failed: no sandbox will start: %s", claim.session_id, reason)
        inbox = _inbound(claim)
        failed = held(cp, inbox)
        lease.committing()
        next_token = await self._commit(
            claim,
            stored,
            failed,
            outcome=Finish(SessionStatus.FAILED),
            events=(setup_failed_event(reason, text),),
            consumed_inbox_upto=claim.inbox_upto if inbox else None,
        )
        if next_token is None:
            await self._park(failed)
        self._observe(kind, StepOutcome.SETUP_FAILED, started)
        if failed.parent is not None:
            await answer_parent(
                self.sessions, self.enqueue, failed, f"The subagent failed: {text}", failed=True
            )
            return StepOutcome.SETUP_FAILED, next_token, None
        told_thread = (failure_key(claim.session_id, claim.epoch), text)
        return StepOutcome.SETUP_FAILED, next_token, _Report(failed, failure=told_thread)

    async def _give_up_post(
        self,
        claim: Claim,
        cp: Checkpoint,
        stored: StoredTranscript,
        lease: StepLease,
        key: str,
        refused: SlackRefused,
        started: float,
    ) -> tuple[StepOutcome, str | None, _Report | None]:
        """Slack refused the answer (or an approval request) for good (archived channel,
        revoked token, …): end the session ``failed`` with a ``post_failed`` event, no
        retry, no crash.

        Replies already in the inbox are consumed with it: nothing can be posted to that
        thread any more, and an unconsumed reply would keep the session running into the
        same refusal. One that arrives after the claim still keeps it running (the store's
        rule), so the returned token is enqueued like any other.
        """
        log.error(
            "session %s: Slack refused its answer for good (%s on %s); the session ends "
            "failed without retrying",
            claim.session_id,
            refused.error,
            refused.method,
        )
        lease.committing()
        done = answer_posted(cp) if cp.answer is not None else cp
        detail = json.dumps({"key": key, "method": refused.method, "error": refused.error})
        next_token = await self._commit(
            claim,
            stored,
            done,
            outcome=Finish(SessionStatus.FAILED),
            events=(NewEvent("post_failed", detail),),
            consumed_inbox_upto=claim.inbox_upto,
        )
        if next_token is None:
            await self._park(done)
        default_metrics().count_post_refused(refused.error)
        self._observe(StepKind.POST, StepOutcome.REFUSED, started)
        return StepOutcome.REFUSED, next_token, None

    def _observe(
        self,
        kind: StepKind | None,
        outcome: StepOutcome,
        started: float,
        events: Sequence[Event] = (),
    ) -> None:
        self.observe(StepReport(kind, outcome, time.monotonic() - started, tuple(events)))

    async def _stopped(self, claim: Claim) -> bool:
        """Whether ``stop`` cancelled the session since its last step: then nothing was
        logged after the cancel's notice (a reply revives a session without an event)."""
        last = await self.sessions.events(claim.session_id, max(0, claim.last_seq - 1), limit=1)
        if not last or last[0].kind != "notice":
            return False
        return bool(json.loads(last[0].payload_json).get("notice") == "cancelled")

    def _wait(self, cp: Checkpoint) -> Wait:
        """The wait ``cp`` parks in: a reply ends it, ``wait_s`` without one ends the
        session, and the checkpoint's earliest deadline (``next_wake``) wakes it."""
        until = utc_now() + timedelta(seconds=self.wait_s)
        wake = next_wake(cp)
        if wake is None:
            return Wait(until=until)
        wake_at, note = wake
        return Wait(until=max(until, wake_at), wake_at=wake_at, wake_note=note)

    def _point(self, claim: Claim, cp: Checkpoint) -> Callable[[CrashPoint], None]:
        """``CrashHooks.reached`` for this claimed step."""
        return functools.partial(
            self.crash_hooks.reached,
            session_id=claim.session_id,
            step=cp.steps,
            attempt=claim.crash_count,
        )

    async def _commit(
        self, claim: Claim, stored: StoredTranscript, cp: Checkpoint, **end: Any
    ) -> str | None:
        """``SessionStore.commit`` of ``cp``: its state, and the messages not yet stored;
        then, unless the session ends, the shared copy gets what it lacks (``_share``)."""
        delta = stored.delta(cp.messages)
        token = await self.sessions.commit(
            claim, checkpoint=cp.state_json(), transcript=delta, **end
        )
        stored.stored(delta, cp.messages)
        if not isinstance(end.get("outcome"), Finish):
            await self._share(claim.session_id, stored)
        self.transcripts.keep(claim.session_id, stored)
        return token

    async def _share(self, session_id: str, stored: StoredTranscript) -> None:
        """Add to the shared copy of the transcript the messages it lacks (what this commit
        and the carried steps before it stored), before the session's next step is
        enqueued: another worker may take it. Best effort: a failure leaves the copy as
        it was (the next worker reads the rest from the database)."""
        if self.shared is None:
            return
        try:
            stored.shared = await self.shared.share(
                session_id, stored.mark.generation, stored.messages, stored.shared
            )
        except Exception:  # committed already: the copy is only a cache
            log.exception("session %s: transcript copy not updated", session_id)

    async def _commit_then_claim(
        self, claim: Claim, stored: StoredTranscript, cp: Checkpoint, **end: Any
    ) -> Claim:
        """``SessionStore.commit_then_claim`` of ``cp`` (as ``_commit``): the next step's
        claim, for this worker."""
        delta = stored.delta(cp.messages)
        following = await self.sessions.commit_then_claim(
            claim, checkpoint=cp.state_json(), transcript=delta, lease_s=self.lease_s, **end
        )
        stored.stored(delta, cp.messages)
        self.transcripts.keep(claim.session_id, stored)
        return following

    async def _spent(self, claim: Claim, kind: StepKind) -> Spent | None:
        """What the session and its org spent, when a cap needs it for this step."""
        if self.ledger is None or not self.limits.has_cost_caps():
            return None
        if kind not in (StepKind.MODEL, StepKind.TOOL):
            return None
        mine, org = await self.ledger.for_caps(
            claim.session_id, claim.key.org_id, since=day_start(utc_now())
        )
        return Spent(session_nanousd=mine, org_day_nanousd=org)

    def _collaborators(
        self,
        claim: Claim,
        stored: StoredTranscript,
        cp: Checkpoint,
        spent: Spent | None = None,
        saved: _Saved | None = None,
    ) -> Collaborators:
        async def save(cp: Checkpoint, events: Sequence[Event]) -> None:
            delta = stored.delta(cp.messages)
            await self.sessions.save(
                claim, checkpoint=cp.state_json(), events=_log_events(events), transcript=delta
            )
            stored.stored(delta, cp.messages)
            if saved is not None:
                saved.sandbox = cp.sandbox
            if events and isinstance(self.poster, LiveReporter):
                self.poster.events_saved(session_id=claim.session_id, events=events)

        model: ModelProtocol = self.model
        small = self.small_model
        if self.ledger is not None:
            count = default_metrics().count_model_call
            model = MeteredModel(
                self.model, self.ledger, claim.session_id, claim.key, observe=count
            )
            if small is not None:
                small = MeteredModel(small, self.ledger, claim.session_id, claim.key, observe=count)

        def announce(events: Sequence[Event]) -> None:
            if isinstance(self.poster, LiveReporter):
                self.poster.events_saved(session_id=claim.session_id, events=events)

        return Collaborators(
            store=self.files,
            model=model,
            workspaces=self.workspaces,
            save=save,
            announce=announce,
            limits=self.limits,
            mcp=self.mcp,
            spent=spent,
            record=self.record,
            tasks=self.tasks,
            cron=self.cron,
            agents=None if cp.parent is not None else self._spawner(claim, cp),
            approvals=self.approvals,
            small_model=small,
            recall=self.recall,
        )

    def _spawner(self, claim: Claim, cp: Checkpoint) -> AgentSpawner:
        """Starts the subagents of this step (``bot.durable.agents``)."""
        return ChildSessions(self.sessions, self.enqueue, cp, claim.key, self.origin)

    async def _with_sandbox_for_bash(self, cp: Checkpoint) -> Checkpoint:
        """Give the session a sandbox before a Bash intent is saved (see the module doc)."""
        call = cp.next_call()
        needs = ("Bash", "Monitor", "Agent")  # a subagent shares its parent's sandbox
        if (
            self.sandboxes is None
            or cp.sandbox is not None
            or call is None
            or canonical_name(call.name) not in needs
        ):
            return cp
        return replace(cp, sandbox=await self.sandboxes.provision(cp.session_id))

    async def _park(self, cp: Checkpoint) -> None:
        """Suspend the sandbox of a session that now waits, unless a background process
        of the session runs in it (it must go on; the ledger refuses the idle sweep too)."""
        if self.sandboxes is None or cp.sandbox is None or cp.running_tasks():
            return
        if cp.parent is not None or any(a.running for a in cp.agents):
            return  # the sandbox is shared with a parent or with running subagents
        try:
            await self.sandboxes.park(cp.sandbox)
        except Exception:  # parking saves resources; the idle sweep catches a miss
            log.exception("session %s: could not suspend its sandbox", cp.session_id)

    async def _progress_after(
        self, previous: asyncio.Task[None] | None, claim: Claim, report: _Report
    ) -> None:
        """Show a step's progress (and an approval's decision, when the step settled one),
        or the session's failure, once the previous step's is shown (updates stay in
        order: a late progress view never reopens a failed turn's status)."""
        if previous is not None:
            await previous
        if report.failure is not None:
            await self._tell_failure(claim, report.checkpoint, *report.failure)
            return
        await self._show_decision(claim, report.checkpoint, report.events)
        await self._progress(claim, report.checkpoint, report.events)

    async def _tell_failure(self, claim: Claim, cp: Checkpoint, key: str, text: str) -> None:
        """Tell the thread the session failed (``FailurePoster``; best effort)."""
        if not isinstance(self.poster, FailurePoster):
            return
        try:
            await self.poster.show_failure(
                key=key,
                session_id=claim.session_id,
                channel_id=claim.key.channel_id,
                thread_ts=claim.key.thread_ts,
                checkpoint=cp,
                text=text,
            )
        except Exception:  # the session failed either way; the log says why
            log.exception("session %s: could not tell the thread it failed", claim.session_id)

    async def _progress(self, claim: Claim, cp: Checkpoint, events: Sequence[Event]) -> None:
        if cp.parent is not None:  # a subagent shows in its parent's status message
            return
        try:
            await self.poster.show_progress(
                session_id=claim.session_id,
                channel_id=claim.key.channel_id,
                thread_ts=claim.key.thread_ts,
                checkpoint=cp,
                events=events,
            )
        except SlackRefused as refused:  # e.g. an archived channel: say it in one line
            log.warning("session %s: progress not shown: %s", claim.session_id, refused)
        except Exception:  # progress is best effort: never fail a committed step
            log.exception("session %s: progress update failed", claim.session_id)

    async def _note_failure(self, claim: Claim, error: Exception) -> None:
        """Log why this attempt failed (a ``step_failed`` event, the checkpoint kept), so
        that a session given up after its last attempt says why (``failures``). Best
        effort: a database that is down, or a claim fenced meanwhile, logs nothing."""
        with contextlib.suppress(Fenced, DatabaseUnavailable):
            await self.sessions.save(claim, checkpoint=None, events=(step_failed_event(error),))

    async def _release(self, claim: Claim) -> None:
        """Give up the lease of a failed step so its next attempt need not wait for it."""
        with contextlib.suppress(Fenced, DatabaseUnavailable):
            await self.sessions.release(claim)


def _checkpoint(claim: Claim, cp: Checkpoint) -> Checkpoint:
    """The claim's checkpoint, with the ids the store holds as the truth."""
    return replace(
        cp, session_id=claim.session_id, org_id=claim.key.org_id, channel_id=claim.key.channel_id
    )


def _kind(claim: Claim, cp: Checkpoint | None) -> StepKind | None:
    """What the claimed step was to do (for a failed step's metrics); None: no checkpoint."""
    if cp is None:
        return None
    return next_kind(cp, _inbound(claim))


def _inbound(claim: Claim) -> tuple[Inbound, ...]:
    """The claim's inbox as the harness takes it (kind kept: a user's reply or a system
    input such as a fired wake-up)."""
    return tuple(Inbound(i.user_id, i.text, kind=i.kind) for i in claim.inbox)


def _log_events(events: Sequence[Event]) -> tuple[NewEvent, ...]:
    return tuple(NewEvent(e.kind, e.to_json()) for e in events)


def _usage_delta(old: Checkpoint, new: Checkpoint) -> TokenUsage:
    a, b = old.usage, new.usage
    return TokenUsage(
        input_tokens=b.input_tokens - a.input_tokens,
        output_tokens=b.output_tokens - a.output_tokens,
        cache_read_tokens=b.cache_read_input_tokens - a.cache_read_input_tokens,
        cache_write_tokens=b.cache_creation_input_tokens - a.cache_creation_input_tokens,
    )
