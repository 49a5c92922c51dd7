"""Slack's agent surface for a session's thread: its agent session and its streamed steps.

Slack's contracts (docs.slack.dev method and event reference, slack_sdk 3.48's
``WebClient``; the gaps are in docs/slack-agent-surface.md):

- ``agents.sessions.setStatus`` (Tier 3): one agent session per thread, created by the
  first call (``title`` ≤ 200 chars and ``initiator_user_id`` apply then only); status
  ``processing`` shows Slack's loader and, with the ``agent_session_stopped`` subscription,
  its native Stop; ``suspended``, ``active``, ``closed``.
- ``chat.startStream`` (Tier 2), ``chat.appendStream`` (Tier 4), ``chat.stopStream``
  (Tier 2, ``session_status`` default ``active``, ``blocks`` and ``metadata`` of the
  finished message).

What this module does with them:

- a step that picks the session up from a wait (a reply, a wake-up, an approval or
  subagents' answers), or starts it, sets it ``processing`` (title from the incident)
  before its model call or tool (``resume``, once per step token, recorded in the
  outbox), so Slack shows its Stop while the model works, even when it answers at once;
- a turn's steps are one streamed message, a *segment*, opened with the session set to
  ``processing`` unless the step that resumed it did. Its outbox key is
  ``<session>:stream:<turn>.<n>`` and its ``ts`` is recorded there like any post; closing
  it records ``<key>/stop``. A
  segment closed (approval, wait, expiry) is followed by ``n+1``; a retried step finds the
  open one and appends to it, never starting a second one;
- chunks are written off the step (``push`` returns at once): one writer task per session
  sends, in order, everything pending in one ``chat.appendStream``, each call within the
  method's per-workspace budget (issue #32: no worker thread waits on Slack's budget);
- the durable steps move the status away from ``processing``, each before its commit:
  the answer's post closes the segment with the answer's blocks and the post key in
  ``metadata`` (so a retry finds it, as ``SlackPoster.post`` does) and ``active``, or
  ``suspended`` when the session then waits for a wake-up or background work; an approval
  request closes it ``suspended``; a step that parks the session mid-turn (it waits for its
  subagents) closes it ``suspended`` with that step's chunks last (``park``, recorded in the
  outbox under the step's key: a retried step sets it once); ``stop`` (typed, or Slack's
  native Stop) closes it ``closed``, as does the sweeper that fails a session. So a
  worker that dies after a commit leaves no session on ``processing``; a stream another
  process is still starting (its ts not yet recorded) is awaited, not closed or doubled;
- a workspace that refuses the methods (``REFUSALS``) turns the surface off for this
  installation, once, with one warning: the caller goes back to the status message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from bot.errors import SlackCallFailed, slack_call
from bot.slack.budget import CallBudget
from bot.slack.poster import METADATA_EVENT_TYPE, SlackPoster, Thread
from bot.slack.render import SlackMessage

if TYPE_CHECKING:
    from memory_store import OutboxItem

logger = logging.getLogger(__name__)

__all__ = [
    "DEFERRED_KIND",
    "ENDED",
    "REFUSALS",
    "AgentStatus",
    "AgentSurface",
    "SurfaceBudgets",
    "stream_key",
]


class AgentStatus(StrEnum):
    """An agent session's lifecycle status (``agents.sessions.setStatus``)."""

    PROCESSING = "processing"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    CLOSED = "closed"


REFUSALS = frozenset(
    {
        "feature_disabled",  # setStatus: "the agent tasks feature is not enabled"
        "missing_scope",
        "not_allowed_token_type",
        "not_allowed",
        "no_permission",
        "unknown_method",
        "method_deprecated",
        "restricted_action",
        "access_denied",
        "team_access_not_granted",
    }
)
"""Answers meaning this workspace does not let the app use the agent surface at all."""

ENDED = frozenset(
    {
        "message_not_in_streaming_state",
        "stopped_by_user",
        "message_not_found",
        "message_not_owned_by_app",
    }
)
"""Answers meaning a stream takes nothing more (over, stopped by a person, or gone)."""

STOP_SUBSCRIPTION_WARNING = "missing_agent_session_stopped_event_subscription"
DRAIN_BEFORE_CLOSE_S = 10.0
"""How long a durable step waits for its session's pending chunks before closing the
stream (they go first, so the answer is the last thing in the message)."""
MEMO_SESSIONS = 4096
"""Sessions whose stream state a process keeps in memory (the outbox has it all)."""
SETTLE_LOOP_TURNS = 8
"""Event-loop turns a durable step gives the step before it to queue its progress."""
STARTING_WAIT_S = 10.0
"""How long a stream another process is starting is awaited (its ts recorded) before it is
taken as orphaned by a dead starter."""
STARTING_POLL_S = 0.1
DEFERRED_KIND = "surface_close"
"""The outbox kind of a close a durable step left to its process's writer: unsent when
that process died or stopped with it waiting (``AgentSurface.take_deferred``)."""
CLOSES_AT_STOP_S = 5.0
"""How long a stopping process spends on the closes that still wait for Slack's budget."""
SETTLE_POLL_S = 0.05
"""How often a step waiting for its session's writer looks whether the writer now waits
for Slack's budget (then the step stops waiting)."""
MAX_TITLE_CHARS = 80
"""Titles are cut here (Slack takes 200; the sidebar shows far less)."""


@dataclass
class SurfaceBudgets:
    """Per-workspace budgets of the surface's methods, under Slack's tiers (a minute);
    ``bot.durable.wiring.surface_budgets`` shares them between processes through Redis."""

    status: CallBudget = field(default_factory=lambda: CallBudget(STATUS_PER_MINUTE))
    start: CallBudget = field(default_factory=lambda: CallBudget(STREAM_ENDS_PER_MINUTE))
    stop: CallBudget = field(default_factory=lambda: CallBudget(STREAM_ENDS_PER_MINUTE))
    append: CallBudget = field(default_factory=lambda: CallBudget(APPEND_PER_MINUTE))

    def contended(self) -> bool:
        """Whether a writer waits for a turn of any of them (Slack's budget is the pace)."""
        return any(b.contended for b in (self.status, self.start, self.stop, self.append))

    async def known_empty(self) -> None:
        """Mark each shared window as having no lost history (a new workspace: see
        ``SharedCallBudget.known_empty``); a local budget needs nothing.

        Raises:
            redis.RedisError: Redis could not be reached.
        """
        for budget in (self.status, self.start, self.stop, self.append):
            marker = getattr(budget, "known_empty", None)
            if marker is not None:
                await marker()

    async def aclose(self) -> None:
        """Close the shared budgets' connections (a local budget has none)."""
        for budget in (self.status, self.start, self.stop, self.append):
            closer = getattr(budget, "aclose", None)
            if closer is not None:
                await closer()


STATUS_PER_MINUTE = 45
"""``agents.sessions.setStatus`` calls a minute: Tier 3 (50), with room for others."""
STREAM_ENDS_PER_MINUTE = 18
"""``chat.startStream`` calls a minute, and as many ``chat.stopStream``: Tier 2 (20 each)."""
APPEND_PER_MINUTE = 90
"""``chat.appendStream`` calls a minute: Tier 4 (100)."""


class _NoTurn(Exception):
    """The method's budget has no turn free now, and the caller must not wait for one."""


def stream_key(session_id: str, turn: int, segment: int) -> str:
    """The outbox key of a turn's ``segment``-th streamed message.

    >>> stream_key("s1", 2, 0)
    's1:stream:2.0'
    """
    return f"{session_id}:stream:{turn}.{segment}"


@dataclass
class _Segment:
    key: str
    number: int
    ts: str | None
    closed: bool


@dataclass
class _Lane:
    """One session's pending stream writes, sent in order by one task."""

    thread: Thread
    turn: int = 0
    title: str = ""
    initiator: str | None = None
    pending: list[dict[str, Any]] = field(default_factory=list)
    tail: bool = False
    shown: bool = False
    """The pending chunks are a resumed step's, which set ``processing`` before it ran
    (``resume``): a stream they open sets it no second time."""
    task: asyncio.Task[None] | None = None
    closing: tuple[int, AgentStatus] | None = None
    stopped: bool = False
    """The session was closed (``stop``) since: a close still waiting sends nothing."""
    """A turn and status a durable step could not set within the budget: the writer sets it,
    with that turn's stream closed, once a turn frees (the latest one wins)."""


class AgentSurface:
    """A process's writer of agent sessions and streams (see the module docstring).

    Args:
        poster: its client makes the calls; its outbox records the streams.
        team_id: the installing workspace (``recipient_team_id`` of channel streams);
            asked of ``auth.test`` once when None.
        budgets: the per-workspace budgets of the methods.
        enabled: False to start with the surface off (the status-message path).
    """

    def __init__(
        self,
        poster: SlackPoster,
        *,
        team_id: str | None = None,
        budgets: SurfaceBudgets | None = None,
        enabled: bool = True,
    ) -> None:
        self._poster = poster
        self._client = poster.client
        self._team_id = team_id
        self._budgets = budgets or SurfaceBudgets()
        self.refused: str | None = None if enabled else "turned off"
        self._answered = False
        """Whether Slack answered a ``setStatus`` yet (taken or refused): until then calls
        go one at a time, so a workspace that refuses the surface is asked once."""
        self._first: asyncio.Lock | None = None
        self._lanes: dict[str, _Lane] = {}
        self._segments: dict[tuple[str, int], _Segment] = {}
        self._resumed: OrderedDict[str, int] = OrderedDict()
        """Session → the steps before the step that last set it ``processing`` here
        (``resume``), until that step's chunks are pushed."""
        self._warned: set[str] = set()

    @property
    def available(self) -> bool:
        """Whether this installation's workspace takes the agent surface (else fall back)."""
        return self.refused is None

    # ----- what steps call: returns at once -------------------------------------------

    def push(
        self,
        thread: Thread,
        *,
        turn: int,
        chunks: Sequence[dict[str, Any]],
        step: int | None = None,
        title: str = "",
        initiator: str | None = None,
        tail: bool = False,
    ) -> None:
        """Queue ``chunks`` for the turn's stream (opened, and the session set to
        ``processing``, on the first, unless the step that made them set it when it
        resumed the session: ``step`` is the session's steps after it). ``tail``: the
        step's next step closes the stream (an approval request): these chunks open none,
        so if that step went first they are dropped rather than reopening the session."""
        shown = self._resumed_before(thread.session_id, step)
        if not self.available or not chunks:
            return
        lane = self._lanes.get(thread.session_id)
        if lane is None:
            lane = self._lanes[thread.session_id] = _Lane(thread)
            self._forget_idle()
        lane.turn, lane.title, lane.initiator = turn, title or lane.title, initiator
        lane.pending.extend(chunks)
        lane.tail, lane.shown = tail, lane.shown or shown
        if lane.task is None or lane.task.done():
            lane.task = asyncio.create_task(self._drain(lane))

    def _forget_idle(self) -> None:
        """Keep at most ``MEMO_SESSIONS`` sessions' lanes and segments: the oldest idle
        ones go (what they knew is in the outbox)."""
        if len(self._lanes) <= MEMO_SESSIONS:
            return
        for session_id in list(self._lanes)[: len(self._lanes) - MEMO_SESSIONS]:
            lane = self._lanes[session_id]
            if not lane.pending and (lane.task is None or lane.task.done()):
                del self._lanes[session_id]
                for key in [k for k in self._segments if k[0] == session_id]:
                    del self._segments[key]

    async def drain(self, *, timeout_s: float) -> bool:
        """Wait until every queued chunk is sent (or failed); False on timeout."""
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        if not tasks:
            return True
        _done, pending = await asyncio.wait(tasks, timeout=timeout_s)
        return not pending

    async def aclose(self, *, closes_within_s: float = CLOSES_AT_STOP_S) -> None:
        """Stop the writers: progress they hold is dropped (the next step shows it again),
        but a close still waiting for Slack's budget is sent now, without it, within
        ``closes_within_s`` in all (a stopping worker would leave its answered sessions
        ``processing``, their streams open: a few calls past the budget, once a deploy,
        cost less)."""
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        waiting = [lane for lane in self._lanes.values() if lane.closing is not None]
        if waiting:
            closes = [self._close_now(lane) for lane in waiting]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*closes), closes_within_s)

    async def _close_now(self, lane: _Lane) -> None:
        """``_close_later`` of the lane's waiting close, past the budget (the stop)."""
        if lane.closing is None:
            return
        (turn, status), lane.closing = lane.closing, None
        try:
            await self._close_later(lane, turn, status, budget=_TAKEN)
        except Exception as exc:  # the process is stopping: say so, go on
            logger.warning("agent session of %s not closed: %s", lane.thread.session_id, exc)

    def _resumed_before(self, session_id: str, step: int | None) -> bool:
        """Whether a step of the session before ``step`` (steps taken) set it
        ``processing`` here (``resume``): the step whose chunks these are, the next one
        (forgotten then)."""
        resumed = self._resumed.get(session_id)
        if resumed is None or step is None or step <= resumed:
            return False
        del self._resumed[session_id]
        return True

    # ----- what durable steps await --------------------------------------------------

    async def resume(
        self,
        thread: Thread,
        *,
        key: str,
        step: int,
        title: str = "",
        initiator: str | None = None,
    ) -> None:
        """The step ``key`` picks the session up from a wait (a reply, a wake-up, an
        approval or subagents' answers) or starts it (``step``: the session's steps before
        it): set it ``processing`` before the step's model call or tool, so Slack shows
        its Stop then, even when the model answers at once; ``title`` and ``initiator``
        apply when this creates the session. Once per ``key`` (recorded in the outbox: a
        retried step sets it once); the stream the step's chunks open then sets it no
        second time.

        Raises:
            DatabaseUnavailable: the outbox could not be read or written (the step is
                retried). Slack failures are logged: the step's stream sets the status.
        """
        if not self.available:
            return
        if not await self._poster.recorded_intent(key):
            try:
                took = await self.set_status(
                    thread, AgentStatus.PROCESSING, title=title, initiator=initiator, budget=_NOW
                )
            except _NoTurn:  # Slack's budget is spent: the step's stream shows it, if any
                return
            except SlackCallFailed as exc:
                logger.warning("agent session of %s not resumed: %s", thread.session_id, exc)
                return
            if not took:
                return
            await self._poster.record_intent(thread, key, kind="status", payload_json="{}")
        self._resumed[thread.session_id] = step
        self._resumed.move_to_end(thread.session_id)
        while len(self._resumed) > MEMO_SESSIONS:
            self._resumed.popitem(last=False)

    async def finish(
        self,
        thread: Thread,
        *,
        key: str,
        message: SlackMessage | None,
        turn: int | None = None,
        status: AgentStatus = AgentStatus.ACTIVE,
    ) -> str | None:
        """End the turn's stream with the answer ``message`` (its blocks below what was
        streamed; ``key`` in its metadata) and the session ``status`` (``active``; or
        ``suspended``: it waits for a wake-up or background work); returns the stream's ts
        when it carried the answer, None when the caller must post it (and then call
        ``answered``): no open stream, it ended meanwhile, or ``message`` is None (the
        answer is too big for one message). Idempotent per ``key``.

        Raises:
            SlackCallFailed: a transient failure (the step is retried; the outbox keeps
                what was done).
        """
        await self._settle(thread.session_id)
        if (known := await self._poster.recorded_ts(key)) is not None:
            return known
        turn = await self._turn(thread.session_id, turn)
        await self._poster.record_intent(
            thread, _answered(thread.session_id, turn), kind="stream_stop", payload_json="{}"
        )
        segment = await self._opened(thread, turn)
        if segment is None or message is None:
            if segment is not None:
                await self._close_or_defer(thread, turn, segment, status)
            return None
        assert segment.ts is not None
        if not await self._budgets.stop.take_now():
            # Slack's budget is spent: the answer goes as a message now, the stream closes
            # (with the session's status) once a turn frees (issue #32)
            await self._defer(thread, turn, status)
            return None
        await self._poster.record_intent(thread, key, kind="answer", payload_json="{}")
        metadata = {"event_type": METADATA_EVENT_TYPE, "event_payload": {"key": key}}
        closed = await self._close(
            thread,
            segment,
            status,
            blocks=message.blocks,
            metadata=metadata,
            chunks=self._take_pending(thread.session_id),
            budget=_TAKEN,
        )
        if not closed:
            return None
        await self._poster.record_done(key, segment.ts)
        return segment.ts

    async def suspend(
        self,
        thread: Thread,
        *,
        turn: int | None = None,
        chunks: Sequence[dict[str, Any]] = (),
    ) -> None:
        """The session waits (an approval request is being posted): close the turn's
        stream ``suspended`` with ``chunks`` last (what it waits for), or set the status.
        Slack failures are logged."""
        await self._settle(thread.session_id)
        try:
            turn = await self._turn(thread.session_id, turn)
        except Exception:
            logger.exception("agent session of %s not suspended", thread.session_id)
            return
        await self.end(thread, AgentStatus.SUSPENDED, turn=turn, chunks=chunks, wait=False)

    async def answered(
        self,
        thread: Thread,
        *,
        key: str,
        status: AgentStatus = AgentStatus.ACTIVE,
        title: str = "",
        initiator: str | None = None,
    ) -> None:
        """The answer ``key`` was posted without the stream: the session listens
        (``active``) or waits for a wake-up or background work (``suspended``); ``title``
        and ``initiator`` apply when this creates the session (a turn without a stream).
        Once per ``key`` (recorded as ``<key>/status``), so a retried post step sets it
        once.

        Raises:
            SlackCallFailed: a transient failure (the step is retried).
        """
        done = f"{key}/status"
        if not self.available or await self._poster.recorded_intent(done):
            return
        lane = self._lanes.get(thread.session_id)
        if lane is not None and lane.closing is not None:  # a close waits for its turn
            lane.closing = (lane.closing[0], status)
            took = True
        else:
            try:
                took = await self.set_status(
                    thread, status, title=title, initiator=initiator, budget=_NOW
                )
            except _NoTurn:
                await self._defer(thread, await self._turn(thread.session_id, None), status)
                took = True  # set by the writer, once Slack's budget allows
        if took:
            await self._poster.record_intent(thread, done, kind="status", payload_json="{}")

    async def park(
        self,
        thread: Thread,
        *,
        key: str,
        turn: int,
        chunks: Sequence[dict[str, Any]] = (),
        title: str = "",
        initiator: str | None = None,
    ) -> None:
        """The step ``key`` parks the session mid-turn (it now waits, holding nothing):
        close the turn's stream ``suspended`` with the step's ``chunks`` last, or, with no
        open stream, show them in one closed at once (or set the status when there are
        none). Called by the durable step before its commit; once per ``key`` (the outbox
        records it with the ts that showed it), so a retried step sets it once.

        Raises:
            DatabaseUnavailable: the outbox could not be read or written (the step is
                retried). Slack failures are logged: a later step shows the status again.
        """
        if not self.available:
            return
        await self._settle(thread.session_id)
        if await self._poster.recorded_ts(key) is not None:
            return
        await self._poster.record_intent(thread, key, kind="park", payload_json="{}")
        try:
            shown = await self._park(thread, turn, chunks, title=title, initiator=initiator)
        except SlackCallFailed as exc:
            logger.warning("agent session of %s not suspended: %s", thread.session_id, exc)
            return
        if shown is not None:
            await self._poster.record_done(key, shown)

    async def _park(
        self,
        thread: Thread,
        turn: int,
        chunks: Sequence[dict[str, Any]],
        *,
        title: str,
        initiator: str | None,
    ) -> str | None:
        """``park``'s Slack calls; returns the ts that shows the session suspended (the
        stream's, else the thread's), None when the workspace refused the surface."""
        try:
            segment = await self._opened(thread, turn)
            if segment is None and chunks:  # the step's chunks open the turn's next stream
                lane = _Lane(thread, turn=turn, title=title, initiator=initiator)
                segment = await self._start(lane, turn, list(chunks), budget=_NOW)
                chunks = ()
            if (
                segment is not None
                and segment.ts is not None
                and not segment.closed
                and await self._close(
                    thread, segment, AgentStatus.SUSPENDED, chunks=chunks, budget=_NOW
                )
            ):
                return segment.ts
            took = await self.set_status(thread, AgentStatus.SUSPENDED, budget=_NOW)
        except _NoTurn:  # shown once Slack's budget allows; the step does not wait for it
            await self._defer(thread, turn, AgentStatus.SUSPENDED)
            return thread.thread_ts
        return thread.thread_ts if took else None

    async def end(
        self,
        thread: Thread,
        status: AgentStatus,
        *,
        turn: int | None = None,
        chunks: Sequence[dict[str, Any]] = (),
        wait: bool = True,
    ) -> None:
        """Move the session to ``status``: through its open stream's ``chat.stopStream``
        when it has one (of ``turn``, or of any turn when None), else
        ``agents.sessions.setStatus``. Without ``wait`` (a durable step), a call Slack's
        budget has no turn for now is left to the writer. Slack failures are logged, not
        raised."""
        if not self.available:
            return
        budget = _WAIT if wait else _NOW
        lane = self._lanes.get(thread.session_id)
        if status is AgentStatus.CLOSED and lane is not None:
            lane.closing, lane.stopped = None, True  # a stop: a close still waiting is void
        try:
            turn = await self._turn(thread.session_id, turn)
            if status is AgentStatus.CLOSED:  # for other processes' waiting closes
                await self._poster.record_intent(
                    thread, _closed(thread.session_id, turn), kind="status", payload_json="{}"
                )
            opened = await self._opened(thread, turn)
            try:
                if opened is not None and await self._close(
                    thread, opened, status, chunks=chunks, budget=budget
                ):
                    return
                await self.set_status(thread, status, budget=budget)
            except _NoTurn:
                await self._defer(thread, turn, status, chunks)
        except SlackCallFailed as exc:
            logger.warning("agent session of %s not set %s: %s", thread.session_id, status, exc)

    async def set_status(
        self,
        thread: Thread,
        status: AgentStatus,
        *,
        title: str = "",
        initiator: str | None = None,
        budget: str = "wait",
    ) -> bool:
        """``agents.sessions.setStatus`` within its budget; returns whether Slack took it.
        A refusal of the method turns the surface off (``refused``). ``budget``: ``"wait"``
        for a turn of the method's budget, or ``"now"`` (a durable step: raise ``_NoTurn``
        rather than wait).

        Raises:
            SlackCallFailed: a transient failure (ratelimited past the client's retries,
                no answer).
        """
        if not self.available:
            return False
        if self._answered:
            return await self._set_status(
                thread, status, title=title, initiator=initiator, budget=budget
            )
        self._first = self._first or asyncio.Lock()  # the process's one event loop
        async with self._first:  # the first answer decides for every later call
            took = await self._set_status(
                thread, status, title=title, initiator=initiator, budget=budget
            )
            self._answered = True  # a transient failure raised: the next call asks again
            return took

    async def _set_status(
        self,
        thread: Thread,
        status: AgentStatus,
        *,
        title: str,
        initiator: str | None,
        budget: str = "wait",
    ) -> bool:
        if self.refused is not None:  # refused while this call waited for the first answer
            return False
        await _take(self._budgets.status, budget)
        args: dict[str, Any] = {"channel_id": thread.channel_id, "thread_ts": thread.thread_ts}
        if title:
            args["title"] = _title(title)
        if initiator:
            args["initiator_user_id"] = initiator
        try:
            answer = await slack_call(
                "agents.sessions.setStatus",
                self._client.agents_sessions_setStatus(status=status.value, **args),
            )
        except SlackCallFailed as exc:
            if self._refusal(exc):
                return False
            raise
        self._warn_once(answer)
        return True

    # ----- the writer ----------------------------------------------------------------

    async def _drain(self, lane: _Lane) -> None:
        while lane.pending or lane.closing is not None:
            try:
                if lane.closing is not None:
                    closing = lane.closing
                    await self._close_later(lane, *closing)
                    if lane.closing == closing:  # not replaced by a later one meanwhile
                        lane.closing = None
                    continue
                chunks, lane.pending = lane.pending, []
                (tail, lane.tail), (shown, lane.shown) = (lane.tail, False), (lane.shown, False)
                await self._write(lane, lane.turn, chunks, tail=tail, shown=shown)
            except SlackCallFailed as exc:
                logger.warning("stream of %s not written: %s", lane.thread.session_id, exc)
            except Exception:  # a database outage: the next step shows its state again
                logger.exception("stream of %s not written", lane.thread.session_id)

    async def _defer(
        self,
        thread: Thread,
        turn: int,
        status: AgentStatus,
        chunks: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Leave ``status`` (with the turn's stream closed, ``chunks`` last) to the
        session's writer, which waits for Slack's budget where a durable step must not;
        a later status replaces one still waiting (issue #32: progress and statuses of
        many sessions are merged before they reach Slack, answers never wait). Recorded
        in the outbox (``DEFERRED_KIND``) until done, so a process that died with it
        waiting leaves it to another's sweep (``take_deferred``).

        Raises:
            DatabaseUnavailable: the outbox could not be written.
        """
        payload = json.dumps({"status": status.value})
        await self._poster.record_intent(
            thread, _deferred(thread.session_id, turn), kind=DEFERRED_KIND, payload_json=payload
        )
        self._defer_here(thread, turn, status, chunks)

    def _defer_here(
        self,
        thread: Thread,
        turn: int,
        status: AgentStatus,
        chunks: Sequence[dict[str, Any]] = (),
    ) -> None:
        """``_defer``'s part in this process: the lane's waiting close, its writer."""
        lane = self._lanes.get(thread.session_id)
        if lane is None:
            lane = self._lanes[thread.session_id] = _Lane(thread)
            self._forget_idle()
        lane.closing, lane.stopped = (turn, status), False
        lane.pending.extend(chunks)
        if lane.task is None or lane.task.done():
            lane.task = asyncio.create_task(self._drain(lane))

    def take_deferred(self, items: Sequence[OutboxItem]) -> int:
        """Take over closes other processes deferred and never carried out (they died or
        stopped: ``Outbox.unsent`` of ``DEFERRED_KIND``); returns how many were taken.
        One this process already holds, or of an unknown status, is passed over."""
        taken = 0
        for item in items:
            session_id, _, rest = item.key.partition(":stream:")
            turn = rest.partition("/")[0]
            try:
                status = AgentStatus(json.loads(item.payload_json)["status"])
            except (ValueError, KeyError, TypeError):
                continue
            lane = self._lanes.get(session_id)
            if not turn.isdigit() or (lane is not None and lane.closing is not None):
                continue
            thread = Thread(session_id, item.channel_id, item.thread_ts)
            self._defer_here(thread, int(turn), status)
            taken += 1
        return taken

    async def _close_later(
        self, lane: _Lane, turn: int, status: AgentStatus, *, budget: str = "wait"
    ) -> None:
        """The writer's part of ``_defer``: close the turn's open stream with ``status``
        and what is pending, else set the status (what was pending opens no stream);
        then the outbox records it done (a Slack failure leaves it for a later sweep)."""
        thread = lane.thread
        chunks, lane.pending = lane.pending, []
        await self._send_close(lane, turn, status, chunks, budget)
        await self._poster.record_done(_deferred(thread.session_id, turn), thread.thread_ts)

    async def _send_close(
        self,
        lane: _Lane,
        turn: int,
        status: AgentStatus,
        chunks: list[dict[str, Any]],
        budget: str,
    ) -> None:
        thread = lane.thread
        if await self._stopped(lane, turn):
            return
        segment = await self._opened(thread, turn)
        if segment is not None and segment.ts is not None and not segment.closed:
            await _take(self._budgets.stop, budget)
            if await self._stopped(lane, turn):  # closed by a stop while this waited
                return
            if await self._close(thread, segment, status, chunks=chunks, budget=_TAKEN):
                return
        await _take(self._budgets.status, budget)
        if await self._stopped(lane, turn):
            return
        await self.set_status(
            thread, status, title=lane.title, initiator=lane.initiator, budget=_TAKEN
        )

    async def _stopped(self, lane: _Lane, turn: int) -> bool:
        """Whether a stop closed the session since ``turn``'s close was deferred (here, or
        in another process: recorded in the outbox)."""
        return lane.stopped or await self._poster.recorded_intent(
            _closed(lane.thread.session_id, turn)
        )

    def _take_pending(self, session_id: str) -> list[dict[str, Any]]:
        """What the session's writer still holds, taken to go with the stream's close."""
        lane = self._lanes.get(session_id)
        if lane is None:
            return []
        chunks, lane.pending = lane.pending, []
        return chunks

    async def _write(
        self,
        lane: _Lane,
        turn: int,
        chunks: list[dict[str, Any]],
        *,
        tail: bool = False,
        shown: bool = False,
    ) -> None:
        thread = lane.thread
        for _attempt in range(3):
            if not self.available:
                return
            segment = await self._opened(thread, turn)
            if segment is None and await self._reopens_nothing(thread.session_id, turn, tail):
                return  # a later step closed the stream already: reopen nothing
            if segment is None:
                segment = await self._start(lane, turn, chunks, shown=shown)
                if segment is not None:
                    return
                continue
            assert segment.ts is not None
            await self._budgets.append.take()
            try:
                await slack_call(
                    "chat.appendStream",
                    self._client.chat_appendStream(
                        channel=thread.channel_id, ts=segment.ts, chunks=list(chunks)
                    ),
                )
                return
            except SlackCallFailed as exc:
                if self._refusal(exc):
                    return
                if exc.error not in ENDED:
                    raise
                await self._mark_closed(thread, segment)
                if exc.error == "stopped_by_user":  # a person stopped it: show no more
                    return
                # it expired (or was stopped elsewhere): the chunks go to a new one
        logger.warning("stream of %s: chunks dropped after 3 segments", thread.session_id)

    async def _start(
        self,
        lane: _Lane,
        turn: int,
        chunks: list[dict[str, Any]],
        *,
        shown: bool = False,
        budget: str = "wait",
    ) -> _Segment | None:
        """Open the turn's next segment with ``chunks``, the session set ``processing``
        first unless ``shown`` (the step set it when it resumed the session). ``budget``:
        as ``_close``'s (``_NoTurn`` when ``"now"`` finds no turn)."""
        thread = lane.thread
        args: dict[str, Any] = {"channel": thread.channel_id, "thread_ts": thread.thread_ts}
        if not thread.channel_id.startswith("D"):  # "required when streaming to channels"
            args["recipient_user_id"] = lane.initiator or ""
            args["recipient_team_id"] = await self._team()
        shown = await self._end_earlier(thread, turn, budget) or shown
        # the budgets first: between the claim and the recorded ts (what other processes
        # wait for, ``_opened``) there are only Slack's answers (a wait for the status's
        # turn there held another process's answer for ``STARTING_WAIT_S``)
        await _take(self._budgets.start, budget)
        if not shown:
            await _take(self._budgets.status, budget)
        if budget == _WAIT and await self._poster.recorded_intent(
            _answered(thread.session_id, turn)
        ):
            return None  # the turn was answered while this waited for Slack: open nothing
        number = await self._next_number(thread.session_id, turn)
        key = stream_key(thread.session_id, turn, number)
        if not await self._poster.claim_intent(thread, key, kind="stream"):
            return None  # another process opened it meanwhile: append to it
        segment = _Segment(key, number, None, False)
        self._segments[(thread.session_id, turn)] = segment
        try:
            if not shown and not await self.set_status(
                thread,
                AgentStatus.PROCESSING,
                title=lane.title,
                initiator=lane.initiator,
                budget=_TAKEN,
            ):
                return segment if not self.available else None
            answer = await slack_call(
                "chat.startStream",
                self._client.chat_startStream(
                    task_display_mode="timeline", chunks=list(chunks), **args
                ),
            )
        except SlackCallFailed as exc:
            self._refusal(exc)
            await self._mark_closed(thread, segment)
            raise
        segment.ts = str(answer["ts"])
        await self._poster.record_done(key, segment.ts)
        return segment

    async def _end_earlier(self, thread: Thread, turn: int, budget: str = "wait") -> bool:
        """Close the previous turn's stream if still open (input arrived mid-turn: the
        turn went on as a new one), the session still ``processing``: one stream streams
        in a thread at a time. Returns whether it did (the status is then set). ``budget``
        as ``_close``'s."""
        earlier = await self._open_segment(thread, turn - 1) if turn > 0 else None
        if earlier is None or earlier.ts is None:
            return False
        return await self._close(thread, earlier, AgentStatus.PROCESSING, budget=budget)

    async def _close(
        self,
        thread: Thread,
        segment: _Segment,
        status: AgentStatus,
        *,
        blocks: Sequence[dict[str, Any]] = (),
        metadata: dict[str, Any] | None = None,
        chunks: Sequence[dict[str, Any]] = (),
        budget: str = "wait",
    ) -> bool:
        """``chat.stopStream`` of ``segment`` with ``status`` (``chunks`` last, ``blocks``
        below); False when the stream had already ended (the caller sets the status).
        ``budget``: wait for the method's turn, take one ``"now"`` (``_NoTurn`` if none),
        or the caller has ``"taken"`` it."""
        assert segment.ts is not None
        await _take(self._budgets.stop, budget)
        args: dict[str, Any] = {"session_status": status.value}
        if chunks:
            args["chunks"] = list(chunks)
        if blocks:
            args["blocks"] = list(blocks)
        if metadata is not None:
            args["metadata"] = metadata
        try:
            await slack_call(
                "chat.stopStream",
                self._client.chat_stopStream(channel=thread.channel_id, ts=segment.ts, **args),
            )
        except SlackCallFailed as exc:
            if self._refusal(exc):
                return False
            if exc.error not in ENDED:
                raise
            await self._mark_closed(thread, segment)
            return False
        await self._mark_closed(thread, segment)
        return True

    async def _close_or_defer(
        self, thread: Thread, turn: int, segment: _Segment, status: AgentStatus
    ) -> None:
        """``_close`` now if Slack's budget has a turn, else ``_defer`` (a durable step)."""
        try:
            if not await self._close(thread, segment, status, budget=_NOW):
                await self.set_status(thread, status, budget=_NOW)
        except _NoTurn:
            await self._defer(thread, turn, status)

    # ----- segments in the outbox ----------------------------------------------------

    async def _opened(self, thread: Thread, turn: int) -> _Segment | None:
        """The turn's open segment with its ts, or None. A segment whose start is recorded
        but not its ts is being started (by another process: its ``chat.startStream`` is
        in flight) or its starter died: its ts is awaited for ``STARTING_WAIT_S``, then
        the segment is taken as never used and closed (Slack ends an orphan stream after
        its lifetime). So no process closes, or opens a second stream beside, a stream
        another one is starting."""
        segment = await self._open_segment(thread, turn)
        if segment is None or segment.ts is not None:
            return segment
        deadline = time.monotonic() + STARTING_WAIT_S
        while time.monotonic() < deadline:
            await asyncio.sleep(STARTING_POLL_S)
            if (ts := await self._poster.recorded_ts(segment.key)) is not None:
                segment.ts = ts
                return segment
            if segment.closed or await self._poster.recorded_intent(f"{segment.key}/stop"):
                segment.closed = True
                return None
        await self._mark_closed(thread, segment)
        return None

    async def _open_segment(self, thread: Thread, turn: int) -> _Segment | None:
        """The turn's open segment (possibly not yet given a ts), or None."""
        known = self._segments.get((thread.session_id, turn))
        if known is not None:
            return None if known.closed else known
        number = await self._next_number(thread.session_id, turn) - 1
        if number < 0:
            return None
        key = stream_key(thread.session_id, turn, number)
        closed = await self._poster.recorded_intent(f"{key}/stop")
        segment = _Segment(key, number, await self._poster.recorded_ts(key), closed)
        self._segments[(thread.session_id, turn)] = segment
        return None if closed else segment

    async def _reopens_nothing(self, session_id: str, turn: int, tail: bool) -> bool:
        """Whether chunks of a turn must not open a stream: the turn's answer was posted
        (its stream, if any, is closed), or its stream closed and they came before an
        approval request (``tail``)."""
        if await self._poster.recorded_intent(_answered(session_id, turn)):
            return True  # a stream opened now would outlive the answer (and cost a turn)
        return tail and await self._next_number(session_id, turn) > 0

    async def _next_number(self, session_id: str, turn: int) -> int:
        known = self._segments.get((session_id, turn))
        number = known.number + 1 if known is not None else 0
        while await self._poster.recorded_intent(stream_key(session_id, turn, number)):
            number += 1
        return number

    async def _mark_closed(self, thread: Thread, segment: _Segment) -> None:
        segment.closed = True
        await self._poster.record_intent(
            thread, f"{segment.key}/stop", kind="stream_stop", payload_json="{}"
        )

    async def _turn(self, session_id: str, turn: int | None) -> int:
        """``turn``, else the latest turn this process streamed for the session, else the
        latest any process did (read from the outbox: ``<session>:stream:<t>.0``)."""
        if turn is not None:
            return turn
        lane = self._lanes.get(session_id)
        if lane is not None:
            return lane.turn
        latest, candidate, misses = 0, 0, 0
        while misses < 2:  # turns count from 0 or 1; a turn without steps has no stream
            if await self._poster.recorded_intent(stream_key(session_id, candidate, 0)):
                latest, misses = candidate, 0
            else:
                misses += 1
            candidate += 1
        return latest

    async def _settle(self, session_id: str) -> None:
        """Let this process's progress of the session reach Slack first: the driver
        shows a step's progress in a task of its own, which a few turns of the event
        loop let run (it queues without waiting), then the writer's sends, bounded."""
        for _turn in range(SETTLE_LOOP_TURNS):
            await asyncio.sleep(0)
        lane = self._lanes.get(session_id)
        if lane is None or lane.task is None:
            return
        loop = asyncio.get_running_loop()
        give_up = loop.time() + DRAIN_BEFORE_CLOSE_S
        # not while a writer waits for Slack's budget: the step goes on, and what is
        # pending goes with the stream's close (issue #32: no step waits on the budget)
        while not lane.task.done() and not self._budgets.contended() and loop.time() < give_up:
            await asyncio.wait({lane.task}, timeout=SETTLE_POLL_S)

    # ----- refusals and warnings -----------------------------------------------------

    def _refusal(self, exc: SlackCallFailed) -> bool:
        """Turn the surface off when ``exc`` says the workspace refuses it; True then."""
        if exc.error not in REFUSALS:
            return False
        if self.refused is None:
            self.refused = f"{exc.method}: {exc.error}"
            logger.warning(
                "Slack refuses the agent surface here (%s): back to the status message",
                self.refused,
            )
        return True

    def _warn_once(self, answer: Any) -> None:
        data = getattr(answer, "data", answer)
        metadata = data.get("response_metadata") or {} if isinstance(data, dict) else {}
        warnings = set(metadata.get("warnings") or ())
        if isinstance(data, dict) and data.get("warning"):
            warnings.update(str(data["warning"]).split(","))
        for warning in warnings - self._warned:
            self._warned.add(warning)
            logger.warning("agents.sessions.setStatus warns %s", warning)

    async def _team(self) -> str:
        if self._team_id is None:
            answer = await slack_call("auth.test", self._client.auth_test())
            self._team_id = str(answer.get("team_id") or "")
        return self._team_id


def _deferred(session_id: str, turn: int) -> str:
    """The outbox key of ``turn``'s close left to the writer (``DEFERRED_KIND``)."""
    return f"{session_id}:stream:{turn}/deferred"


def _closed(session_id: str, turn: int) -> str:
    """The outbox key saying the session was closed (``stop``) in ``turn``: a status some
    process still waits to send for that turn is void."""
    return f"{session_id}:stream:{turn}/closed"


def _answered(session_id: str, turn: int) -> str:
    """The outbox key saying the turn's answer was posted: no stream of it opens again."""
    return f"{session_id}:stream:{turn}/answered"


def incident_title(text: str) -> str:
    """A session title from the incident's first words (one line, at most 80 chars).

    >>> incident_title("<@U1> pods are\\n crashlooping in prod")
    'pods are crashlooping in prod'
    """
    words = [w for w in text.split() if not (w.startswith("<@") and w.endswith(">"))]
    return _title(" ".join(words)) or "Incident"


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_TITLE_CHARS else line[: MAX_TITLE_CHARS - 1] + "…"


_WAIT, _NOW, _TAKEN = "wait", "now", "taken"
"""How a call gets its turn of the method's budget: waits for it (the writer), takes one
only if free now (a durable step: ``_NoTurn`` otherwise), or the caller took it."""


async def _take(budget: CallBudget, how: str) -> None:
    """A turn of ``budget`` as ``how`` says (``_WAIT``, ``_NOW``, ``_TAKEN``).

    Raises:
        _NoTurn: ``_NOW`` and the budget has no turn free now.
    """
    if how == _TAKEN:
        return
    if how == _NOW:
        if not await budget.take_now():
            raise _NoTurn
        return
    await budget.take()
