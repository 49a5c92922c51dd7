"""The egress gateway: the audit log (one row per request) and remote sandboxes' tokens.

Revision ID: 0008
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "egress_requests",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("tool_use_id", sa.String(128), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("rule", sa.String(64), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
    )
    op.create_index("ix_egress_requests_session", "egress_requests", ["session_id", "id"])
    op.create_table(
        "egress_tokens",
        sa.Column("token_sha256", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_egress_tokens_session", "egress_tokens", ["session_id"])


def downgrade() -> None:
    op.drop_index("ix_egress_tokens_session", "egress_tokens")
    op.drop_table("egress_tokens")
    op.drop_index("ix_egress_requests_session", "egress_requests")
    op.drop_table("egress_requests")
