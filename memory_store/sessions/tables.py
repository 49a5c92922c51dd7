"""SQLAlchemy Core tables of durable sessions (their schema is made by migrations 0002, 0003,
0005 and 0010).

``sessions`` holds one row per Slack thread: status, fencing state (``epoch``, lease,
``pending_token``), the opaque checkpoint, counters. The other tables hang off it:

- ``session_events``: the append-only log, primary key ``(session_id, seq)`` (the last
  line of defence against two writers);
- ``session_inbox``: steering messages, numbered per session by ``position``; one row per
  ``(session_id, source_ts)`` (a Slack message is recorded once);
- ``slack_outbox``: Slack post intents, unique ``key`` (``"<session>:<seq>"``);
- ``inbound_sightings``: keys of inbound Slack events already seen (dedupe, with expiry);
- ``session_transcript`` (migration 0003): the model transcript, one opaque JSON message
  per row, primary key ``(session_id, generation, position)``, written once; compaction
  starts a new ``generation`` (the session row's ``transcript_generation``, with
  ``transcript_length`` rows) and deletes the older ones.

Counters on the session row make hot-path writes one locked ``UPDATE … RETURNING``:
``last_seq`` (the last event's seq), ``inbox_seq`` (the last inbox position) and
``inbox_consumed`` (positions up to it were given to the model). ``wake_at`` and
``wake_note`` (migration 0010) index a waiting session's next timed wake-up.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    literal,
)
from sqlalchemy.sql.elements import BindParameter

from memory_store.files.tables import metadata

STATUSES = ("running", "waiting", "done", "failed", "cancelled")

# SQLite only auto-increments an INTEGER PRIMARY KEY.
_Id = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """An aware UTC ``datetime`` on both backends.

    PostgreSQL stores ``timestamptz``; SQLite stores naive UTC text (comparable as text,
    since every value is written in UTC with the same format) and gets UTC re-attached.
    Naive values are refused when bound.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert to UTC; SQLite gets the naive UTC value. Raises ValueError if naive."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: pass an aware (UTC) datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to the naive values SQLite returns."""
        if value is None or value.tzinfo is not None:
            return value
        return value.replace(tzinfo=UTC)


UTC_DATETIME = UtcDateTime()
"""A shared ``UtcDateTime`` for expressions built per call: SQLAlchemy memoises a type's
cache key on the instance, so a new instance per statement recomputes it each time."""


def at(moment: datetime) -> BindParameter[datetime]:
    """``moment`` as a bound ``UtcDateTime`` value, for use inside SQL expressions (``CASE``)."""
    return literal(moment, UTC_DATETIME)


sessions = Table(
    "sessions",
    metadata,
    Column("id", String(64), nullable=False),
    Column("org_id", String(255), nullable=False),
    Column("channel_id", String(255), nullable=False),
    Column("thread_ts", String(64), nullable=False),
    Column("requester_id", String(255), nullable=False),
    Column("status", String(16), nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("lease_owner", String(255), nullable=True),
    Column("lease_until", UtcDateTime, nullable=True),
    Column("pending_token", String(64), nullable=True),
    Column("claimed_token", String(64), nullable=True),
    Column("enqueued_at", UtcDateTime, nullable=True),
    Column("crash_count", Integer, nullable=False),
    Column("wait_until", UtcDateTime, nullable=True),
    Column("checkpoint", Text, nullable=False),
    Column("sandbox", Text, nullable=True),
    Column("last_seq", Integer, nullable=False),
    Column("transcript_generation", Integer, nullable=False, server_default="0"),
    Column("transcript_length", Integer, nullable=False, server_default="0"),
    Column("inbox_seq", Integer, nullable=False),
    Column("inbox_consumed", Integer, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("origin", String(16), nullable=False, server_default="slack"),  # migration 0005
    Column("wake_at", UtcDateTime, nullable=True),  # migration 0010
    Column("wake_note", Text, nullable=True),  # migration 0010
    PrimaryKeyConstraint("id", name="pk_sessions"),
    UniqueConstraint("org_id", "channel_id", "thread_ts", name="uq_sessions_key"),
    CheckConstraint(f"status IN {STATUSES!r}", name="ck_sessions_status"),
    Index("ix_sessions_status", "status"),
)

session_events = Table(
    "session_events",
    metadata,
    Column("session_id", String(64), ForeignKey("sessions.id"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("payload", Text, nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("session_id", "seq", name="pk_session_events"),
)

session_inbox = Table(
    "session_inbox",
    metadata,
    Column("session_id", String(64), ForeignKey("sessions.id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("text", Text, nullable=False),
    Column("source_ts", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("kind", String(16), nullable=False, server_default="user"),  # migration 0010
    PrimaryKeyConstraint("session_id", "position", name="pk_session_inbox"),
    UniqueConstraint("session_id", "source_ts", name="uq_session_inbox_source"),
)

slack_outbox = Table(
    "slack_outbox",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("key", String(255), nullable=False),
    Column("session_id", String(64), ForeignKey("sessions.id"), nullable=False),
    Column("channel_id", String(255), nullable=False),
    Column("thread_ts", String(64), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("payload", Text, nullable=False),
    Column("ts", String(64), nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("posted_at", UtcDateTime, nullable=True),
    UniqueConstraint("key", name="uq_slack_outbox_key"),
    Index("ix_slack_outbox_session_id", "session_id"),
)

inbound_sightings = Table(
    "inbound_sightings",
    metadata,
    Column("key", String(255), nullable=False),
    Column("seen_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("key", name="pk_inbound_sightings"),
    Index("ix_inbound_sightings_expires_at", "expires_at"),
)

session_transcript = Table(
    "session_transcript",
    metadata,
    Column("session_id", String(64), ForeignKey("sessions.id"), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Column("message", Text, nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("session_id", "generation", "position", name="pk_session_transcript"),
)
