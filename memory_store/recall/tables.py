"""SQLAlchemy Core tables of past incidents' recall (their schema is made by migration 0017).

- ``incident_recall``: one row per incident (org, channel) whose summary was recorded: the
  date it started, the summary's fields (title, services, symptoms, root cause, fix,
  links), the version of ``/incident/summary.md`` they were read from (0: drafted before
  any file existed). On PostgreSQL a stored generated ``search`` column holds the weighted
  ``tsvector`` (services A, title and symptoms B, root cause and fix C) under a GIN index;
  on SQLite the FTS5 table ``incident_recall_fts`` holds the same columns, its ``rowid``
  the recall row's.
- ``incident_services``: each recorded incident's services, one row each, so the
  incidents of an alert's service are an index lookup.
- ``private_channels``: channels Slack said are private (``channel_type`` ``group``);
  their incidents follow the org's private-channel rule.
- ``related_given``: what each session was given at its start (JSON list), for
  ``/agent related``.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, Integer, PrimaryKeyConstraint, String, Table, Text

from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime

incident_recall = Table(
    "incident_recall",
    metadata,
    Column("org_id", String(255), nullable=False),
    Column("channel_id", String(255), nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("title", Text, nullable=False),
    Column("services", Text, nullable=False),
    Column("symptoms", Text, nullable=False),
    Column("root_cause", Text, nullable=False),
    Column("fix", Text, nullable=False),
    Column("links", Text, nullable=False),
    Column("summary_version", Integer, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("org_id", "channel_id", name="pk_incident_recall"),
)
Index("ix_incident_recall_org_started", incident_recall.c.org_id, incident_recall.c.started_at)

incident_services = Table(
    "incident_services",
    metadata,
    Column("org_id", String(255), nullable=False),
    Column("service", String(255), nullable=False),
    Column("channel_id", String(255), nullable=False),
    PrimaryKeyConstraint("org_id", "service", "channel_id", name="pk_incident_services"),
)

private_channels = Table(
    "private_channels",
    metadata,
    Column("org_id", String(255), nullable=False),
    Column("channel_id", String(255), nullable=False),
    Column("marked_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("org_id", "channel_id", name="pk_private_channels"),
)

related_given = Table(
    "related_given",
    metadata,
    Column("session_id", String(64), nullable=False),
    Column("org_id", String(255), nullable=False),
    Column("channel_id", String(255), nullable=False),
    Column("thread_ts", String(64), nullable=False),
    Column("given_at", UtcDateTime, nullable=False),
    Column("items", Text, nullable=False),
    PrimaryKeyConstraint("session_id", name="pk_related_given"),
)
Index(
    "ix_related_given_channel",
    related_given.c.org_id,
    related_given.c.channel_id,
    related_given.c.given_at,
)

FTS_TABLE = "incident_recall_fts"
"""SQLite only: ``fts5(org, services, title_symptoms, cause_fix)``, rowid = the recall row's."""
