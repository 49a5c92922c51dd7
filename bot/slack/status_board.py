"""Status messages written off the step: one writer per process, coalesced, finals first.

A step hands the board the latest view of its turn (``show``) and returns at once, so no
worker thread waits for Slack's ``chat.update`` budget (issue #32.1: under load every
thread did, and steps that needed no Slack call waited for a free thread). The board's
own tasks on the event loop do the Slack part:

- *posting*: a turn's status message is posted through the outbox (never twice), each
  message by its own task, so a new message never waits behind the update budget;
- *updating*: one task takes a turn of the workspace's shared budget, then sends the
  message most due at that moment. Each message keeps only its latest view (progress of
  many sessions is merged into one pending view per message, never queued per step);
  a final view goes before any progress; progress of one message is spaced by
  ``min_interval_s``.

Across processes a turn's steps may run in several workers, each with its board: a final
view is recorded in the outbox (``final_key``) before it is queued, and progress is sent
only while no final is recorded for its message, so a late "Working" with a Stop button
never overwrites "Finished" (issue #26.6).

What the board schedules is a *view*: a function from the seconds since the message was
posted to the message to show. The surface that shows it (today a message updated with
``chat.update``; Slack's streaming surface later) is the poster's part, so both share
this scheduling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from bot.errors import SlackCallFailed
from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import SlackMessage
from memory_store import OutboxItem

logger = logging.getLogger(__name__)

View = Callable[[float], SlackMessage]
"""A status message as a function of the seconds since it was posted."""


FINAL_KIND = "status_final"
"""The outbox kind of a status message's final view (``final_key``)."""


def final_key(status_key: str) -> str:
    """The outbox key recording that ``status_key``'s message reached its final view."""
    return f"{status_key}/final"


@dataclass
class _Message:
    """One status message: where it is, its ts once posted, its latest unsent view."""

    thread: Thread
    key: str | None  # outbox key (None: a message posted elsewhere, ``ts`` given)
    ts: str | None = None
    view: View | None = None
    final: bool = False
    sent_at: float | None = None
    posting: asyncio.Task[None] | None = None
    close_key: str | None = None
    close_view: View | None = None


class StatusBoard:
    """The status messages of this process's sessions (see the module docstring).

    Args:
        poster: posts and updates; its ``update_budget`` is the workspace's budget.
        min_interval_s: least time between two progress updates of one message.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        poster: SlackPoster,
        *,
        min_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._poster = poster
        self._interval_s = min_interval_s
        self._clock = clock
        self._messages: dict[tuple[str, str], _Message] = {}
        self._due = asyncio.Event()
        self._updater: asyncio.Task[None] | None = None
        self._side: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    # ----- what steps call (none of it waits for Slack) -------------------------------

    async def record_final(self, thread: Thread, status_key: str, view: View) -> None:
        """Record in the outbox that ``status_key``'s message is final, with the final
        message (one database write; call before ``show`` of a final view). A view no
        board sent (its worker stopped first) is sent later by ``resend``.

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        ts = await self._poster.recorded_ts(status_key)
        message = view(max(0.0, time.time() - float(ts)) if ts else 0.0)
        payload = json.dumps({"text": message.text, "blocks": list(message.blocks)})
        await self._poster.record_intent(
            thread, final_key(status_key), kind=FINAL_KIND, payload_json=payload
        )

    def resend(self, finals: Iterable[OutboxItem]) -> None:
        """Send the final views recorded (``record_final``) but never sent, each once its
        status message is known; a message this board already holds is left to it."""
        for item in finals:
            status_key = item.key.removesuffix("/final")
            if item.kind != FINAL_KIND or (item.session_id, status_key) in self._messages:
                continue
            payload = json.loads(item.payload_json)
            message = SlackMessage(text=payload["text"], blocks=tuple(payload["blocks"]))
            thread = Thread(item.session_id, item.channel_id, item.thread_ts)
            self.show(thread, status_key, _constant(message), final=True)

    def show(
        self,
        thread: Thread,
        status_key: str,
        view: View,
        *,
        final: bool = False,
        close: tuple[str, View] | None = None,
    ) -> None:
        """Show ``view`` in the message ``status_key`` (posted first if it is new);
        replaces any view of it not yet sent. ``close``: (the previous turn's status
        key, its final view), sent once when this message is newly posted, unless that
        turn's own final view was recorded (it ended before: answered, stopped, failed)."""
        message = self._messages.setdefault(
            (thread.session_id, status_key), _Message(thread, status_key)
        )
        message.view, message.final = view, message.final or final
        if close is not None and message.ts is None:
            message.close_key, message.close_view = close
        self._schedule(message)

    async def close(self, thread: Thread, status_key: str, view: View) -> None:
        """Give the message ``status_key`` its final ``view``, if it was posted (by any
        process, or is being posted here) and no process recorded a final view of it yet
        (a turn that ended keeps its own); a message never posted stays unposted.

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        held = (thread.session_id, status_key) in self._messages
        if not held and await self._poster.recorded_ts(status_key) is None:
            return
        if await self._final_elsewhere(status_key):
            return
        await self.record_final(thread, status_key, view)
        self.show(thread, status_key, view, final=True)

    def holds(self, session_id: str, status_key: str) -> bool:
        """Whether this board has the message ``status_key`` of ``session_id`` in hand
        (being posted, or a view of it not yet sent)."""
        return (session_id, status_key) in self._messages

    def show_at(self, thread: Thread, ts: str, message: SlackMessage, *, final: bool) -> None:
        """Show ``message`` in the existing message ``ts`` of ``thread`` (an approval's)."""
        entry = self._messages.setdefault((thread.session_id, ts), _Message(thread, None, ts))
        entry.view, entry.final = _constant(message), entry.final or final
        self._schedule(entry)

    def set_thinking(
        self,
        thread: Thread,
        status: str | None = None,
        *,
        failed: Callable[[], None] | None = None,
    ) -> None:
        """Set (or, with ``""``, clear) Slack's "is thinking…" line, in the background;
        ``failed`` is called if Slack did not take it."""

        async def call() -> None:
            shown = await (
                self._poster.set_thinking(thread)
                if status is None
                else self._poster.set_thinking(thread, status)
            )
            if not shown and failed is not None:
                failed()

        self._in_background(call())

    async def drain(self, *, timeout_s: float) -> bool:
        """Wait until every view given so far is sent (or failed); False on timeout."""
        try:
            async with asyncio.timeout(timeout_s):
                while not self._idle.is_set() or self._side:
                    if self._side:
                        await asyncio.wait(set(self._side))
                    await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        """Stop the board's tasks (unsent views are dropped)."""
        tasks = [self._updater, *self._side] + [m.posting for m in self._messages.values()]
        for task in tasks:
            if task is not None:
                task.cancel()
        for task in tasks:
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    # ----- the board's own tasks ------------------------------------------------------

    def _schedule(self, message: _Message) -> None:
        self._idle.clear()
        if message.ts is None and message.posting is None:
            message.posting = asyncio.create_task(self._post(message))
        if self._updater is None or self._updater.done():
            self._updater = asyncio.create_task(self._update_forever())
        self._due.set()

    def _in_background(self, work: Coroutine[Any, Any, object]) -> None:
        task: asyncio.Task[Any] = asyncio.create_task(work)
        self._side.add(task)
        task.add_done_callback(self._side.discard)

    async def _post(self, message: _Message) -> None:
        """Post the message with its current view; close the previous turn's once."""
        assert message.key is not None
        view = message.view
        assert view is not None
        try:
            was_new = await self._poster.recorded_ts(message.key) is None
            ts = await self._poster.post(message.thread, message.key, view(0.0), kind="status")
        except SlackCallFailed as exc:
            logger.warning("status message %s not posted: %s", message.key, exc)
            self._forget(message)
            return
        finally:
            message.posting = None
        message.ts = ts
        if was_new:
            message.sent_at = self._clock()
            if message.view is view and not message.final:
                message.view = None  # the post showed it
        close_key = message.close_key
        if was_new and close_key is not None and message.close_view is not None:
            earlier = await self._poster.recorded_ts(close_key)
            if earlier is not None and not await self._final_elsewhere(close_key):
                self.show_at(message.thread, earlier, message.close_view(0.0), final=True)
        self._due.set()
        self._check_idle()

    async def _update_forever(self) -> None:
        while True:
            message, wait_s = self._next_due()
            if message is None:
                self._check_idle()
                self._due.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._due.wait()
                continue
            await self._poster.update_budget.take()
            message, _ = self._next_due()  # the latest views, once the turn came
            if message is not None:
                await self._send(message)

    def _next_due(self) -> tuple[_Message | None, float | None]:
        """The message to update next (finals first, then the longest waiting), or None
        and how long until one falls due (None: nothing pending)."""
        now, best, soonest = self._clock(), None, None
        for message in self._messages.values():
            if message.view is None or message.ts is None:
                continue
            due_at = 0.0 if message.final else (message.sent_at or 0.0) + self._interval_s
            if due_at > now:
                soonest = due_at - now if soonest is None else min(soonest, due_at - now)
                continue
            if best is None or (message.final, -due_at) > (best[0].final, -best[1]):
                best = (message, due_at)
        return (best[0] if best else None), soonest

    async def _send(self, message: _Message) -> None:
        view, final, ts = message.view, message.final, message.ts
        assert view is not None
        assert ts is not None
        message.view = None
        try:
            if not final and message.key and await self._final_elsewhere(message.key):
                self._forget(message)
                return
            elapsed_s = max(0.0, time.time() - float(ts))
            await self._poster.update_now(message.thread.channel_id, ts, view(elapsed_s))
        except SlackCallFailed as exc:
            logger.warning("status update of %s failed: %s", ts, exc)
        message.sent_at = self._clock()
        if final and message.view is None:
            if message.key is not None:
                await self._poster.record_done(final_key(message.key), ts)
            self._forget(message)

    async def _final_elsewhere(self, status_key: str) -> bool:
        """Whether any process recorded ``status_key``'s final view (this one would
        have marked its message final)."""
        return await self._poster.recorded_intent(final_key(status_key))

    def _forget(self, message: _Message) -> None:
        key = message.key or message.ts or ""
        self._messages.pop((message.thread.session_id, key), None)
        self._check_idle()

    def _check_idle(self) -> None:
        if all(m.view is None and m.posting is None for m in self._messages.values()):
            for key in [k for k, m in self._messages.items() if m.view is None and not m.final]:
                if self._messages[key].ts is not None:
                    del self._messages[key]
            self._idle.set()


def _constant(message: SlackMessage) -> View:
    """A view that is ``message`` whatever the time."""
    return lambda _elapsed_s: message
