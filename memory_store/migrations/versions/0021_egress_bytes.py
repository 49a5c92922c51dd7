"""The egress audit's ``bytes`` as a 64-bit integer.

A tunnel or a response body can pass 2 GiB; PostgreSQL refused such a row's 32-bit
``integer``, and the audit, which must never fail a request, lost it. PostgreSQL
rewrites the table (``ALTER COLUMN … TYPE bigint``); a SQLite ``INTEGER`` already holds
64 bits, so nothing changes there.

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
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            "egress_requests", "bytes", type_=sa.BigInteger(), existing_nullable=False
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":  # rows past 32 bits are capped
        op.execute("UPDATE egress_requests SET bytes = 2147483647 WHERE bytes > 2147483647")
        op.alter_column("egress_requests", "bytes", type_=sa.Integer(), existing_nullable=False)
