"""SQLAlchemy Core tables of the file store (their schema is made by the Alembic migrations).

``files`` holds one row per (org, scope, channel, path): the current version and
content, or a tombstone (``deleted``). ``file_revisions`` is the history: one row per
version, never updated, the oldest dropped past the retention rule (``retention``);
it has no surrogate key and no foreign key, because every write pays for each index
and trigger on it (migration 0020: a file row is never deleted, and the store writes a
revision only through a row it holds; the old ``id`` column, kept one more release on
PostgreSQL for a rolling upgrade, is gone since 0023).
``org_usage`` counts each org's live files and bytes, and the bytes of all its kept
revisions (``stored_bytes``), kept by every change in its transaction, for the quotas;
its two byte counters also count files' allowances (``allowance_bytes``,
``allowance_stored_bytes``: room of the quotas set aside for a file's next one-statement
writes, ``allowance``), so that for each org::

    org_usage.bytes        = Σ live files' size_bytes + Σ files' allowance_bytes
    org_usage.stored_bytes = Σ kept revisions' size_bytes + Σ files' allowance_stored_bytes

Uniqueness that the store relies on:
- ``uq_files_path``: one row per path in a namespace;
- ``uq_files_live_fold``: among live files of a namespace, one per case-folded path
  (case-only duplicates are refused without a race);
- ``pk_file_revisions``: one revision per (file, version) (no lost update can commit);
- ``uq_file_revisions_tool_use``: one revision per (file, tool_use_id) (idempotent retries).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    true,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)

# SQLite only auto-increments an INTEGER PRIMARY KEY.
_Id = BigInteger().with_variant(Integer(), "sqlite")

files = Table(
    "files",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("org_id", String(255), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("channel_id", String(255), nullable=False),
    Column("path", Text, nullable=False),
    Column("path_fold", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("content", Text, nullable=True),
    Column("size_bytes", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("actor", String(255), nullable=False),
    Column("session_id", String(255), nullable=True),
    Column("summary", Text, nullable=False, server_default=""),
    Column("listed", Boolean, nullable=False, server_default=true()),
    Column("mode", Integer, nullable=False, server_default="420"),
    Column("allowance_bytes", BigInteger, nullable=False, server_default="0"),
    Column("allowance_stored_bytes", BigInteger, nullable=False, server_default="0"),
    UniqueConstraint("org_id", "scope", "channel_id", "path", name="uq_files_path"),
)
Index(
    "uq_files_live_fold",
    files.c.org_id,
    files.c.scope,
    files.c.channel_id,
    files.c.path_fold,
    unique=True,
    postgresql_where=files.c.deleted == false(),
    sqlite_where=files.c.deleted == false(),
)

file_revisions = Table(
    "file_revisions",
    metadata,
    Column("file_id", _Id, nullable=False),
    Column("version", Integer, nullable=False),
    Column("base_version", Integer, nullable=False),
    Column("operation", String(16), nullable=False),
    Column("content", Text, nullable=True),
    Column("replacements", Integer, nullable=True),
    Column("actor", String(255), nullable=False),
    Column("session_id", String(255), nullable=True),
    Column("tool_use_id", String(255), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("size_bytes", Integer, nullable=False, server_default="0"),
    PrimaryKeyConstraint("file_id", "version", name="pk_file_revisions"),
    Index("uq_file_revisions_tool_use", "file_id", "tool_use_id", unique=True),
)

org_usage = Table(
    "org_usage",
    metadata,
    Column("org_id", String(255), primary_key=True),
    Column("files", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("stored_bytes", BigInteger, nullable=False, server_default="0"),
)
