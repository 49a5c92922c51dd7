"""Fixtures for the Slack edge: the fake Slack Web API, a real client pointed at it, and
a real (SQLite) store behind the poster and the skills command."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.poster import Thread
from memory_store import Database, FileStore, Outbox, SessionKey, SessionStore
from tests.fakes.slack_api import FakeSlackApi

DATA = Path(__file__).parent / "data" / "slack"


def load_case(name: str) -> Any:
    """A Slack payload from ``tests/bot/data/slack`` (copied from the team's cases)."""
    return json.loads((DATA / name).read_text())


@pytest.fixture
async def slack_api() -> AsyncIterator[FakeSlackApi]:
    """A running fake Slack Web API on 127.0.0.1 (random port), stopped after the test."""
    fake = FakeSlackApi()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
def slack_client(slack_api: FakeSlackApi) -> AsyncWebClient:
    """The real ``AsyncWebClient`` reaching the fake through ``base_url``."""
    return AsyncWebClient(token=slack_api.token, base_url=slack_api.base_url)


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    """A migrated embedded (SQLite) database in the test's temporary directory."""
    db = Database.from_url(None, data_dir=tmp_path)
    await db.migrate()
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
def file_store(database: Database) -> FileStore:
    """The real org file store over the test database."""
    return FileStore(database)


@pytest.fixture
def outbox(database: Database) -> Outbox:
    """The real Slack outbox over the test database."""
    return Outbox(database)


@pytest.fixture
async def thread(database: Database, slack_api: FakeSlackApi) -> Thread:
    """A session's thread: a human @mention seeded in the fake Slack, and its session row."""
    thread_ts = slack_api.add_message("C0FAKEINC", "<@U0FAKEBOT> checkout is returning 500s")
    opened = await SessionStore(database).open_or_join(
        SessionKey("T0FAKETEAM", "C0FAKEINC", thread_ts),
        requester_id="U0FAKEALICE",
        initial_checkpoint="{}",
        text="checkout is returning 500s",
        source_ts=thread_ts,
    )
    return Thread(opened.session_id, "C0FAKEINC", thread_ts)
