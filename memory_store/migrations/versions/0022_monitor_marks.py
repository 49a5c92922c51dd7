"""What a monitor's delivered mark is a mark of: ``background_tasks.output_generation``,
``delivered_tail``, ``delivered_tail_at``, ``output_head`` and ``read_failures``.

A monitor's output file can be cut and written again (``tail -F``'s case). The mark
(``delivered_bytes``) alone cannot tell a file that grew from one cut and grown past it
between two looks, nor tie a delivery to one life of the file. Now the last bytes
delivered (at most 64, and the mark they end at: a watcher of the previous release moves
the mark without them) and the file's first bytes (at most 64) are kept and compared on
each look; a cut moves the mark back to 0 and counts one more generation, which the delivery's compare-and-set and its
notification key both name. ``read_failures`` counts looks in a row whose read failed, so
an ended task whose last read fails is looked at again, a bounded number of times,
before it is ended without its last lines. All three are added without a rewrite.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "background_tasks",
        sa.Column("output_generation", sa.Integer(), nullable=False, server_default="0"),
    )
    op.add_column("background_tasks", sa.Column("delivered_tail", sa.LargeBinary(), nullable=True))
    op.add_column(
        "background_tasks", sa.Column("delivered_tail_at", sa.BigInteger(), nullable=True)
    )
    op.add_column("background_tasks", sa.Column("output_head", sa.LargeBinary(), nullable=True))
    op.add_column(
        "background_tasks",
        sa.Column("read_failures", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("background_tasks") as batch:
        batch.drop_column("read_failures")
        batch.drop_column("output_head")
        batch.drop_column("delivered_tail_at")
        batch.drop_column("delivered_tail")
        batch.drop_column("output_generation")
