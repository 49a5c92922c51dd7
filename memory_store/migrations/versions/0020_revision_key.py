"""Revisions keyed by (file, version): no surrogate ``id``, no foreign key to ``files``.

Every write appends a revision, so each index and trigger on ``file_revisions`` is paid
on the hot path that makes one session's write visible to the others
(``bench/memory_store.py``). The surrogate ``id`` was never read, and its index
duplicated the unique (file_id, version) one, which becomes the primary key. The
foreign key's check ran a query per revision; a file row is never deleted (a deletion
is a tombstone) and revisions are only written by the store, through a row it found or
made in the same statement or transaction, so the check could never fail.

On PostgreSQL it is one ALTER TABLE (no rewrite; the new key's index is built), and the
``id`` column stays one release, no longer a key, for processes of the previous release
still running during a rolling upgrade (their inserts return it); on SQLite (one process)
the table is copied without it.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # ``id`` stays, filled by its sequence, but is no key: processes of the previous
        # release, still running during a rolling upgrade (each migrates at start), insert
        # revisions returning it. The next release's migration drops it.
        op.execute(
            "ALTER TABLE file_revisions"
            " DROP CONSTRAINT fk_file_revisions_file_id_files,"
            " DROP CONSTRAINT pk_file_revisions,"
            " DROP CONSTRAINT uq_file_revisions_version,"
            " ADD CONSTRAINT pk_file_revisions PRIMARY KEY (file_id, version)"
        )
        return
    with op.batch_alter_table("file_revisions", recreate="always") as batch:
        batch.drop_constraint("fk_file_revisions_file_id_files", type_="foreignkey")
        batch.drop_constraint("uq_file_revisions_version", type_="unique")
        batch.drop_constraint("pk_file_revisions", type_="primary")
        batch.drop_column("id")
        batch.create_primary_key("pk_file_revisions", ["file_id", "version"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE file_revisions DROP CONSTRAINT pk_file_revisions,"
            " ADD CONSTRAINT uq_file_revisions_version UNIQUE (file_id, version),"
            " ADD CONSTRAINT pk_file_revisions PRIMARY KEY (id),"
            " ADD CONSTRAINT fk_file_revisions_file_id_files"
            " FOREIGN KEY (file_id) REFERENCES files (id)"
        )
        return
    with op.batch_alter_table("file_revisions", recreate="always") as batch:
        batch.drop_constraint("pk_file_revisions", type_="primary")
        # an INTEGER PRIMARY KEY: SQLite numbers the copied rows itself
        batch.add_column(sa.Column("id", _Id, primary_key=True, autoincrement=True))
        batch.create_unique_constraint("uq_file_revisions_version", ["file_id", "version"])
        batch.create_foreign_key(
            "fk_file_revisions_file_id_files", "files", ["file_id"], ["id"]
        )
