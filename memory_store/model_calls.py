"""The model-call ledger (§14): one row per real Messages API call, written when it returns.

A row is written once per call the API answered, before the step that made it commits, so
a call whose step then crashed is still counted (the API billed it) and a committed call is
never counted twice. Its cost (nano-dollars, priced by the harness from its price table at
the time of the call) and ``priced`` (false: the model was not in the table; its tokens are
counted, its cost is 0) are stored with it. Sums by session, channel, org and time window
read this table only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Select,
    String,
    Table,
    and_,
    case,
    func,
    insert,
    select,
)
from sqlalchemy.sql.elements import ColumnElement

from memory_store.db import Database
from memory_store.files.tables import metadata
from memory_store.sessions.records import SessionKey, TokenUsage
from memory_store.sessions.tables import UtcDateTime, _Id, at

model_calls = Table(
    "model_calls",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("session_id", String(64), nullable=False),
    Column("org_id", String(255), nullable=False),
    Column("channel_id", String(255), nullable=False),
    Column("thread_ts", String(64), nullable=False),
    Column("at", UtcDateTime(), nullable=False),
    Column("model", String(128), nullable=False),
    Column("request_id", String(128), nullable=True),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cache_read_tokens", BigInteger, nullable=False),
    Column("cache_write_tokens", BigInteger, nullable=False),
    Column("cost_nanousd", BigInteger, nullable=False),
    Column("priced", Boolean, nullable=False),
    Index("ix_model_calls_session", "session_id"),
    Index("ix_model_calls_org_at", "org_id", "at"),
    Index("ix_model_calls_channel_at", "org_id", "channel_id", "at"),
)
_C = model_calls.c


@dataclass(frozen=True)
class ModelCall:
    """One answered model call: whose (``key``, ``session_id``), when, which model, its
    usage and its cost in nano-dollars (``priced`` false: unknown model, cost 0)."""

    session_id: str
    key: SessionKey
    at: datetime
    model: str
    usage: TokenUsage
    cost_nanousd: int
    priced: bool
    request_id: str | None = None


@dataclass(frozen=True)
class Spend:
    """Summed calls: how many, their tokens, their cost (nano-dollars) and how many of them
    were unpriced (their tokens are in ``usage``, their cost is not in ``cost_nanousd``)."""

    calls: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost_nanousd: int = 0
    unpriced_calls: int = 0


_INSERT = insert(model_calls)


class ModelCallLog:
    """The ledger over ``Database``; one statement per call."""

    def __init__(self, db: Database) -> None:
        """Use ``db`` (migrated)."""
        self._db = db

    async def record(self, call: ModelCall) -> None:
        """Append one call.

        Raises:
            ValueError: a negative cost or token count.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        u = call.usage
        counts = (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)
        if call.cost_nanousd < 0 or min(counts) < 0:
            raise ValueError("a model call's tokens and cost are never negative")
        row = {
            "session_id": call.session_id,
            "org_id": call.key.org_id,
            "channel_id": call.key.channel_id,
            "thread_ts": call.key.thread_ts,
            "at": call.at,
            "model": call.model[:128],
            "request_id": (call.request_id or None) and call.request_id[:128],
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "cost_nanousd": call.cost_nanousd,
            "priced": call.priced,
        }
        # one INSERT: atomic on its own, so on PostgreSQL no BEGIN/COMMIT round trips
        async with self._db.autocommit() if self._db.is_postgres else self._db.write() as conn:
            await conn.execute(_INSERT, row)

    async def session(self, session_id: str) -> Spend:
        """Everything one session spent.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        return (await self._sums(_C.session_id == session_id))[0]

    async def spent(
        self,
        org_id: str,
        *,
        since: datetime,
        until: datetime | None = None,
        channel_id: str | None = None,
    ) -> Spend:
        """What the org (or one of its channels) spent in ``[since, until)``.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        where = [_C.org_id == org_id, _C.at >= at(since)]
        if until is not None:
            where.append(_C.at < at(until))
        if channel_id is not None:
            where.append(_C.channel_id == channel_id)
        return (await self._sums(and_(*where)))[0]

    async def for_caps(self, session_id: str, org_id: str, *, since: datetime) -> tuple[int, int]:
        """The session's cost and the org's cost since ``since`` (nano-dollars), in one query.

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        mine = func.coalesce(func.sum(case((_C.session_id == session_id, _C.cost_nanousd))), 0)
        org = func.coalesce(func.sum(case((_C.at >= at(since), _C.cost_nanousd))), 0)
        stmt = select(mine, org).where(
            _C.org_id == org_id, (_C.session_id == session_id) | (_C.at >= at(since))
        )
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).one()
        return int(row[0]), int(row[1])

    async def by_session(self, session_ids: list[str]) -> dict[str, Spend]:
        """Each listed session's spend (sessions without calls are left out).

        Raises:
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        if not session_ids:
            return {}
        stmt = _summed(_C.session_id).where(_C.session_id.in_(session_ids))
        stmt = stmt.group_by(_C.session_id)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return {row[0]: _spend(row[1:]) for row in rows}

    async def _sums(self, where: ColumnElement[bool]) -> list[Spend]:
        async with self._db.read() as conn:
            row = (await conn.execute(_summed().where(where))).one()
        return [_spend(tuple(row))]


def _summed(*group: ColumnElement[str]) -> Select[*tuple[Any, ...]]:
    """SELECT [group,] count, the four token sums, cost, unpriced count."""
    return select(
        *group,
        func.count(),
        func.coalesce(func.sum(_C.input_tokens), 0),
        func.coalesce(func.sum(_C.output_tokens), 0),
        func.coalesce(func.sum(_C.cache_read_tokens), 0),
        func.coalesce(func.sum(_C.cache_write_tokens), 0),
        func.coalesce(func.sum(_C.cost_nanousd), 0),
        func.coalesce(func.sum(case((_C.priced, 0), else_=1)), 0),
    )


def _spend(values: Sequence[Any]) -> Spend:
    calls, i, o, r, w, cost, unpriced = (int(v) for v in values)
    return Spend(calls, TokenUsage(i, o, r, w), cost, unpriced)
