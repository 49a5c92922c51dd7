"""The alert registry's tables (made by migration 0014).

- ``alert_deliveries``: one row per alert received, unique ``(org_id, source,
  delivery_id)`` so a webhook retry is recorded once. ``taken_at`` is set, with
  ``outcome`` and ``thread_id``, in the transaction that decides what the alert does:
  a taken row always names the thread it is in (its problem's, or the storm summary),
  or carries the ``posted_ts`` of the Slack message that is the alert itself.
- ``alert_threads``: one row per problem thread (``kind`` ``session``) or storm summary
  thread (``summary``). ``open_key`` is the ``dedupe_key`` (or ``~summary:<channel>``) while the
  thread is open and NULL once resolved or closed; ``(org_id, open_key)`` is unique,
  so a problem has at most one open thread however many processes race (NULLs are
  distinct on both backends).
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime, _Id

alert_deliveries = Table(
    "alert_deliveries",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("org_id", String(64), nullable=False),
    Column("source", String(64), nullable=False),
    Column("delivery_id", String(200), nullable=False),
    Column("dedupe_key", String(200), nullable=False),
    Column("firing", Boolean, nullable=False),
    Column("title", Text, nullable=False),
    Column("alert_json", Text, nullable=False),
    Column("channel_id", String(32), nullable=True),
    Column("posted_ts", String(32), nullable=True),
    Column("received_at", UtcDateTime, nullable=False),
    Column("taken_at", UtcDateTime, nullable=True),
    Column("outcome", String(16), nullable=True),
    Column("thread_id", String(32), nullable=True),
    UniqueConstraint("org_id", "source", "delivery_id", name="uq_alert_deliveries_delivery"),
    Index("ix_alert_deliveries_pending", "taken_at", "id"),
    Index("ix_alert_deliveries_thread", "thread_id"),
)

alert_threads = Table(
    "alert_threads",
    metadata,
    Column("id", String(32), nullable=False),
    Column("org_id", String(64), nullable=False),
    Column("dedupe_key", String(200), nullable=False),
    Column("open_key", String(200), nullable=True),
    Column("kind", String(16), nullable=False),
    Column("state", String(16), nullable=False),
    Column("channel_id", String(32), nullable=False),
    Column("thread_ts", String(32), nullable=True),
    Column("session_id", String(64), nullable=True),
    Column("firing_count", Integer, nullable=False),
    Column("first_at", UtcDateTime, nullable=False),
    Column("last_at", UtcDateTime, nullable=False),
    Column("last_input_at", UtcDateTime, nullable=True),
    Column("resolved_at", UtcDateTime, nullable=True),
    PrimaryKeyConstraint("id", name="pk_alert_threads"),
    UniqueConstraint("org_id", "open_key", name="uq_alert_threads_open"),
    Index("ix_alert_threads_org_state", "org_id", "kind", "state"),
)
