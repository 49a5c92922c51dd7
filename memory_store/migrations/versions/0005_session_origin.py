"""Sessions carry their origin: ``slack`` (a Slack thread) or ``chat`` (``warroom chat``).

A worker takes only sessions of the origin it can serve (a Slack session needs a
Slack poster), and a chat only its own session (issue #12, item 7). Existing rows
are Slack sessions.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column("origin", sa.String(16), nullable=False, server_default="slack"),
    )


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("origin")
