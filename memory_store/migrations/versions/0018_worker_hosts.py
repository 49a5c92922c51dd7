"""Worker hosts: the ``worker_hosts`` table (``memory_store.hosts.tables``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "worker_hosts",
        sa.Column("host_id", sa.String(255), nullable=False),
        sa.Column("queue", sa.String(255), nullable=False),
        sa.Column("scope", sa.String(512), nullable=False),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopping_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("host_id", name="pk_worker_hosts"),
    )
    op.create_index("ix_worker_hosts_scope", "worker_hosts", ["scope"])


def downgrade() -> None:
    op.drop_index("ix_worker_hosts_scope", table_name="worker_hosts")
    op.drop_table("worker_hosts")
