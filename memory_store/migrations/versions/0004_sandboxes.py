"""Sandboxes' shared use record: which sandbox is in use, idle, or being suspended.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sandboxes",
        sa.Column("sandbox_id", sa.String(128), nullable=False),
        sa.Column("scope", sa.String(512), nullable=False),
        sa.Column("session_id", sa.String(64), nullable=True),
        sa.Column("handle", sa.Text(), nullable=False),
        sa.Column("in_flight", sa.Integer(), nullable=False),
        sa.Column("busy_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used", sa.DateTime(timezone=True), nullable=False),
        sa.Column("held_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sandbox_id", name="pk_sandboxes"),
    )
    op.create_index("ix_sandboxes_scope_last_used", "sandboxes", ["scope", "last_used"])


def downgrade() -> None:
    op.drop_index("ix_sandboxes_scope_last_used", table_name="sandboxes")
    op.drop_table("sandboxes")
