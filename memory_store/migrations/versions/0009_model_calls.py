"""The model-call ledger (§14): one row per answered Messages API call, with its cost.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "model_calls",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("org_id", sa.String(255), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("thread_ts", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_nanousd", sa.BigInteger(), nullable=False),
        sa.Column("priced", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_model_calls_session", "model_calls", ["session_id"])
    op.create_index("ix_model_calls_org_at", "model_calls", ["org_id", "at"])
    op.create_index("ix_model_calls_channel_at", "model_calls", ["org_id", "channel_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_model_calls_channel_at", "model_calls")
    op.drop_index("ix_model_calls_org_at", "model_calls")
    op.drop_index("ix_model_calls_session", "model_calls")
    op.drop_table("model_calls")
