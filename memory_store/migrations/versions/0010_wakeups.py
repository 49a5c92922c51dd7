"""Durable wake-ups: a waiting session's next timed wake, and the kind of each inbox item.

``sessions.wake_at`` / ``wake_note``: when a waiting session is to be woken and the text
it is woken with (the sweeper records it as an inbox item of kind ``wake``). They only
index the checkpoint, which holds the truth; every committed wait rewrites them.
``session_inbox.kind``: ``user`` for a person's message (every row before this
migration), else what the harness was told (``wake``, ``notification``, ``approval``…).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("wake_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("wake_note", sa.Text(), nullable=True))
    op.create_index(
        "ix_sessions_wake_at",
        "sessions",
        ["wake_at"],
        postgresql_where=sa.text("wake_at IS NOT NULL"),
        sqlite_where=sa.text("wake_at IS NOT NULL"),
    )
    with op.batch_alter_table("session_inbox") as batch:
        batch.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default="user"))


def downgrade() -> None:
    with op.batch_alter_table("session_inbox") as batch:
        batch.drop_column("kind")
    op.drop_index("ix_sessions_wake_at", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("wake_note")
        batch.drop_column("wake_at")
