"""The Slack outbox: post intents recorded before posting, so posts are never doubled.

``chat.postMessage`` has no idempotency key (docs/architecture.md §5). The bot records an
intent keyed ``"<session>:<seq>"``, posts with that key in the message ``metadata``,
then records the message ``ts``. After a crash between post and record it finds the
post by its metadata (``conversations.replies`` with ``include_all_metadata``) and
calls ``post_done`` instead of posting again.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_store.clock import Clock, utc_now
from memory_store.db import Database, WriteConflict
from memory_store.errors import PostNotFound, SessionNotFound
from memory_store.sessions.records import OutboxItem
from memory_store.sessions.tables import slack_outbox
from memory_store.upsert import insert

_O = slack_outbox.c


class Outbox:
    """Slack post intents over ``Database``; every call is one short transaction."""

    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        """Use ``db`` (migrated) and ``clock`` (returns aware UTC ``datetime``s)."""
        self._db = db
        self._clock = clock

    async def post_intent(
        self,
        session_id: str,
        key: str,
        *,
        channel_id: str,
        thread_ts: str,
        kind: str,
        payload_json: str,
    ) -> OutboxItem:
        """Record the intent to post, or get the one already recorded under ``key``.

        Idempotent: a repeated call returns the first intent unchanged (its payload,
        and its ``ts`` when already posted — then do not post again), with ``created``
        False: of two callers racing on one key, only the one whose call recorded the
        intent (``created`` True) may post at once.

        Raises:
            SessionNotFound: no such session.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        stmt = (
            insert(slack_outbox, is_postgres=self._db.is_postgres)
            .values(
                key=key,
                session_id=session_id,
                channel_id=channel_id,
                thread_ts=thread_ts,
                kind=kind,
                payload=payload_json,
                created_at=now,
            )
            .on_conflict_do_nothing(index_elements=["key"])
            .returning(_O.id)
        )
        try:
            async with self._db.write() as conn:
                created = (await conn.execute(stmt)).one_or_none() is not None
                item = await _read(conn, key)
        except WriteConflict as exc:  # the only constraint left: the session must exist
            raise SessionNotFound(session_id) from exc
        if item is None:  # unreachable: inserted, or already there
            raise PostNotFound(key)
        return dataclasses.replace(item, created=created)

    async def post_done(self, key: str, ts: str) -> OutboxItem:
        """Record that the post exists as Slack message ``ts`` (idempotent: the first
        recorded ``ts`` is kept).

        Returns:
            The intent with its ``ts``.

        Raises:
            PostNotFound: no intent has this key.
            DatabaseUnavailable: the database could not be reached or timed out.
        """
        now = self._clock()
        async with self._db.write() as conn:
            await conn.execute(
                slack_outbox.update()
                .where(_O.key == key, _O.ts.is_(None))
                .values(ts=ts, posted_at=now)
            )
            item = await _read(conn, key)
        if item is None:
            raise PostNotFound(key)
        return item

    async def get_post(self, key: str) -> OutboxItem | None:
        """The intent recorded under ``key``, or None. Raises DatabaseUnavailable."""
        async with self._db.read() as conn:
            return await _read(conn, key)

    async def pending_posts(self, session_id: str) -> list[OutboxItem]:
        """The session's intents not yet known to be posted, oldest first."""
        query = (
            select(slack_outbox).where(_O.session_id == session_id, _O.ts.is_(None)).order_by(_O.id)
        )
        async with self._db.read() as conn:
            return [_item(row) for row in await conn.execute(query)]

    async def unsent(
        self, kind: str, *, created_before: datetime, limit: int = 50
    ) -> list[OutboxItem]:
        """Intents of ``kind`` recorded before ``created_before`` and not yet carried out
        (no ``ts``), oldest first, at most ``limit``. Raises DatabaseUnavailable."""
        query = (
            select(slack_outbox)
            .where(_O.kind == kind, _O.ts.is_(None), _O.created_at < created_before)
            .order_by(_O.id)
            .limit(limit)
        )
        async with self._db.read() as conn:
            return [_item(row) for row in await conn.execute(query)]


async def _read(conn: AsyncConnection, key: str) -> OutboxItem | None:
    row = (await conn.execute(select(slack_outbox).where(_O.key == key))).one_or_none()
    return None if row is None else _item(row)


def _item(row: Row[Any]) -> OutboxItem:
    m = row._mapping
    return OutboxItem(
        key=m["key"],
        session_id=m["session_id"],
        channel_id=m["channel_id"],
        thread_ts=m["thread_ts"],
        kind=m["kind"],
        payload_json=m["payload"],
        ts=m["ts"],
        created_at=m["created_at"],
        posted_at=m["posted_at"],
    )
