"""Session transcripts stored append-only: one row per message, written once.

Adds ``session_transcript`` (primary key ``(session_id, generation, position)``) and
two counters on ``sessions``: ``transcript_generation`` (bumped when compaction
rewrites the transcript; rows of older generations are deleted then) and
``transcript_length`` (rows in the current generation). A step then writes only the
messages it added, and the ``checkpoint`` column keeps the small mutable state.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(
            sa.Column("transcript_generation", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("transcript_length", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_table(
        "session_transcript",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "session_id", "generation", "position", name="pk_session_transcript"
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_session_transcript_session_id_sessions"
        ),
    )


def downgrade() -> None:
    op.drop_table("session_transcript")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("transcript_length")
        batch.drop_column("transcript_generation")
