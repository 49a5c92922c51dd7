"""The egress audit's byte counts past 32 bits: ``egress_requests.body_bytes``.

A tunnel or a response body can pass 2 GiB; PostgreSQL refused such a value in the
32-bit ``bytes`` column, and the audit, which must never fail a request, lost the row.
Changing the column's type would rewrite the table (it is never pruned: one row per
request) under an exclusive lock, longer than a process's statement timeout on a large
audit, so every process would fail to start. A new nullable 64-bit column is added
instead, at no cost; each row since holds its count there, and ``bytes`` the same capped
at 2**31 - 1 (what processes of the previous release read, during a rolling upgrade).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("egress_requests", sa.Column("body_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("egress_requests") as batch:
        batch.drop_column("body_bytes")
