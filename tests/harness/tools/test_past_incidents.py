"""``/incidents``: the org's past incidents through Read, Glob and Grep on both backends;
Write and Edit refused; another org's never readable; private channels' by the org's rule;
``/incident/summary.md`` re-indexed when the agent (or a person through it) writes it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import Recall
from memory_store import (
    Database,
    FileStore,
    IncidentSummary,
    Namespace,
    Origin,
    RecallQuery,
    RecallStore,
    Scope,
)
from tests.harness.tool_support import JailWorkspace, SessionDriver, error_text

HUMAN = Origin("U-HUMAN")
NOV = datetime(2026, 11, 2, 14, 0, tzinfo=UTC)
POOL = IncidentSummary(
    title="checkout-api 500s after a deploy shrank the DB pool",
    services=("checkout-api",),
    symptoms="HTTP 500s, connection pool exhausted",
    root_cause="max_pool_size 5 in the 14:02 deploy",
    fix="rolled back config/db.yaml to max_pool_size 50",
)
FINDINGS = "the 500s rise from 14:02 UTC\npool size 5 after the deploy\nPool size 50 before\n"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite; the run's PostgreSQL URL (resolved outside the event loop)."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


@pytest.fixture
async def db(database_url: str | None, tmp_path: Path) -> AsyncIterator[Database]:
    url = database_url
    database = Database.from_url(url, data_dir=tmp_path, pool_size=2, max_overflow=2)
    await database.migrate()
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture
def org() -> str:
    return f"T{uuid.uuid4().hex[:12]}"


def session(db: Database, org: str, channel: str, tmp_path: Path, **recall: bool) -> SessionDriver:
    root = tmp_path / f"ws-{channel}-{uuid.uuid4().hex[:6]}"
    root.mkdir()
    driver = SessionDriver(FileStore(db), JailWorkspace(root), org_id=org, channel_id=channel)
    driver.recall = Recall(RecallStore(db), private_org_wide=recall.get("org_wide", False))
    return driver


async def past_incident(db: Database, org: str, channel: str = "C1") -> None:
    await RecallStore(db).record(org, channel, POOL, started_at=NOV)
    notes = Namespace(org, Scope.INCIDENT, channel)
    await FileStore(db).write(notes, "/findings.md", FINDINGS, HUMAN, expected_version=None)


async def test_grep_over_incidents_works_like_over_incident(
    db: Database, org: str, tmp_path: Path
) -> None:
    await past_incident(db, org)
    there = session(db, org, "C1", tmp_path)
    here = session(db, org, "C9", tmp_path)
    for mode in ("content", "files_with_matches", "count"):
        query = {"pattern": "pool size \\d+", "-i": True, "output_mode": mode, "-C": 1}
        direct = await there.call("Grep", {**query, "path": "/incident"})
        past = await here.call("Grep", {**query, "path": "/incidents"})
        assert not past.is_error, past.content
        assert past.content == direct.content.replace("/incident/", "/incidents/2026-11-02-C1/"), (
            mode
        )
    inside = await here.call("Grep", {"pattern": "14:02", "path": "/incidents/2026-11-02-C1"})
    assert inside.content.endswith("/incidents/2026-11-02-C1/findings.md")
    globbed = await here.call("Glob", {"pattern": "/incidents/**/*.md"})
    assert globbed.content == "/incidents/2026-11-02-C1/findings.md"


async def test_read_lists_and_shows_past_incidents_and_write_and_edit_are_refused(
    db: Database, org: str, tmp_path: Path
) -> None:
    await past_incident(db, org)
    here = session(db, org, "C9", tmp_path)
    root = await here.call("Read", {"file_path": "/incidents"})
    assert root.content.splitlines()[1] == f"- 2026-11-02-C1/ ({POOL.title})"
    folder = await here.call("Read", {"file_path": "/incidents/2026-11-02-C1/"})
    assert "- findings.md (" in folder.content
    read = await here.call("Read", {"file_path": "/incidents/2026-11-02-C1/findings.md"})
    assert read.content.splitlines()[0].endswith("the 500s rise from 14:02 UTC")
    for name, extra in (
        ("Write", {"content": "x"}),
        ("Edit", {"old_string": "pool", "new_string": "POOL"}),
    ):
        refused = await here.call(
            name, {"file_path": "/incidents/2026-11-02-C1/findings.md", **extra}
        )
        assert "/incidents/ is read-only" in error_text(refused)
    unchanged = await FileStore(db).read(Namespace(org, Scope.INCIDENT, "C1"), "/findings.md")
    assert unchanged.content == FINDINGS


async def test_another_orgs_incidents_are_never_readable(
    db: Database, org: str, tmp_path: Path
) -> None:
    other = f"T{uuid.uuid4().hex[:12]}"
    await past_incident(db, other)
    here = session(db, org, "C9", tmp_path)
    read = await here.call("Read", {"file_path": "/incidents/2026-11-02-C1/findings.md"})
    assert read.is_error
    assert "does not exist" in read.content
    assert "empty directory" in (await here.call("Read", {"file_path": "/incidents/"})).content
    grep = await here.call("Grep", {"pattern": "pool", "path": "/incidents"})
    assert grep.content == "No files found"
    glob = await here.call("Glob", {"pattern": "**/*", "path": "/incidents/2026-11-02-C1"})
    assert glob.is_error


async def test_a_private_channels_incident_is_readable_from_it_or_org_wide_when_allowed(
    db: Database, org: str, tmp_path: Path
) -> None:
    await past_incident(db, org, "CPRIV")
    await RecallStore(db).mark_private(org, "CPRIV")
    path = {"file_path": "/incidents/2026-11-02-CPRIV/findings.md"}
    assert (await session(db, org, "C9", tmp_path).call("Read", path)).is_error
    assert not (await session(db, org, "CPRIV", tmp_path).call("Read", path)).is_error
    allowed = session(db, org, "C9", tmp_path, org_wide=True)
    assert not (await allowed.call("Read", path)).is_error


async def test_writing_and_correcting_the_summary_reindexes_it(
    db: Database, org: str, tmp_path: Path
) -> None:
    there = session(db, org, "C1", tmp_path)
    text = (
        "# search-indexer disk full\n\n- Services: search-indexer\n"
        "- Symptoms: indexing stalled, no space left on device\n- Root cause: logrotate off\n"
        "- Fix: cleared old segments\n- Links:\n"
    )
    await there.call("Write", {"file_path": "/incident/summary.md", "content": text})
    recall = RecallStore(db)
    query = RecallQuery(services=("search-indexer",), words=("disk", "space"))
    viewer = Recall(recall).viewer(org, "C9")
    [found] = await recall.related(viewer, query)
    assert found.incident.summary.fix == "cleared old segments"
    edit = {"old_string": "cleared old segments", "new_string": "re-enabled logrotate"}
    await there.call("Edit", {"file_path": "/incident/summary.md", **edit})
    [corrected] = await recall.related(viewer, query)
    assert corrected.incident.summary.fix == "re-enabled logrotate"
    assert corrected.incident.summary_version == 2
