"""The alert registry: ``alert_deliveries`` and ``alert_threads`` (``memory_store.alerts``).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alert_deliveries",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("org_id", sa.String(64), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("delivery_id", sa.String(200), nullable=False),
        sa.Column("dedupe_key", sa.String(200), nullable=False),
        sa.Column("firing", sa.Boolean(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("alert_json", sa.Text(), nullable=False),
        sa.Column("channel_id", sa.String(32), nullable=True),
        sa.Column("posted_ts", sa.String(32), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("thread_id", sa.String(32), nullable=True),
        sa.UniqueConstraint("org_id", "source", "delivery_id", name="uq_alert_deliveries_delivery"),
    )
    op.create_index("ix_alert_deliveries_pending", "alert_deliveries", ["taken_at", "id"])
    op.create_index("ix_alert_deliveries_thread", "alert_deliveries", ["thread_id"])
    op.create_table(
        "alert_threads",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("org_id", sa.String(64), nullable=False),
        sa.Column("dedupe_key", sa.String(200), nullable=False),
        sa.Column("open_key", sa.String(200), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("channel_id", sa.String(32), nullable=False),
        sa.Column("thread_ts", sa.String(32), nullable=True),
        sa.Column("session_id", sa.String(64), nullable=True),
        sa.Column("firing_count", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_input_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_alert_threads"),
        sa.UniqueConstraint("org_id", "open_key", name="uq_alert_threads_open"),
    )
    op.create_index("ix_alert_threads_org_state", "alert_threads", ["org_id", "kind", "state"])


def downgrade() -> None:
    op.drop_index("ix_alert_threads_org_state", table_name="alert_threads")
    op.drop_table("alert_threads")
    op.drop_index("ix_alert_deliveries_thread", table_name="alert_deliveries")
    op.drop_index("ix_alert_deliveries_pending", table_name="alert_deliveries")
    op.drop_table("alert_deliveries")
