"""The ``watched_channels`` table (made by migration 0015): channels switched on or off.

One row per ``(org_id, channel_id)`` someone switched with ``/agent watch on|off``.
``watching`` is kept for ``off`` too: a channel watched by default (the
``WARROOM_WATCH_CHANNELS`` setting) that someone switched off stays off. A channel
with no row follows the default.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, PrimaryKeyConstraint, String, Table

from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime

watched_channels = Table(
    "watched_channels",
    metadata,
    Column("org_id", String(64), nullable=False),
    Column("channel_id", String(64), nullable=False),
    Column("watching", Boolean, nullable=False),
    Column("changed_by", String(64), nullable=False),
    Column("changed_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("org_id", "channel_id", name="pk_watched_channels"),
)
