"""Fixtures of the alert tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite; the run's PostgreSQL URL (resolved here, outside the event loop)."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None
