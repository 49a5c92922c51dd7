"""The durable step driver: claim → one harness step (or one Slack post) → commit → enqueue.

This is the body of the ``advance`` actor, as a plain class tests can call
directly. Postgres (through ``SessionStore``) is the source of truth; a queue
message only names a pending token (ARCHITECTURE.md §5):

- a duplicate or stale message claims nothing and is dropped;
- the lease is renewed while the step runs, so a live worker keeps its claim;
- a tool's intent is committed before the tool runs (the harness calls ``save``);
- the answer is posted in its own step, idempotently (outbox + message metadata);
- the next message is enqueued only after the commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol

from harness import (
    Checkpoint,
    Collaborators,
    Event,
    Inbound,
    Limits,
    Next,
    StepKind,
    WorkspaceSource,
    advance,
    next_kind,
)
from harness import Model as ModelProtocol
from memory_store import (
    Claim,
    Continue,
    Fenced,
    FileStore,
    NewEvent,
    SessionStore,
    TokenUsage,
    Wait,
)

log = logging.getLogger(__name__)

Enqueue = Callable[[str, str], Awaitable[None]]


class CrashPoint(StrEnum):
    """Deterministic kill points for crash tests (``WARROOM_CRASH_AT=point@step``)."""

    BEFORE_MODEL = "before_model"
    AFTER_MODEL = "after_model"
    AFTER_TOOL = "after_tool"
    AFTER_COMMIT = "after_commit"
    DURING_POST = "during_post"


class Crasher(Protocol):
    """Called at each crash point; a test build kills the process there."""

    def __call__(self, point_reached: CrashPoint, *, step: int, attempt: int) -> None: ...


def no_crash(point_reached: CrashPoint, *, step: int, attempt: int) -> None:
    """The production crasher: does nothing."""


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


class StepOutcome(StrEnum):
    """What ``run`` did, for metrics and tests."""

    SKIPPED = "skipped"  # duplicate or stale message
    STEPPED = "stepped"
    POSTED = "posted"
    WAITING = "waiting"
    FENCED = "fenced"


@dataclass
class StepDriver:
    """Runs one step of one session per call.

    Attributes:
        lease_s: the claim's lease (≈15 s, ARCHITECTURE.md §5); renewed every third of it.
        wait_s: how long an answered session waits for a reply before it is done.
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

    async def run(self, session_id: str, token: str) -> StepOutcome:
        """Advance ``session_id`` by one step if ``token`` is still its pending token.

        Raises:
            ModelError, WorkspaceUnavailable, DatabaseUnavailable: transient failures;
                nothing was committed, the actor's retry (or the sweeper) runs it again.
        """
        claim = await self.sessions.claim(
            session_id, token, worker_id=self.worker_id, lease_s=self.lease_s
        )
        if claim is None:
            return StepOutcome.SKIPPED
        try:
            async with self._lease(claim):
                outcome, next_token = await self._step(claim)
        except Fenced:
            log.warning("session %s: step fenced (another worker owns it)", session_id)
            return StepOutcome.FENCED
        self.crash(CrashPoint.AFTER_COMMIT, step=_steps(claim), attempt=claim.crash_count)
        if next_token is not None:
            await self.enqueue(session_id, next_token)
        return outcome

    async def _step(self, claim: Claim) -> tuple[StepOutcome, str | None]:
        cp = _checkpoint(claim)
        if cp.answer is not None:
            return await self._post_answer(claim, cp)
        inbox = tuple(Inbound(i.user_id, i.text) for i in claim.inbox)
        is_model_step = next_kind(cp, inbox) is StepKind.MODEL
        if is_model_step:
            self.crash(CrashPoint.BEFORE_MODEL, step=cp.steps, attempt=claim.crash_count)
        deps = Collaborators(
            store=self.files,
            model=self.model,
            workspaces=self.workspaces,
            save=self._saver(claim),
            limits=self.limits,
        )
        result = await advance(cp, deps, inbox)
        point = CrashPoint.AFTER_MODEL if is_model_step else CrashPoint.AFTER_TOOL
        self.crash(point, step=cp.steps, attempt=claim.crash_count)
        new = result.checkpoint
        outcome = Continue() if result.next is Next.CONTINUE else Wait(until=None)
        next_token = await self.sessions.commit(
            claim,
            checkpoint=new.to_json(),
            outcome=outcome,
            events=_log_events(result.events),
            consumed_inbox_upto=claim.inbox_upto if inbox else None,
            usage=_usage_delta(cp, new),
        )
        await self._progress(claim, new, result.events)
        status = StepOutcome.STEPPED if result.next is Next.CONTINUE else StepOutcome.WAITING
        return status, next_token

    async def _post_answer(self, claim: Claim, cp: Checkpoint) -> tuple[StepOutcome, str | None]:
        assert cp.answer is not None
        key = f"{claim.session_id}:answer:{len(cp.messages)}"
        self.crash(CrashPoint.DURING_POST, step=cp.steps, attempt=claim.crash_count)
        ts = await self.poster.post_answer(
            key=key,
            session_id=claim.session_id,
            channel_id=claim.key.channel_id,
            thread_ts=claim.key.thread_ts,
            markdown=cp.answer,
        )
        done = replace(cp, answer=None, best_effort=False)
        next_token = await self.sessions.commit(
            claim,
            checkpoint=done.to_json(),
            outcome=Wait(until=None),
            events=(NewEvent("post_done", f'{{"key":"{key}","ts":"{ts}"}}'),),
        )
        return StepOutcome.POSTED, next_token

    async def _progress(self, claim: Claim, cp: Checkpoint, events: Sequence[Event]) -> None:
        try:
            await self.poster.show_progress(
                session_id=claim.session_id,
                channel_id=claim.key.channel_id,
                thread_ts=claim.key.thread_ts,
                checkpoint=cp,
                events=events,
            )
        except Exception:  # progress is best effort: never fail a committed step
            log.exception("session %s: progress update failed", claim.session_id)

    def _saver(self, claim: Claim) -> Callable[[Checkpoint, Sequence[Event]], Awaitable[None]]:
        async def save(cp: Checkpoint, events: Sequence[Event]) -> None:
            await self.sessions.save(claim, checkpoint=cp.to_json(), events=_log_events(events))

        return save

    @contextlib.asynccontextmanager
    async def _lease(self, claim: Claim) -> AsyncIterator[None]:
        async def renew() -> None:
            while True:
                await asyncio.sleep(self.lease_s / 3)
                await self.sessions.renew(claim, lease_s=self.lease_s)

        task = asyncio.create_task(renew())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Fenced):
                await task


def _checkpoint(claim: Claim) -> Checkpoint:
    """The claim's checkpoint, with the ids the store holds as the truth."""
    cp = Checkpoint.from_json(claim.checkpoint)
    return replace(
        cp, session_id=claim.session_id, org_id=claim.key.org_id, channel_id=claim.key.channel_id
    )


def _steps(claim: Claim) -> int:
    return Checkpoint.from_json(claim.checkpoint).steps


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
