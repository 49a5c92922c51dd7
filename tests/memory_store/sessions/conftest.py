"""Fixtures of the session-store tests."""

from __future__ import annotations

import pytest

from memory_store import Database, SessionStore
from tests.memory_store.session_support import ManualClock


@pytest.fixture
def store(file_db: Database, clock: ManualClock) -> SessionStore:
    """A session store on each backend whose clock and lease clock move only when told."""
    return SessionStore(file_db, clock=clock, lease_clock=clock)
