"""The thread's view of a session: one status message per turn, and the answer.

Implements the step driver's ``ThreadPoster`` over ``SlackPoster``: the status
message of a turn is posted once (outbox key ``<session>:status:<turn>``) and then
updated with ``chat.update``; the answer goes through the outbox too, so neither is
ever posted twice. Status messages are written by the process's ``StatusBoard``, off
the step: showing progress never waits for Slack (coalesced, the latest view wins, a
turn's final view first). When input arrives mid-turn the next turn gets a new status
message and the previous one is closed (no "Working", no Stop); a turn that had ended
(answered, stopped, failed) keeps its final view. A finished turn's status says so: no
step line left over ("Writing the answer…"), no todo in progress. A turn that answers at
its first step gets no status message: its answer is its one message (a status posted
then would land below the answer, saying "Done (0s)").
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace

from bot.slack.agent_surface import AgentStatus, AgentSurface, incident_title
from bot.slack.approval_messages import render_approval
from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import (
    InlineAnswer,
    Progress,
    SlackMessage,
    long_work_lines,
    notice,
    render_answer,
    render_status,
)
from bot.slack.spend import checkpoint_spend
from bot.slack.status_board import StatusBoard
from bot.slack.stream_chunks import approval_chunk, step_chunks
from harness import (
    Answered,
    ApprovalRequested,
    Checkpoint,
    Event,
    InputGiven,
    ModelResponded,
    Notice,
    NoticeTopic,
    PendingApproval,
    Todo,
    ToolIntent,
    holds_long_work,
    waits_mid_turn,
)


def _step_line(events: Sequence[Event], fallback: str | None) -> str | None:
    for event in reversed(events):
        if isinstance(event, ToolIntent):
            return f"Running `{event.summary}`" if event.name == "Bash" else event.summary
        if isinstance(event, ModelResponded):
            if event.tool_calls and (said := (event.text or event.thinking).strip()):
                return _head(said)  # the model's note between tool calls (often thinking)
            return "Thinking…" if event.tool_calls else "Writing the answer…"
        if isinstance(event, Notice) and event.topic is NoticeTopic.INPUT:
            return event.text  # a pasted message was cut to the size bound
        if isinstance(event, Notice) and event.topic is NoticeTopic.SANDBOX_REPLACED:
            return "The sandbox was replaced; continuing in a new one"
    return fallback


def _head(text: str, max_chars: int = 300) -> str:
    """The first paragraph of ``text``, at most ``max_chars`` characters, on one line."""
    first = " ".join(text.split("\n\n", 1)[0].split())
    return first if len(first) <= max_chars else first[: max_chars - 1] + "…"


def _todos(cp: Checkpoint) -> tuple[Todo, ...]:
    return tuple(cp.todos)


CONTINUED_STEP = "New input arrived: continued in the status message below"
FAILED_STEP = "The session failed: the message below says why"
THINKING_REFRESH_S = 60.0
"""How long a turn's "is thinking…" status is taken to stand before it is set again.
Slack removes it after two minutes without a message (``assistant.threads.setStatus``:
"A two minute timeout applies"), and a post in the thread clears it; within a turn the
only post is the status message, made before the status is set."""
_THINKING_MEMO_SIZE = 4096


class ThreadReporter:
    """Status message and answer of each session's thread (see the module docstring).

    With ``model`` (the model id the sessions use), the status line shows the session's
    tokens and their cost at that model's price. ``board`` writes the status messages
    (default: one of its own over ``poster``). With ``surface`` (Slack's agent surface)
    a turn is an agent session and a streamed message instead, while the workspace
    takes them (``AgentSurface.available``); where it refuses, this status-message path.
    """

    def __init__(
        self,
        poster: SlackPoster,
        *,
        model: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        board: StatusBoard | None = None,
        surface: AgentSurface | None = None,
    ) -> None:
        """``clock``: monotonic seconds, for ``THINKING_REFRESH_S``."""
        self._poster = poster
        self.surface = surface
        self._model = model
        self._clock = clock
        self.board = board or StatusBoard(poster)
        self._thinking: OrderedDict[tuple[str, int], float] = OrderedDict()

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
        """Post the answer once per ``key``; returns the first message's ts. On the agent
        surface the answer ends the turn's stream (its blocks below the streamed steps)
        and the session is ``active``, or ``suspended`` when ``checkpoint`` (the session's,
        before the answer is posted) holds a wake-up or background work it then waits for
        (``harness.holds_long_work``); a turn without a stream gets its status here,
        titled from the ``checkpoint``'s incident when the session is new."""
        thread = Thread(session_id, channel_id, thread_ts)
        if self._streaming():
            assert self.surface is not None
            parked = checkpoint is not None and holds_long_work(checkpoint)
            status = AgentStatus.SUSPENDED if parked else AgentStatus.ACTIVE
            rendered = render_answer(markdown)
            one = rendered.messages[0] if isinstance(rendered, InlineAnswer) else None
            single = (
                one if isinstance(rendered, InlineAnswer) and len(rendered.messages) == 1 else None
            )
            turn = checkpoint.turns if checkpoint is not None else None  # the pushes' turn
            ts = await self.surface.finish(
                thread, key=key, message=single, status=status, turn=turn
            )
            if ts is not None:
                return ts
            posted = await self._poster.post_answer(thread, key, markdown)
            title, initiator = "", None
            if checkpoint is not None:
                title, initiator = _incident(checkpoint), checkpoint.requester.user_id or None
            await self.surface.answered(
                thread, key=key, status=status, title=title, initiator=initiator
            )
            return posted.message_ts[0] if posted.message_ts else ""
        posted = await self._poster.post_answer(thread, key, markdown)
        self._clear_thinking(thread)
        return posted.message_ts[0] if posted.message_ts else ""

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
        """Post the approval message with its buttons once per ``key``; returns its ts."""
        thread = Thread(session_id, channel_id, thread_ts)
        message = render_approval(approval, session_id=session_id, requester_id=requester_id)
        if self._streaming():
            assert self.surface is not None
            waiting = approval_chunk(approval.tool_use_id, approval.action, approval.reason)
            await self.surface.suspend(thread, chunks=[waiting])
            return await self._poster.post(thread, key, message, kind="approval")
        ts = await self._poster.post(thread, key, message, kind="approval")
        self._clear_thinking(thread)
        return ts

    async def show_decision(
        self, *, session_id: str, channel_id: str, approval: PendingApproval, requester_id: str
    ) -> None:
        """Update the approval message: buttons gone, who decided and when (by the board)."""
        if not approval.message_ts:
            return
        message = render_approval(approval, session_id=session_id, requester_id=requester_id)
        thread = Thread(session_id, channel_id, "")
        self.board.show_at(thread, approval.message_ts, message, final=True)

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        """Hand the turn's status from a committed step's events to the board; a final
        one is first recorded in the outbox (one database write, no Slack call). On the
        agent surface, the step's chunks go to the turn's stream, unless the step parked
        the session: ``show_parked`` showed them then, before the commit."""
        thread = Thread(session_id, channel_id, thread_ts)
        finished = any(isinstance(e, Answered) for e in events)
        if self._streaming():
            assert self.surface is not None
            if _parks(checkpoint, events):
                return
            self.surface.push(
                thread,
                turn=checkpoint.turns,
                step=checkpoint.steps,
                chunks=step_chunks(events, checkpoint.todos, checkpoint.unanswered_calls()),
                title=_incident(checkpoint),
                initiator=checkpoint.requester.user_id or None,
                tail=_waits_for_approval(checkpoint, events),
            )
            return
        step = None if finished else _step_line(events, "Working…")
        key = f"{session_id}:status:{checkpoint.turns}"
        spend = checkpoint_spend(checkpoint, self._model) if self._model else None
        long_work = long_work_lines(
            checkpoint.tasks, checkpoint.wakeup, now_s=time.time(), agents=checkpoint.agents
        )
        progress = Progress(session_id, step, _todos(checkpoint), 0.0, finished, spend, long_work)
        previous = f"{session_id}:status:{checkpoint.turns - 1}" if checkpoint.turns > 0 else None
        if finished and not long_work and any(isinstance(e, InputGiven) for e in events):
            # the turn began and answered in this one step: its answer is its message (a
            # status posted now would come after it); an earlier turn still shown as
            # running ends here too
            if previous is not None:
                done = Progress(session_id, None, finished=True)
                await self.board.close(thread, previous, _view(done))
            return
        if finished:
            await self.board.record_final(thread, key, _view(progress))
        close = None
        if previous is not None:
            closed = Progress(session_id, CONTINUED_STEP, finished=True)
            close = (previous, _view(closed))
        self.board.show(thread, key, _view(progress), final=finished, close=close)
        if not finished:
            self._show_thinking(thread, checkpoint.turns)

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
        """The step ``key`` (not committed yet) parks the session mid-turn: on the agent
        surface, the turn's stream ends ``suspended`` with the step's chunks last, once
        per ``key``; the status message shows it after the commit, as any step.

        Raises:
            DatabaseUnavailable: the outbox could not be reached (the step is retried).
        """
        if not self._streaming():
            return
        assert self.surface is not None
        await self.surface.park(
            Thread(session_id, channel_id, thread_ts),
            key=key,
            turn=checkpoint.turns,
            chunks=step_chunks(events, checkpoint.todos, checkpoint.unanswered_calls()),
            title=_incident(checkpoint),
            initiator=checkpoint.requester.user_id or None,
        )

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
        """The step ``key`` picks the session up from a wait (or starts it): on the agent
        surface the session is ``processing`` (Slack's Stop shown) before the step's model
        call or tool, once per ``key``; a new session is titled from its incident
        (``checkpoint.title``, or the first of ``inputs``). The status message shows the
        turn from its first step's progress, as before.

        Raises:
            DatabaseUnavailable: the outbox could not be reached (the step is retried).
        """
        if not self._streaming():
            return
        assert self.surface is not None
        await self.surface.resume(
            Thread(session_id, channel_id, thread_ts),
            key=key,
            step=checkpoint.steps,
            title=_incident(checkpoint, inputs),
            initiator=checkpoint.requester.user_id or None,
        )

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
        """The session failed: post ``text`` as a notice once per ``key``, and end the
        turn's status (its message's final view says Failed, with no live Stop; on the
        agent surface the agent session is closed). A turn with no status message yet
        gets none: the notice says it all."""
        thread = Thread(session_id, channel_id, thread_ts)
        await self._poster.post(thread, key, notice(f":x: {text}"))
        self._clear_thinking(thread)
        if self._streaming():
            assert self.surface is not None
            await self.surface.end(thread, AgentStatus.CLOSED)
            return
        status_key = f"{session_id}:status:{checkpoint.turns}"
        shown = self.board.holds(session_id, status_key)
        if not shown and await self._poster.recorded_ts(status_key) is None:
            return
        failed = Progress(session_id, FAILED_STEP, _todos(checkpoint), finished=True, failed=True)
        await self.board.record_final(thread, status_key, _view(failed))
        self.board.show(thread, status_key, _view(failed), final=True)

    def _streaming(self) -> bool:
        """Whether this turn goes to Slack's agent surface (else the status message)."""
        return self.surface is not None and self.surface.available

    async def end_session(self, thread: Thread) -> None:
        """The session ended (stopped): its agent session is ``closed``."""
        if self._streaming():
            assert self.surface is not None
            await self.surface.end(thread, AgentStatus.CLOSED)

    def _show_thinking(self, thread: Thread, turn: int) -> None:
        """Set the "is thinking…" status, unless this turn set it under
        ``THINKING_REFRESH_S`` ago (one Slack call a minute, not one a step)."""
        key, now = (thread.session_id, turn), self._clock()
        shown = self._thinking.get(key)
        if shown is not None and now - shown < THINKING_REFRESH_S:
            return

        def failed() -> None:  # tried again at the next step
            self._thinking.pop(key, None)

        self.board.set_thinking(thread, failed=failed)
        self._thinking[key] = now
        self._thinking.move_to_end(key)
        if len(self._thinking) > _THINKING_MEMO_SIZE:
            self._thinking.popitem(last=False)

    def _clear_thinking(self, thread: Thread) -> None:
        """Clear the status (the answer or a question was posted): the next turn sets it."""
        for key in [k for k in self._thinking if k[0] == thread.session_id]:
            del self._thinking[key]
        self.board.set_thinking(thread, "")


def _parks(cp: Checkpoint, events: Sequence[Event]) -> bool:
    """Whether the committed step left the session waiting mid-turn (the driver calls
    ``show_parked`` before committing such a step)."""
    return not any(isinstance(e, Answered) for e in events) and waits_mid_turn(cp)


def _waits_for_approval(cp: Checkpoint, events: Sequence[Event]) -> bool:
    """Whether the step's next step is an approval request (which closes the stream)."""
    pending = cp.approval is not None and cp.approval.pending
    return pending or any(isinstance(e, ApprovalRequested) for e in events)


def _incident(cp: Checkpoint, inputs: Sequence[str] = ()) -> str:
    """The session's title: the incident's own (``cp.title``: an alert's), else its first
    user message (what was asked) without the harness's ``<system-reminder>`` blocks, else
    the first of ``inputs`` (a session whose first message is not written yet)."""
    if cp.title.strip():
        return incident_title(cp.title)
    for message in cp.messages:
        if message.role == "user":
            content = message.to_dict()["content"]
            texts = [
                str(b.get("text", ""))
                for b in content
                if b.get("type") == "text"
                and not str(b.get("text", "")).startswith("<system-reminder>")
            ]
            if any(texts):
                return incident_title(" ".join(texts))
    return next((incident_title(t) for t in inputs if t.strip()), "Incident")


def _view(progress: Progress) -> Callable[[float], SlackMessage]:
    """``progress`` rendered with the seconds since its message was posted."""
    return lambda elapsed_s: render_status(replace(progress, elapsed_s=elapsed_s))
