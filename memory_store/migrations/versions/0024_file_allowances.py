"""``files.allowance_bytes`` and ``files.allowance_stored_bytes``: room of the org's byte
quotas set aside for one file's next writes.

The one-statement write another session waits to see (``files.conditional``) checked
both quotas against the org's counter row and added its change to it: two subqueries
and an UPDATE of a second table on every write, about 14% of the statement against an
UPDATE of one row (``bench/memory_store.py``). A file that a conditional write had to
take the locked path for is now given an allowance out of the org's room (counted in the
org's row when it is given), and its one-statement writes draw on that allowance, in its
own row only (``files.allowance``). The org's counters count allowances as used, so no
quota can be passed; a write that would be refused first takes back every allowance it
can (``allowance.reclaim``).

Both columns are added with a constant default: PostgreSQL does not rewrite the table.
Processes of the previous release, still running during a rolling upgrade, neither
give nor draw on allowances, and count their changes in the org's row as before, so the
counters stay exact; an allowance they leave on a file they delete is taken back by the
next reclaim. They judge quotas on those counters and never reclaim: while the upgrade
runs they may refuse a change that the org's real use allows, by at most the
allowances held (a strict xfail in ``tests/memory_store/files/test_allowance_red_team.py``).
The downgrade first gives every allowance back to its org's counters.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "files", sa.Column("allowance_bytes", sa.BigInteger(), nullable=False, server_default="0")
    )
    op.add_column(
        "files",
        sa.Column("allowance_stored_bytes", sa.BigInteger(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.execute(
        "UPDATE org_usage SET"
        " bytes = bytes - (SELECT coalesce(sum(f.allowance_bytes), 0) FROM files f"
        " WHERE f.org_id = org_usage.org_id),"
        " stored_bytes = stored_bytes - (SELECT coalesce(sum(f.allowance_stored_bytes), 0)"
        " FROM files f WHERE f.org_id = org_usage.org_id)"
    )
    with op.batch_alter_table("files") as batch:
        batch.drop_column("allowance_stored_bytes")
        batch.drop_column("allowance_bytes")
