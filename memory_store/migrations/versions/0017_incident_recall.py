"""Past incidents' recall: ``incident_recall`` with its full-text index, ``incident_services``,
``private_channels`` and ``related_given`` (``memory_store.recall.tables``).

PostgreSQL: a stored generated ``tsvector`` (services weigh A, title and symptoms B, root
cause and fix C) under a GIN index. SQLite: an FTS5 table with the same columns, kept by
``RecallStore`` in the transaction that writes the row.

Revision ID: 0017
Revises: 0015
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SEARCH = (
    "setweight(to_tsvector('english'::regconfig, services), 'A') || "
    "setweight(to_tsvector('english'::regconfig, title || ' ' || symptoms), 'B') || "
    "setweight(to_tsvector('english'::regconfig, root_cause || ' ' || fix), 'C')"
)


def upgrade() -> None:
    op.create_table(
        "incident_recall",
        sa.Column("org_id", sa.String(255), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("services", sa.Text(), nullable=False),
        sa.Column("symptoms", sa.Text(), nullable=False),
        sa.Column("root_cause", sa.Text(), nullable=False),
        sa.Column("fix", sa.Text(), nullable=False),
        sa.Column("links", sa.Text(), nullable=False),
        sa.Column("summary_version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "channel_id", name="pk_incident_recall"),
    )
    op.create_index(
        "ix_incident_recall_org_started", "incident_recall", ["org_id", "started_at"]
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"ALTER TABLE incident_recall ADD COLUMN search tsvector "
            f"GENERATED ALWAYS AS ({_SEARCH}) STORED"
        )
        op.execute("CREATE INDEX ix_incident_recall_search ON incident_recall USING gin (search)")
    else:
        op.execute(
            "CREATE VIRTUAL TABLE incident_recall_fts USING fts5("
            "org, services, title_symptoms, cause_fix, tokenize = 'porter unicode61')"
        )
    op.create_table(
        "incident_services",
        sa.Column("org_id", sa.String(255), nullable=False),
        sa.Column("service", sa.String(255), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "service", "channel_id", name="pk_incident_services"),
    )
    op.create_table(
        "private_channels",
        sa.Column("org_id", sa.String(255), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("marked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "channel_id", name="pk_private_channels"),
    )
    op.create_table(
        "related_given",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("org_id", sa.String(255), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("thread_ts", sa.String(64), nullable=False),
        sa.Column("given_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("items", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_related_given"),
    )
    op.create_index(
        "ix_related_given_channel", "related_given", ["org_id", "channel_id", "given_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_related_given_channel", table_name="related_given")
    op.drop_table("related_given")
    op.drop_table("private_channels")
    op.drop_table("incident_services")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_incident_recall_search")
    else:
        op.execute("DROP TABLE incident_recall_fts")
    op.drop_index("ix_incident_recall_org_started", table_name="incident_recall")
    op.drop_table("incident_recall")
