"""Where a database's schema is, read without SQLAlchemy or Alembic (the health check's way).

``warroom doctor --quick`` runs every 30 s in every container: importing SQLAlchemy and
Alembic costs it most of its CPU. This module answers the same question as
``Database.schema_version`` with the drivers alone: the standard library's ``sqlite3``
(in a thread) or ``asyncpg`` (imported only for a PostgreSQL URL), and the newest
revision read from the migration files' ``revision``/``down_revision`` lines, not by
loading them. A test keeps both answers equal.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit, urlunsplit

from memory_store.errors import DatabaseUnavailable

SQLITE_FILE_NAME = "warroom.sqlite3"
"""The embedded database's file under the data directory (``Database.from_url``)."""
VERSIONS_DIR = Path(__file__).parent / "migrations" / "versions"
CONNECT_TIMEOUT_S = 10.0

_REVISION = re.compile(r"^revision(?:\s*:\s*[^=]+)?\s*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
_DOWN = re.compile(
    r"^down_revision(?:\s*:\s*[^=]+)?\s*=\s*(?:None|['\"]([^'\"]+)['\"])", re.MULTILINE
)


@dataclass(frozen=True)
class SchemaVersion:
    """Where a database's schema is: ``current`` Alembic revision (None: never
    migrated) and ``head``, the newest this package ships."""

    current: str | None
    head: str

    @property
    def at_head(self) -> bool:
        """True when no migration is pending."""
        return self.current == self.head


@dataclass(frozen=True)
class Probed:
    """A probe's answer: the schema's ``version``, ``backend`` (``postgresql`` or
    ``sqlite``) and ``where``, the URL with its password hidden (``***``)."""

    version: SchemaVersion
    backend: str
    where: str


def migrations_head(versions_dir: Path = VERSIONS_DIR) -> str:
    """The newest revision among the migration files: the one no other revises.

    Raises:
        ValueError: no migration, or not exactly one head (the chain is broken).
    """
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in versions_dir.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        revision, down = _REVISION.search(text), _DOWN.search(text)
        if revision is None or down is None:
            continue
        revisions.add(revision.group(1))
        if down.group(1):
            revised.add(down.group(1))
    heads = revisions - revised
    if len(heads) != 1:
        raise ValueError(f"migrations in {versions_dir} have heads {sorted(heads)}, not one")
    return heads.pop()


async def probe_schema(url: str | None, *, data_dir: Path) -> Probed:
    """The schema's revision at ``url`` (as ``Database.from_url`` takes it: None → the
    embedded SQLite file under ``data_dir``, which is created as ``Database`` would).

    Raises:
        ValueError: a URL of another database kind.
        DatabaseUnavailable: the database could not be reached or read.
    """
    head = await asyncio.to_thread(migrations_head)
    if url is None:
        await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
        url = f"sqlite:///{data_dir / SQLITE_FILE_NAME}"
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme in ("postgresql", "postgres"):
        current = await _postgres_revision(parts)
        where = _hidden(parts._replace(scheme="postgresql+asyncpg"))
        return Probed(SchemaVersion(current, head), "postgresql", where)
    if scheme == "sqlite":
        path = url.split("://", 1)[1].removeprefix("/").split("?", 1)[0]
        current = await asyncio.to_thread(_sqlite_revision, path)
        return Probed(SchemaVersion(current, head), "sqlite", f"sqlite+aiosqlite:///{path}")
    raise ValueError(f"unsupported database {scheme!r}: use PostgreSQL or SQLite")


async def _postgres_revision(parts: SplitResult) -> str | None:
    import asyncpg  # only for a PostgreSQL URL: it is not free to import

    dsn = urlunsplit(parts._replace(scheme="postgresql"))
    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise DatabaseUnavailable(f"database error: {exc}") from exc
    try:
        if await conn.fetchval("SELECT to_regclass('alembic_version')") is None:
            return None
        value = await conn.fetchval("SELECT version_num FROM alembic_version LIMIT 1")
        return str(value) if value is not None else None
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise DatabaseUnavailable(f"database error: {exc}") from exc
    finally:
        await conn.close()


def _sqlite_revision(path: str) -> str | None:
    try:
        conn = sqlite3.connect(path or ":memory:", timeout=CONNECT_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise DatabaseUnavailable(f"database error: {exc}") from exc
    try:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
        ).fetchone()
        if found is None:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version LIMIT 1").fetchone()
        return str(row[0]) if row is not None else None
    except sqlite3.Error as exc:
        raise DatabaseUnavailable(f"database error: {exc}") from exc
    finally:
        conn.close()


def _hidden(parts: SplitResult) -> str:
    """The URL with its password as ``***`` (as SQLAlchemy renders it)."""
    if parts.password is None:
        return urlunsplit(parts)
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))
