"""Helpers for the session, outbox and dedupe tests: a manual clock and unique keys.

The database comes from this directory's ``conftest.py`` (``file_db``: a migrated
``Database`` of each backend). Every test makes its own keys, so tests can share
the run's PostgreSQL database.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from memory_store import Claim, SessionKey, SessionStore


class ManualClock:
    """A clock that moves only when told to (aware UTC)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        """Move forward by ``seconds``; returns the new time."""
        self.now += timedelta(seconds=seconds)
        return self.now


def new_key() -> SessionKey:
    """A session key no other test uses."""
    hexed = uuid.uuid4().hex
    return SessionKey(f"T{hexed[:10]}", f"C{hexed[10:20]}", f"17000000{hexed[20:26]}.0001")


async def open_session(store: SessionStore, text: str = "hi") -> tuple[str, str]:
    """Open a session on a fresh key; returns (session id, the token to claim)."""
    opened = await store.open_or_join(
        new_key(), requester_id="U1", initial_checkpoint='{"v": 0}', text=text, source_ts="1.1"
    )
    assert opened.token is not None
    return opened.session_id, opened.token


async def claimed(
    store: SessionStore, session_id: str, token: str, worker: str = "w", lease_s: float = 15.0
) -> Claim:
    """``store.claim`` that must succeed."""
    claim = await store.claim(session_id, token, worker_id=worker, lease_s=lease_s)
    assert claim is not None, f"{worker} could not claim {session_id}"
    return claim
