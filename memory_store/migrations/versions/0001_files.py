"""Org files and their revisions.

Revision ID: 0001
Revises:
Create Date: 2025-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("org_id", sa.String(255), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("path_fold", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_files"),
        sa.UniqueConstraint("org_id", "scope", "channel_id", "path", name="uq_files_path"),
    )
    op.create_index(
        "uq_files_live_fold",
        "files",
        ["org_id", "scope", "channel_id", "path_fold"],
        unique=True,
        postgresql_where=sa.text("NOT deleted"),
        sqlite_where=sa.text("deleted = 0"),
    )
    op.create_table(
        "file_revisions",
        sa.Column("id", _Id, primary_key=True, autoincrement=True),
        sa.Column("file_id", _Id, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("base_version", sa.Integer(), nullable=False),
        sa.Column("operation", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("replacements", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=True),
        sa.Column("tool_use_id", sa.String(255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_file_revisions"),
        sa.ForeignKeyConstraint(
            ["file_id"], ["files.id"], name="fk_file_revisions_file_id_files"
        ),
        sa.UniqueConstraint("file_id", "version", name="uq_file_revisions_version"),
    )
    op.create_index(
        "uq_file_revisions_tool_use", "file_revisions", ["file_id", "tool_use_id"], unique=True
    )


def downgrade() -> None:
    op.drop_table("file_revisions")
    op.drop_table("files")
