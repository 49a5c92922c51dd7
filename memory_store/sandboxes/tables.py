"""The ``sandboxes`` table (made by migration 0004): one row per live sandbox; and
``sandbox_uses`` (migration 0019): who uses each one.

``in_flight`` counts uses running now (each bounded by ``busy_until``: a process that
died mid-use stops counting when it passes); ``last_used`` is when a use last began or
ended; ``held_until`` is set while one process suspends or destroys the sandbox (a
claim). ``scope`` names who can reach it (local jails: one host and state directory);
``session_id`` the session it serves, when known (not a foreign key: the row may
outlive the session, which is how the reaper finds it).

``sandbox_uses`` has one row per sandbox and process (``owner``: ``<host>:<pid>:<random>``,
ending in ``+live`` when the process holds its liveness lock) that used it: how many of
its uses run now (``in_flight``, part of the row's ``sandboxes.in_flight``). A row with
none running stays, to say the process knows the sandbox. When the process dies, another
process of the scope subtracts its count and adopts the sandbox
(``SandboxLedgerStore.take_abandoned``), instead of waiting for ``busy_until``.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, Integer, PrimaryKeyConstraint, String, Table, Text

from memory_store.files.tables import metadata
from memory_store.sessions.tables import UtcDateTime

sandboxes = Table(
    "sandboxes",
    metadata,
    Column("sandbox_id", String(128), nullable=False),
    Column("scope", String(512), nullable=False),
    Column("session_id", String(64), nullable=True),
    Column("handle", Text, nullable=False),
    Column("in_flight", Integer, nullable=False),
    Column("busy_until", UtcDateTime, nullable=True),
    Column("last_used", UtcDateTime, nullable=False),
    Column("held_until", UtcDateTime, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("sandbox_id", name="pk_sandboxes"),
    Index("ix_sandboxes_scope_last_used", "scope", "last_used"),
)

sandbox_uses = Table(
    "sandbox_uses",
    metadata,
    Column("sandbox_id", String(128), nullable=False),
    Column("owner", String(255), nullable=False),
    Column("in_flight", Integer, nullable=False),
    PrimaryKeyConstraint("sandbox_id", "owner", name="pk_sandbox_uses"),
    Index("ix_sandbox_uses_owner", "owner"),
)
