"""Org scale: file summaries and modes kept in columns, the org quota as a counter,
partial indexes for the sweeper.

- ``files.summary`` (text, ``''`` default): the one-line description the prompt's
  indexes show, computed when a version is written (backfilled here);
- ``files.listed`` (bool, true): false for a skill the model must not be offered
  (``disable-model-invocation: true``);
- ``files.mode`` (int, 0o644): POSIX permission bits of a skill's bundled file, kept
  across import and export (executable scripts);
- ``org_usage``: live files and bytes per org, kept by every change in its transaction;
- ``ix_sessions_waiting_until`` and ``ix_sessions_running_lease``: partial indexes the
  sweep's three statements use (sessions are otherwise another module's tables).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory_store.files.summary import describe

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 500


def upgrade() -> None:
    with op.batch_alter_table("files") as batch:
        batch.add_column(sa.Column("summary", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("listed", sa.Boolean(), nullable=False, server_default=sa.true()))
        batch.add_column(sa.Column("mode", sa.Integer(), nullable=False, server_default="420"))
    _backfill_summaries()
    op.create_table(
        "org_usage",
        sa.Column("org_id", sa.String(255), nullable=False),
        sa.Column("files", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", name="pk_org_usage"),
    )
    op.execute(
        "INSERT INTO org_usage (org_id, files, bytes) SELECT org_id, count(*),"
        " coalesce(sum(size_bytes), 0) FROM files WHERE NOT deleted GROUP BY org_id"
    )
    op.create_index(
        "ix_sessions_waiting_until",
        "sessions",
        ["wait_until"],
        postgresql_where=sa.text("status = 'waiting'"),
        sqlite_where=sa.text("status = 'waiting'"),
    )
    op.create_index(
        "ix_sessions_running_lease",
        "sessions",
        ["lease_until"],
        postgresql_where=sa.text("status = 'running'"),
        sqlite_where=sa.text("status = 'running'"),
    )


def _backfill_summaries() -> None:
    conn = op.get_bind()
    select = sa.text(
        "SELECT id, scope, path, content FROM files WHERE NOT deleted AND id > :after"
        " ORDER BY id LIMIT :n"
    )
    update = sa.text("UPDATE files SET summary = :summary, listed = :listed WHERE id = :id")
    after = 0
    while rows := conn.execute(select, {"after": after, "n": _BATCH}).all():
        values = []
        for row in rows:
            found = describe(row.scope, row.path, row.content or "")
            values.append({"id": row.id, "summary": found.summary, "listed": found.listed})
        conn.execute(update, values)
        after = rows[-1].id


def downgrade() -> None:
    op.drop_index("ix_sessions_running_lease", "sessions")
    op.drop_index("ix_sessions_waiting_until", "sessions")
    op.drop_table("org_usage")
    with op.batch_alter_table("files") as batch:
        batch.drop_column("mode")
        batch.drop_column("listed")
        batch.drop_column("summary")
