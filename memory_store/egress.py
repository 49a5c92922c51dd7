"""The egress gateway's rows (§11): the audit log, and remote sandboxes' proxy tokens.

Audit: one row per request, written once; read back per session (``/agent egress``) and by the
incident timeline. No query values and no secrets are ever stored: the gateway records query
parameter names only.

Tokens: a remote sandbox (Blaxel) reaches the gateway over the network, so each session gets a
random capability in its proxy URL. Only its SHA-256 is stored; it works only while its session
is running or waiting for a reply (a session that ended, failed or was stopped makes it inert,
and ``revoke`` ends it for good), and it grants nothing beyond the rules.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    func,
    insert,
    select,
    update,
)

from memory_store.db import Database
from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime, _Id, sessions

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
    Column("bytes", Integer, nullable=False),  # capped at 2**31 - 1: see ``body_bytes``
    Column("body_bytes", BigInteger, nullable=True),  # the count (migration 0021)
    Column("duration_ms", Float, nullable=False),
    Column("rule", String(64), nullable=True),
    Column("outcome", String(16), nullable=False),
    Index("ix_egress_requests_session", "session_id", "id"),
)
egress_tokens = Table(
    "egress_tokens",
    metadata,
    Column("token_sha256", String(64), primary_key=True),
    Column("session_id", String(64), nullable=False),
    Column("channel_id", String(255), nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("revoked_at", UtcDateTime(), nullable=True),
    Index("ix_egress_tokens_session", "session_id"),
)
_E = egress_requests.c
_T = egress_tokens.c
TOKEN_BYTES = 32
LIVE_STATUSES = ("running", "waiting")
OUTCOMES = ("injected", "allowed", "blocked")
INT32_MAX = 2**31 - 1
"""The most ``egress_requests.bytes`` holds (rows keep the whole count in ``body_bytes``)."""


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


def _fits(column: str, value: object) -> object:
    """``value`` as its column holds it: a string with no NUL (PostgreSQL refuses one; a
    request line the gateway refused unparsed can hold it) and cut to the column's width
    (PostgreSQL refuses a longer one; a CONNECT host has no bound of its own).

    >>> _fits("method", "P\\x00ST" + "X" * 20), _fits("port", 443)
    ('P\ufffdSTXXXXXXXXXXXX', 443)
    """
    if not isinstance(value, str):
        return value
    width = getattr(egress_requests.c[column].type, "length", None)
    return value.replace("\x00", "\ufffd")[:width]


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
        values = {name: _fits(name, value) for name, value in entry.__dict__.items()}
        values["body_bytes"], values["bytes"] = entry.bytes, min(entry.bytes, INT32_MAX)
        async with self._db.write() as conn:
            await conn.execute(insert(egress_requests).values(**values))

    async def recent(self, session_id: str, *, limit: int = 20) -> list[EgressEntry]:
        """The session's last ``limit`` requests, oldest first.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        columns = [
            func.coalesce(_E.body_bytes, _E.bytes) if name == "bytes" else getattr(_E, name)
            for name in EgressEntry.__dataclass_fields__
        ]
        stmt = (
            select(*columns).where(_E.session_id == session_id).order_by(_E.id.desc()).limit(limit)
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [EgressEntry(*row) for row in reversed(rows)]


@dataclass(frozen=True)
class TokenOwner:
    """Whose sandbox presented a proxy token."""

    session_id: str
    channel_id: str


class EgressTokens:
    """Proxy capabilities of remote sandboxes; one statement per call."""

    def __init__(self, db: Database) -> None:
        """Use ``db`` (migrated)."""
        self._db = db

    async def issue(
        self, session_id: str, channel_id: str, *, sign: Callable[[str], str] | None = None
    ) -> str:
        """A new random token for the session (URL-safe, 43 characters), passed through
        ``sign`` when given (the gateway's tag: ``CallCredentials.signed_token``); only the
        hash of the token returned is kept.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if sign is not None:
            token = sign(token)
        row = {
            "token_sha256": _digest(token),
            "session_id": session_id,
            "channel_id": channel_id,
            "created_at": datetime.now(UTC),
        }
        async with self._db.write() as conn:
            await conn.execute(insert(egress_tokens).values(**row))
        return token

    async def owner(self, token: str) -> TokenOwner | None:
        """The session a live token belongs to; None when unknown, revoked, or its session is
        not running or waiting.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        stmt = (
            select(_T.session_id, _T.channel_id)
            .join(sessions, sessions.c.id == _T.session_id)
            .where(
                _T.token_sha256 == _digest(token),
                _T.revoked_at.is_(None),
                sessions.c.status.in_(LIVE_STATUSES),
            )
        )
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).one_or_none()
        return None if row is None else TokenOwner(row.session_id, row.channel_id)

    async def revoke(self, session_id: str) -> int:
        """Revoke every token of the session (it ended); returns how many were live.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        stmt = (
            update(egress_tokens)
            .where(_T.session_id == session_id, _T.revoked_at.is_(None))
            .values(revoked_at=datetime.now(UTC))
        )
        async with self._db.write() as conn:
            result = await conn.execute(stmt)
        return result.rowcount


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
