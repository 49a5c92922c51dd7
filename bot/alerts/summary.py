"""The storm summary thread: alerts over the cap, listed with their counts (``StormSummaries``).

Its root message is the tally of every problem folded into it (``AlertStore.folded``),
posted once by the call whose decision opened the thread, then updated at most every
``REFRESH_S`` (a storm folds hundreds of alerts: one tally query per refresh, not per
alert), through the poster's coalesced status updates.
"""

from __future__ import annotations

import asyncio
import logging

from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts.render import summary_tally
from bot.errors import slack_call
from bot.slack.poster import SlackPoster
from memory_store import AlertStore, AlertThread

logger = logging.getLogger(__name__)

REFRESH_S = 1.0
"""Least time between two tally queries of one storm summary."""


class StormSummaries:
    """The storm summary threads this process posts and refreshes."""

    def __init__(
        self, store: AlertStore, client: AsyncWebClient, poster: SlackPoster, max_open: int
    ) -> None:
        self._store = store
        self._client = client
        self._poster = poster
        self._max_open = max_open
        self._locks: dict[str, asyncio.Lock] = {}
        self._dirty: set[str] = set()
        self._refreshers: dict[str, asyncio.Task[None]] = {}

    async def fold(self, summary: AlertThread, *, opened_it: bool) -> str | None:
        """An alert was folded into ``summary``: post its root (``opened_it``) or refresh
        its tally soon; returns the thread's ts (None: another process has not posted it
        yet; its tally will count this alert).

        Raises:
            SlackCallFailed: the root could not be posted (the thread stays to be resumed).
        """
        async with self._locks.setdefault(summary.id, asyncio.Lock()):
            thread_ts = summary.thread_ts or await self._posted_ts(summary.id)
            if thread_ts is None and opened_it:
                tally = summary_tally(self._max_open, await self._store.folded(summary.id))
                posted = await slack_call(
                    "chat.postMessage",
                    self._client.chat_postMessage(
                        channel=summary.channel_id, text=tally.text, blocks=list(tally.blocks)
                    ),
                )
                thread_ts = str(posted["ts"])
                await self._store.opened(summary.id, thread_ts=thread_ts, session_id=None)
            elif thread_ts is not None:
                self._refresh_soon(summary.id, summary.channel_id, thread_ts)
            else:
                logger.info("storm summary %s not posted yet; alert counted there", summary.id)
        return thread_ts

    async def flush(self) -> None:
        """Wait until every summary shows its last tally."""
        while self._refreshers:
            await asyncio.gather(*self._refreshers.values(), return_exceptions=True)
        await self._poster.flush()

    def _refresh_soon(self, summary_id: str, channel_id: str, ts: str) -> None:
        self._dirty.add(summary_id)
        if summary_id not in self._refreshers:
            task = asyncio.create_task(self._refresh(summary_id, channel_id, ts))
            self._refreshers[summary_id] = task

    async def _refresh(self, summary_id: str, channel_id: str, ts: str) -> None:
        try:
            while summary_id in self._dirty:
                self._dirty.discard(summary_id)
                folded = await self._store.folded(summary_id)
                await self._poster.update_status(
                    channel_id, ts, summary_tally(self._max_open, folded)
                )
                await asyncio.sleep(REFRESH_S)  # pacing, as the poster's own update interval
        except Exception:  # the database or Slack away: the next fold tries again
            logger.exception("storm summary %s not refreshed", summary_id)
        finally:
            del self._refreshers[summary_id]

    async def _posted_ts(self, thread_id: str) -> str | None:
        found = await self._store.thread(thread_id)
        return None if found is None else found.thread_ts
