"""The thread's view of a session: one status message per turn, and the answer.

Implements the step driver's ``ThreadPoster`` over ``SlackPoster``: the status
message of a turn is posted once (outbox key ``<session>:status:<turn>``) and then
updated with ``chat.update`` (throttled, latest state wins); the answer goes through
the outbox too, so neither is ever posted twice. When input arrives mid-turn the next
turn gets a new status message and the previous one is closed (no "Working", no Stop).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from bot.slack.approval_messages import render_approval
from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import Progress, long_work_lines, render_status
from bot.slack.spend import checkpoint_spend
from harness import (
    Answered,
    Checkpoint,
    Event,
    ModelResponded,
    Notice,
    NoticeTopic,
    PendingApproval,
    Todo,
    ToolIntent,
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
THINKING_REFRESH_S = 60.0
"""How long a turn's "is thinking…" status is taken to stand before it is set again.
Slack removes it after two minutes without a message (``assistant.threads.setStatus``:
"A two minute timeout applies"), and a post in the thread clears it; within a turn the
only post is the status message, made before the status is set."""
_THINKING_MEMO_SIZE = 4096


class ThreadReporter:
    """Status message and answer of each session's thread (see the module docstring).

    With ``model`` (the model id the sessions use), the status line shows the session's
    tokens and their cost at that model's price.
    """

    def __init__(
        self,
        poster: SlackPoster,
        *,
        model: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: monotonic seconds, for ``THINKING_REFRESH_S``."""
        self._poster = poster
        self._model = model
        self._clock = clock
        self._thinking: OrderedDict[tuple[str, int], float] = OrderedDict()

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        """Post the answer once per ``key``; returns the first message's ts."""
        thread = Thread(session_id, channel_id, thread_ts)
        posted = await self._poster.post_answer(thread, key, markdown)
        await self._clear_thinking(thread)
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
        ts = await self._poster.post(thread, key, message, kind="approval")
        await self._clear_thinking(thread)
        return ts

    async def show_decision(
        self, *, session_id: str, channel_id: str, approval: PendingApproval, requester_id: str
    ) -> None:
        """Update the approval message: buttons gone, who decided and when."""
        if not approval.message_ts:
            return
        message = render_approval(approval, session_id=session_id, requester_id=requester_id)
        await self._poster.update_status(channel_id, approval.message_ts, message, final=True)

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        """Post or update the turn's status message from a committed step's events."""
        thread = Thread(session_id, channel_id, thread_ts)
        finished = any(isinstance(e, Answered) for e in events)
        step = _step_line(events, None if finished else "Working…")
        key = f"{session_id}:status:{checkpoint.turns}"
        progress = Progress(session_id, step, _todos(checkpoint), 0.0, finished)
        is_new = await self._poster.recorded_ts(key) is None
        ts = await self._poster.post(thread, key, render_status(progress), kind="status")
        if is_new and checkpoint.turns > 0:
            await self._close_earlier(session_id, channel_id, checkpoint.turns - 1)
        elapsed_s = max(0.0, time.time() - float(ts)) if ts else 0.0
        spend = checkpoint_spend(checkpoint, self._model) if self._model else None
        long_work = long_work_lines(
            checkpoint.tasks, checkpoint.wakeup, now_s=time.time(), agents=checkpoint.agents
        )
        progress = Progress(
            session_id, step, _todos(checkpoint), elapsed_s, finished, spend, long_work
        )
        await self._poster.update_status(channel_id, ts, render_status(progress), final=finished)
        if not finished:
            await self._show_thinking(thread, checkpoint.turns)

    async def _show_thinking(self, thread: Thread, turn: int) -> None:
        """Set the "is thinking…" status, unless this turn set it under
        ``THINKING_REFRESH_S`` ago (one Slack call a minute, not one a step)."""
        key, now = (thread.session_id, turn), self._clock()
        shown = self._thinking.get(key)
        if shown is not None and now - shown < THINKING_REFRESH_S:
            return
        if await self._poster.set_thinking(thread):
            self._thinking[key] = now
            self._thinking.move_to_end(key)
            if len(self._thinking) > _THINKING_MEMO_SIZE:
                self._thinking.popitem(last=False)

    async def _clear_thinking(self, thread: Thread) -> None:
        """Clear the status (the answer or a question was posted): the next turn sets it."""
        for key in [k for k in self._thinking if k[0] == thread.session_id]:
            del self._thinking[key]
        await self._poster.set_thinking(thread, "")

    async def _close_earlier(self, session_id: str, channel_id: str, turn: int) -> None:
        """The previous turn's status message: no longer "Working", no Stop button (a
        reply arrived mid-turn and the work goes on under the new status message)."""
        ts = await self._poster.recorded_ts(f"{session_id}:status:{turn}")
        if ts is None:
            return
        elapsed_s = max(0.0, time.time() - float(ts))
        closed = Progress(session_id, CONTINUED_STEP, elapsed_s=elapsed_s, finished=True)
        await self._poster.update_status(channel_id, ts, render_status(closed), final=True)
