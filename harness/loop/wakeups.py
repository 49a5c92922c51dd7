"""When a waiting session is next to be woken by the database (docs/architecture.md §5).

A session that waits holds nothing: no worker, no sandbox. What it waits for with a
deadline (a ``ScheduleWakeup`` time, an approval's expiry) lives in its checkpoint; the
durable layer commits the earliest of them as the wait's ``wake_at``, and the sweeper
then records ``note`` as an input of kind ``wake`` and runs the session again.
"""

from __future__ import annotations

from datetime import UTC, datetime

from harness.approvals.pending import expiry_note
from harness.loop.checkpoint import Checkpoint

WAKE_KIND = "wake"
"""The ``Inbound.kind`` of the input a timed wake-up records."""


def next_wake(cp: Checkpoint) -> tuple[datetime, str] | None:
    """The earliest pending timed wake-up of ``cp`` and the note it delivers (aware
    UTC), or None when nothing in the checkpoint has a deadline.

    >>> from harness.loop.checkpoint import Requester
    >>> next_wake(Checkpoint("s1", "T1", "C1", Requester("U1"))) is None
    True
    """
    candidates: list[tuple[datetime, str]] = []
    if cp.approval is not None and cp.approval.pending:  # unanswered, it expires (§13)
        candidates.append((cp.approval.expires_at, expiry_note(cp.approval.tool_use_id)))
    if cp.wakeup is not None:
        due = datetime.fromtimestamp(cp.wakeup.due_at, UTC)
        candidates.append((due, cp.wakeup.prompt))
    return min(candidates, default=None)
