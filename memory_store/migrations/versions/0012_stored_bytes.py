"""Stored bytes: each revision's size, and every org's kept revisions counted for its quota.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("file_revisions") as batch:
        batch.add_column(
            sa.Column("size_bytes", sa.Integer(), nullable=False, server_default="0")
        )
    with op.batch_alter_table("org_usage") as batch:
        batch.add_column(
            sa.Column("stored_bytes", sa.BigInteger(), nullable=False, server_default="0")
        )
    postgres = op.get_bind().dialect.name == "postgresql"
    length = "octet_length(content)" if postgres else "length(CAST(content AS BLOB))"
    op.execute(f"UPDATE file_revisions SET size_bytes = COALESCE({length}, 0)")
    # every org with revisions has a counter row: one is made with its first file
    op.execute(
        "UPDATE org_usage SET stored_bytes = COALESCE((SELECT SUM(r.size_bytes)"
        " FROM file_revisions r JOIN files f ON f.id = r.file_id"
        " WHERE f.org_id = org_usage.org_id), 0)"
    )


def downgrade() -> None:
    with op.batch_alter_table("org_usage") as batch:
        batch.drop_column("stored_bytes")
    with op.batch_alter_table("file_revisions") as batch:
        batch.drop_column("size_bytes")
