"""Recurring wake-ups: the ``cron_jobs`` table (``memory_store.cron.tables``).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cron_jobs",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("job_id", sa.String(16), nullable=False),
        sa.Column("cron", sa.Text(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("recurring", sa.Boolean(), nullable=False),
        sa.Column("next_due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "job_id", name="pk_cron_jobs"),
    )
    op.create_index("ix_cron_jobs_next_due_at", "cron_jobs", ["next_due_at"])


def downgrade() -> None:
    op.drop_index("ix_cron_jobs_next_due_at", table_name="cron_jobs")
    op.drop_table("cron_jobs")
