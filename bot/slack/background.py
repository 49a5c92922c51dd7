"""Work a Slack listener starts after its ack: tracked tasks that log their failures.

Slack wants an answer within 3 s (docs.slack.dev, "Acknowledge the event"), so a
listener records what it must and returns; the rest (enqueueing, replies, fetching a
thread's history, opening a modal) runs here. The event loop holds only weak
references to tasks, so they are kept in a set until done; ``drain`` waits for them
(tests, shutdown).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger(__name__)


class Background:
    """A set of running tasks; each failure is logged with its ``name``, never raised."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> None:
        """Start ``work`` now (must be called on the running loop)."""
        task = asyncio.get_running_loop().create_task(self._logged(work, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def pending(self) -> int:
        """How many tasks are still running."""
        return len(self._tasks)

    async def drain(self, *, timeout_s: float = 10.0) -> None:
        """Wait until every task (including ones they start) has finished.

        Raises:
            TimeoutError: tasks still ran after ``timeout_s``.
        """
        async with asyncio.timeout(timeout_s):
            while self._tasks:
                await asyncio.gather(*self._tasks)

    async def cancel(self) -> None:
        """Cancel every running task and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    async def _logged(work: Coroutine[Any, Any, None], name: str) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("background work %s failed", name)
