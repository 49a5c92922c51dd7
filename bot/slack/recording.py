"""Recording inputs before the ack, with bounded concurrency and a deadline (backpressure).

Slack retries an event it has not seen acked within 3 s (Events API docs: "Respond to
events within 3 seconds"). Under a burst, starting every recording at once only
queues them all on the database pool and slows each one down; so at most
``max_concurrent`` recordings run at once and the rest wait their turn, each event
giving up (unacked: Slack retries it later) if no turn came within ``budget_s`` of its
arrival. A recording that started is never cancelled mid-statement (that would
break its pooled connection and cost a reconnect under load): when it outlives the
budget its event stays unacked, and the recording finishes on its own and does its
follow-up then; Slack's retry is a duplicate by then, dropped by the dedupe.
"""

from __future__ import annotations

import asyncio
import logging

from bot.slack.background import Background
from bot.slack.inbound import InboundMessage
from bot.slack.intake import FollowUp, Intake
from memory_store import DatabaseUnavailable

logger = logging.getLogger(__name__)

MAX_CONCURRENT_INPUTS = 8
RECORD_BUDGET_S = 2.5  # Slack wants the ack within 3 s; unrecorded → unacked → retried


class InputNotRecorded(Exception):
    """An event the database could not record in time; left unacked for Slack to retry."""

    def __init__(self, event_id: str) -> None:
        super().__init__(f"event {event_id} not recorded, so not acked: Slack retries it")
        self.event_id = event_id


class Recorder:
    """``Intake.receive`` for the listeners: bounded, within a budget, never cancelled.

    Args:
        intake: decides, dedupes and records.
        background: runs the follow-up of a recording that outlived its budget.
        max_concurrent: recordings at once (≥ 1; about the database pool's size).
        budget_s: from arrival to recorded, waiting included (< Slack's 3 s).
    """

    def __init__(
        self,
        intake: Intake,
        background: Background,
        *,
        max_concurrent: int = MAX_CONCURRENT_INPUTS,
        budget_s: float = RECORD_BUDGET_S,
    ) -> None:
        if max_concurrent < 1 or not budget_s > 0:
            raise ValueError("max_concurrent must be ≥ 1 and budget_s positive")
        self._intake = intake
        self._background = background
        self._slots = asyncio.Semaphore(max_concurrent)
        self._budget_s = budget_s

    async def record(self, message: InboundMessage, *, event_id: str) -> FollowUp | None:
        """Record ``message``; returns the follow-up to run after the ack.

        Raises:
            InputNotRecorded: no turn within the budget, the recording outlived it, or
                the database stayed unavailable (the event must not be acked).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._budget_s
        try:
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        except TimeoutError as exc:
            logger.warning("event %s: no recording turn within the budget", event_id)
            raise InputNotRecorded(event_id) from exc
        waiter: asyncio.Future[FollowUp | None] = loop.create_future()
        self._background.spawn(
            self._recording(message, waiter, event_id), name=f"recording {event_id}"
        )
        try:
            async with asyncio.timeout_at(deadline):
                return await asyncio.shield(waiter)
        except (TimeoutError, DatabaseUnavailable) as exc:
            raise InputNotRecorded(event_id) from exc
        finally:
            if not waiter.done():  # the recording goes on; it runs its own follow-up
                waiter.cancel()

    async def _recording(
        self, message: InboundMessage, waiter: asyncio.Future[FollowUp | None], event_id: str
    ) -> None:
        try:
            work = await self._intake.receive(message)
        except Exception as exc:
            if not waiter.done():
                waiter.set_exception(exc)
            else:
                logger.exception("event %s: a late recording failed", event_id)
            return
        finally:
            self._slots.release()
        if not waiter.done():
            waiter.set_result(work)
        elif work is not None:
            logger.info("event %s: recorded late; its follow-up runs now", event_id)
            self._background.spawn(self._intake.follow_up(work), name=f"late event {event_id}")
