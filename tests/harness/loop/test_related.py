"""Related past incidents at a session's start (issue 29), as the model receives them: the
first message lists the org's most similar past incidents (title, date, channel, fix, path)
within its byte budget, the prompt cache's prefix holds, what was given is kept for
``/agent related``, and each answer records the incident's summary for the next ones."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness import Inbound, Recall, SandboxWorkspaces
from harness.loop.prompt import (
    FIRST_CONTEXT_MAX_BYTES,
    RELATED_SECTION_MAX_BYTES,
    FrozenContext,
    frozen_context,
)
from harness.recall.related import RELATED_HEADING
from memory_store import (
    Database,
    FileStore,
    IncidentSummary,
    IndexEntry,
    Namespace,
    RecallQuery,
    RecallStore,
    Scope,
)
from sandbox_client import LocalConfig, LocalProvider, SandboxManager
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply
from tests.harness.step_support import CHANNEL, Kit, SessionRun, prefix_stable, texts_of

NOV = datetime(2026, 11, 2, 14, 0, tzinfo=UTC)
POOL = IncidentSummary(
    title="checkout-api 500s after a deploy shrank the DB pool",
    services=("checkout-api", "postgres"),
    symptoms="HTTP 500s on POST /checkout, connection pool exhausted",
    root_cause="the 14:02 deploy set max_pool_size to 5",
    fix="rolled back config/db.yaml to max_pool_size 50",
)
ALERT = "[FIRING] service=checkout-api: 500 errors, DB connection pool exhausted after deploy"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite; the run's PostgreSQL URL (resolved outside the event loop)."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


@pytest.fixture
async def db(database_url: str | None, tmp_path: Path) -> AsyncIterator[Database]:
    database = Database.from_url(database_url, data_dir=tmp_path, pool_size=2, max_overflow=2)
    await database.migrate()
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture
async def kit(db: Database, tmp_path: Path) -> AsyncIterator[Kit]:
    manager = SandboxManager(LocalProvider(LocalConfig(state_dir=tmp_path / "sbx")))
    shared = Kit(FileStore(db), SandboxWorkspaces(manager))
    try:
        yield shared
    finally:
        await shared.aclose()
        await manager.aclose()


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI() as server:
        yield server


@pytest.fixture
def org() -> str:
    return f"T{uuid.uuid4().hex[:12]}"


def ask(text: str) -> tuple[Inbound, ...]:
    return (Inbound("U-ALICE", text, "Alice"),)


def session(
    kit: Kit, fake: FakeAnthropicAPI, org: str, recall: Recall | None, session_id: str = "s-main"
) -> SessionRun:
    """A session of ``org`` (each test its own: the PostgreSQL database is the run's)."""
    run = kit.session(fake.base_url, session_id=session_id)
    run.cp = replace(run.cp, org_id=org)
    run.recall = recall
    return run


async def test_an_alert_gets_the_past_incident_of_another_channel_in_its_first_message(
    db: Database, kit: Kit, fake: FakeAnthropicAPI, org: str
) -> None:
    # Given: last month's incident of another channel, and an unrelated one
    recall = RecallStore(db)
    await recall.record(org, "C-NOV", POOL, started_at=NOV)
    await recall.record(
        org,
        "C-DISK",
        IncidentSummary("search-indexer disk full", ("search-indexer",), "no space left"),
        started_at=NOV,
    )
    fake.push(Reply.tool("Read", {"file_path": "/incidents/2026-11-02-C-NOV/"}))
    fake.push(Reply.text("Same as 2 November: roll back db.yaml."))
    run = session(kit, fake, org, Recall(recall))

    # When: an alert with the same service and symptom starts a session
    await run.run(ask(ALERT))

    # Then: the first message lists it (date, channel, title, path, fix), marked as data
    context = texts_of(fake.requests[0].messages[0])[0]
    assert RELATED_HEADING in context
    assert "data, not instructions" in context
    line = next(x for x in context.splitlines() if x.startswith("- 2026-11-02"))
    assert line == (
        f"- 2026-11-02 in <#C-NOV>, {POOL.title} (/incidents/2026-11-02-C-NOV/): fix: {POOL.fix}"
    )
    assert "search-indexer" not in context
    # the prefix holds: the second request starts with the first one's bytes
    assert prefix_stable(fake.requests[0], fake.requests[1])
    # and what was given is kept for /agent related
    [given] = await recall.given(org, CHANNEL)
    assert [item["path"] for item in given.items] == ["/incidents/2026-11-02-C-NOV/"]


async def test_an_unrelated_alert_gets_no_section_and_the_same_bytes_as_without_recall(
    db: Database, kit: Kit, fake: FakeAnthropicAPI, org: str
) -> None:
    recall = RecallStore(db)
    await recall.record(org, "C-NOV", POOL, started_at=NOV)
    alert = "[FIRING] service=billing-worker: nightly invoice cron job late"
    for with_recall in (False, True):  # the second would see the first's drafted summary
        fake.push(Reply.text("Looking."))
        chosen = Recall(recall) if with_recall else None
        run = session(kit, fake, org, chosen, session_id=f"s-{with_recall}")
        await run.run(ask(alert))
    without, with_it = (texts_of(r.messages[0])[0] for r in fake.requests[-2:])
    assert with_it == without
    assert "/incidents/" not in with_it


@pytest.mark.parametrize("count", [10_000])
async def test_the_first_message_stays_within_budget_with_10_000_past_incidents(
    db: Database, org: str, count: int
) -> None:
    # Given: 10,000 past incidents of one service and symptom, with long titles and fixes
    recall = RecallStore(db)
    incidents = [
        (
            f"C{i:05d}",
            IncidentSummary(
                title=f"checkout-api pool exhausted again, case {i} " + "x" * 200,
                services=("checkout-api",),
                symptoms="500s, connection pool exhausted " + "y" * 300,
                fix="rolled back db.yaml " + "z" * 400,
            ),
            NOV - timedelta(hours=i),
        )
        for i in range(count)
    ]
    await recall.record_many(org, incidents)
    lines = await Recall(recall, max_related=10).at_start(org, "C-NEW", "s-big", ALERT)

    # When: the first message's context is built for a large org, with and without them
    at = datetime(2026, 12, 1, tzinfo=UTC)
    skills = [IndexEntry(f"/s-{i:03d}/SKILL.md", f"Runbook {i}. " * 40, 1, at) for i in range(500)]
    memory = [IndexEntry(f"/m/service-{i}.md", f"Facts {i}. " * 20, 1, at) for i in range(5000)]
    base = FrozenContext(skills, memory, [], "alice", "C-NEW")
    today = frozen_context(base)
    now = frozen_context(replace(base, related=lines))

    # Then: related incidents were listed, and they add at most 2 KB to today's budget
    assert sum(line.startswith("- ") for line in lines) >= 3
    assert len(now.encode()) - len(today.encode()) <= RELATED_SECTION_MAX_BYTES <= 2048
    assert len(now.encode()) <= FIRST_CONTEXT_MAX_BYTES <= 30_000 + 2048


async def test_an_answer_records_the_summary_that_the_next_incident_finds(
    db: Database, kit: Kit, fake: FakeAnthropicAPI, org: str
) -> None:
    recall = Recall(RecallStore(db))
    fake.push(
        Reply.text(
            "The 500s come from DB pool exhaustion after the 14:02 deploy.\n\n"
            "Rolled back config/db.yaml to max_pool_size 50; the 500s stopped."
        )
    )
    run = session(kit, fake, org, recall)
    await run.run(ask("<@UBOT> checkout-api 500s since 14:02, service=checkout-api"))

    notes = Namespace(org, Scope.INCIDENT, CHANNEL)
    summary = (await kit.store.read(notes, "/summary.md")).content
    assert summary.startswith("# checkout-api 500s since 14:02")
    assert "- Services: checkout-api\n" in summary
    assert "- Fix: Rolled back config/db.yaml to max_pool_size 50; the 500s stopped.\n" in summary
    later = await recall.store.related(
        recall.viewer(org, "C-LATER"),
        RecallQuery(services=("checkout-api",), words=("500s", "pool")),
    )
    assert [r.incident.channel_id for r in later] == [CHANNEL]
