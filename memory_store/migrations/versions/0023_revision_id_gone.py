"""``file_revisions.id`` dropped on PostgreSQL, the release after it stopped being a key.

Migration 0020 keyed revisions by (file_id, version) and kept the old surrogate ``id``
one release, filled by its sequence, because processes of the release before, still
running during a rolling upgrade, inserted revisions returning it. No process of the
release since (0020 to 0022) reads or writes it, so it goes now, with its sequence: each
revision the store appends no longer draws a sequence number and stores 8 bytes less
(``bench/memory_store.py``). Dropping a column does not rewrite the table: the lock is
held for a catalogue change only.

SQLite dropped it at 0020 (one process, no rolling upgrade): nothing to do there.

The downgrade adds it back filled by a new sequence (that rewrites the table), so 0020's
downgrade can make it the key again.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE file_revisions DROP COLUMN IF EXISTS id")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE file_revisions ADD COLUMN id BIGSERIAL NOT NULL")
