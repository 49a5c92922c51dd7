"""Background tasks: processes a session left running in its sandbox, watched to the end.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "background_tasks",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("task_id", sa.String(32), nullable=False),
        sa.Column("tool_use_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("sandbox_id", sa.String(128), nullable=False),
        sa.Column("handle", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("output_path", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("check_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delivered_bytes", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("session_id", "task_id", name="pk_background_tasks"),
    )
    op.create_index(
        "ix_background_tasks_state_check_at", "background_tasks", ["state", "check_at"]
    )
    op.create_index("ix_background_tasks_sandbox_id", "background_tasks", ["sandbox_id"])


def downgrade() -> None:
    op.drop_index("ix_background_tasks_sandbox_id", table_name="background_tasks")
    op.drop_index("ix_background_tasks_state_check_at", table_name="background_tasks")
    op.drop_table("background_tasks")
