"""Durable sessions: sessions, their event log and inbox, the Slack outbox, inbound dedupe.

Revision ID: 0002
Revises: 0001
Create Date: 2025-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_STATUSES = "('running', 'waiting', 'done', 'failed', 'cancelled')"


def _at(name: str, *, nullable: bool) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("org_id", sa.String(255), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("thread_ts", sa.String(64), nullable=False),
        sa.Column("requester_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("lease_owner", sa.String(255), nullable=True),
        _at("lease_until", nullable=True),
        sa.Column("pending_token", sa.String(64), nullable=True),
        sa.Column("claimed_token", sa.String(64), nullable=True),
        _at("enqueued_at", nullable=True),
        sa.Column("crash_count", sa.Integer(), nullable=False),
        _at("wait_until", nullable=True),
        sa.Column("checkpoint", sa.Text(), nullable=False),
        sa.Column("sandbox", sa.Text(), nullable=True),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("inbox_seq", sa.Integer(), nullable=False),
        sa.Column("inbox_consumed", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        _at("created_at", nullable=False),
        _at("updated_at", nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
        sa.UniqueConstraint("org_id", "channel_id", "thread_ts", name="uq_sessions_key"),
        sa.CheckConstraint(f"status IN {_STATUSES}", name="ck_sessions_status"),
    )
    op.create_index("ix_sessions_status", "sessions", ["status"])
    op.create_table(
        "session_events",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        _at("created_at", nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq", name="pk_session_events"),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_session_events_session_id_sessions"
        ),
    )
    op.create_table(
        "session_inbox",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("source_ts", sa.String(64), nullable=False),
        _at("created_at", nullable=False),
        sa.PrimaryKeyConstraint("session_id", "position", name="pk_session_inbox"),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_session_inbox_session_id_sessions"
        ),
        sa.UniqueConstraint("session_id", "source_ts", name="uq_session_inbox_source"),
    )
    op.create_table(
        "slack_outbox",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("thread_ts", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("ts", sa.String(64), nullable=True),
        _at("created_at", nullable=False),
        _at("posted_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_slack_outbox"),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_slack_outbox_session_id_sessions"
        ),
        sa.UniqueConstraint("key", name="uq_slack_outbox_key"),
    )
    op.create_index("ix_slack_outbox_session_id", "slack_outbox", ["session_id"])
    op.create_table(
        "inbound_sightings",
        sa.Column("key", sa.String(255), nullable=False),
        _at("seen_at", nullable=False),
        _at("expires_at", nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_inbound_sightings"),
    )
    op.create_index("ix_inbound_sightings_expires_at", "inbound_sightings", ["expires_at"])


def downgrade() -> None:
    op.drop_table("inbound_sightings")
    op.drop_table("slack_outbox")
    op.drop_table("session_inbox")
    op.drop_table("session_events")
    op.drop_table("sessions")
