"""An incident's record as the harness serves it: its timeline, built on each request.

``IncidentRecord`` is what the ``/incident/timeline.md`` file, ``/agent timeline`` and the
export read: one query over the incident's rows (``memory_store.IncidentLog``), turned into
entries (``timeline``) and rendered (``render``). Nothing is cached: it is regenerated on
every read, so it always shows the event log as it is. Building and rendering are CPU work
that grows with the incident (thousands of events), so they run off the event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from harness.record.render import timeline_markdown
from harness.record.timeline import Timeline, build_timeline
from memory_store import Clock, IncidentLog, utc_now

TIMELINE_PATH = "/timeline.md"
"""The timeline's path under ``/incident`` (read-only, generated)."""


@dataclass(frozen=True)
class IncidentRecord:
    """Timelines over ``log``; ``workspace_url`` (``auth.test``'s ``url``) makes permalinks
    (None: entries carry none)."""

    log: IncidentLog
    workspace_url: str | None = None
    clock: Clock = utc_now

    async def timeline(
        self, org_id: str, channel_id: str, *, thread_ts: str | None = None
    ) -> Timeline:
        """The incident's timeline (a channel, or one thread of it).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        found = await self.log.rows(org_id, channel_id, thread_ts=thread_ts)
        return await asyncio.to_thread(
            build_timeline,
            org_id,
            channel_id,
            found,
            workspace_url=self.workspace_url,
            thread_ts=thread_ts,
        )

    async def timeline_markdown(
        self, org_id: str, channel_id: str, *, thread_ts: str | None = None
    ) -> str:
        """``timeline`` rendered as Markdown, stamped with the time it was made."""
        found = await self.timeline(org_id, channel_id, thread_ts=thread_ts)
        return await asyncio.to_thread(timeline_markdown, found, generated_at=self.clock())
