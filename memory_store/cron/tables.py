"""The ``cron_jobs`` table (made by migration 0013): a session's recurring wake-ups.

One row per job a session made with ``CronCreate``. ``next_due_at`` is when the sweeper
fires it next: firing wakes the (waiting) session with ``prompt`` as an input and, in
the same transaction, moves ``next_due_at`` to the expression's next time after the
firing (a one-shot job, ``recurring`` false, is deleted instead). So a due time fires at
most once however many sweepers race or crash. Rows go with ``stop`` and the session's end.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Index, PrimaryKeyConstraint, String, Table, Text

from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime

cron_jobs = Table(
    "cron_jobs",
    metadata,
    Column("session_id", String(64), nullable=False),
    Column("job_id", String(16), nullable=False),
    Column("cron", Text, nullable=False),
    Column("prompt", Text, nullable=False),
    Column("recurring", Boolean, nullable=False),
    Column("next_due_at", UtcDateTime, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("session_id", "job_id", name="pk_cron_jobs"),
    Index("ix_cron_jobs_next_due_at", "next_due_at"),
)
