"""The ``worker_hosts`` table (made by migration 0018): one row per worker host.

``host_id`` is the host's identity (``WARROOM_HOST_ID``); ``queue`` the Dramatiq queue
only that host consumes; ``scope`` the sandboxes it reaches (the ``sandboxes.scope`` of
the jails it starts: one host and state directory). ``beat_at`` is its last heartbeat
(every worker process of the host beats the row); ``stopping_at`` is set when the host
stops (SIGTERM) and cleared when it starts again.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, PrimaryKeyConstraint, String, Table

from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime

worker_hosts = Table(
    "worker_hosts",
    metadata,
    Column("host_id", String(255), nullable=False),
    Column("queue", String(255), nullable=False),
    Column("scope", String(512), nullable=False),
    Column("beat_at", UtcDateTime, nullable=False),
    Column("stopping_at", UtcDateTime, nullable=True),
    Column("started_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("host_id", name="pk_worker_hosts"),
    Index("ix_worker_hosts_scope", "scope"),
)
