"""Sandbox uses by process: the ``sandbox_uses`` table (``memory_store.sandboxes.tables``).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sandbox_uses",
        sa.Column("sandbox_id", sa.String(128), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("in_flight", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("sandbox_id", "owner", name="pk_sandbox_uses"),
    )
    op.create_index("ix_sandbox_uses_owner", "sandbox_uses", ["owner"])


def downgrade() -> None:
    op.drop_index("ix_sandbox_uses_owner", table_name="sandbox_uses")
    op.drop_table("sandbox_uses")
