"""The egress audit log: every request a sandbox made through the gateway (§11).

One row per request, written once; read back per session (``/agent egress``) and by the
incident timeline. No query values and no secrets are ever stored: the gateway records query
parameter names only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, Float, Index, Integer, String, Table, insert, select

from memory_store.db import Database
from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime, _Id

egress_requests = Table(
    "egress_requests",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("session_id", String(64), nullable=False),
    Column("tool_use_id", String(128), nullable=True),
    Column("at", UtcDateTime(), nullable=False),
    Column("method", String(16), nullable=False),
    Column("host", String(255), nullable=False),
    Column("port", Integer, nullable=False),
    Column("path", String(2048), nullable=False),
    Column("status", Integer, nullable=False),
    Column("bytes", Integer, nullable=False),
    Column("duration_ms", Float, nullable=False),
    Column("rule", String(64), nullable=True),
    Column("outcome", String(16), nullable=False),
    Index("ix_egress_requests_session", "session_id", "id"),
)
_E = egress_requests.c
OUTCOMES = ("injected", "allowed", "blocked")


@dataclass(frozen=True)
class EgressEntry:
    """One audited request. ``path`` holds query parameter names only; ``bytes`` is the size of
    the response body the sandbox got; ``outcome`` is one of ``OUTCOMES``."""

    session_id: str
    tool_use_id: str | None
    at: datetime
    method: str
    host: str
    port: int
    path: str
    status: int
    bytes: int
    duration_ms: float
    rule: str | None
    outcome: str


class EgressLog:
    """The audit rows over ``Database``; one statement per call."""

    def __init__(self, db: Database) -> None:
        """Use ``db`` (migrated)."""
        self._db = db

    async def record(self, entry: EgressEntry) -> None:
        """Append one request.

        Raises:
            ValueError: an unknown ``outcome``.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if entry.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {entry.outcome!r}")
        values = {**entry.__dict__, "path": entry.path[:2048]}
        async with self._db.write() as conn:
            await conn.execute(insert(egress_requests).values(**values))

    async def recent(self, session_id: str, *, limit: int = 20) -> list[EgressEntry]:
        """The session's last ``limit`` requests, oldest first.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        stmt = (
            select(*(getattr(_E, name) for name in EgressEntry.__dataclass_fields__))
            .where(_E.session_id == session_id)
            .order_by(_E.id.desc())
            .limit(limit)
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [EgressEntry(*row) for row in reversed(rows)]
