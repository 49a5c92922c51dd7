"""Past incidents' recall on both backends: a past incident of another channel is found for
an alert with the same service and symptom and not for an unrelated one; another org's are
never found nor listed; private channels' incidents follow the org's rule."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memory_store import (
    Database,
    FileStore,
    IncidentSummary,
    Namespace,
    Origin,
    RecallQuery,
    RecallStore,
    Scope,
    Viewer,
    grep_lines,
)

POOL = IncidentSummary(
    title="checkout-api 500s after a deploy shrank the DB pool",
    services=("checkout-api", "postgres"),
    symptoms="HTTP 500 errors on POST /checkout, connection pool exhausted",
    root_cause="the 14:02 deploy set max_pool_size to 5",
    fix="rolled back db.yaml to max_pool_size 50",
    links=("https://example.slack.com/archives/C1/p1",),
)
DISK = IncidentSummary(
    title="search-indexer disk full",
    services=("search-indexer",),
    symptoms="indexing stalled, no space left on device",
    root_cause="log rotation disabled",
    fix="re-enabled logrotate and cleared old segments",
)
NOV = datetime(2026, 11, 2, 14, 0, tzinfo=UTC)


async def test_a_past_incident_of_another_channel_is_found_for_the_same_service_and_symptom(
    file_db: Database, org: str
) -> None:
    recall = RecallStore(file_db)
    await recall.record(org, "C1", POOL, started_at=NOV)
    await recall.record(org, "C2", DISK, started_at=NOV)
    viewer = Viewer(org, "C9")
    alert = RecallQuery(
        services=("checkout-api",), words=("checkout-api", "500s", "pool", "exhausted", "deploy")
    )
    found = await recall.related(viewer, alert)
    assert [r.incident.channel_id for r in found] == ["C1"]
    assert found[0].incident.dir_name == "2026-11-02-C1"
    assert found[0].incident.summary.fix == POOL.fix
    unrelated = RecallQuery(services=("billing-worker",), words=("cron", "job", "late", "queue"))
    assert await recall.related(viewer, unrelated) == []


async def test_prose_alone_finds_it_and_services_weigh_more_than_prose(
    file_db: Database, org: str
) -> None:
    recall = RecallStore(file_db)
    await recall.record(org, "C1", POOL, started_at=NOV)
    prose_twin = IncidentSummary(
        title="payments connection pool exhausted after deploy",
        services=("payments",),
        symptoms="500 errors, connection pool exhausted after deploy",
    )
    await recall.record(org, "C3", prose_twin, started_at=NOV)
    viewer = Viewer(org, "C9")
    words = ("connection", "pool", "exhausted", "deploy")
    found = await recall.related(viewer, RecallQuery(services=("checkout-api",), words=words))
    assert [r.incident.channel_id for r in found][:1] == ["C1"]
    by_prose = await recall.related(viewer, RecallQuery(words=words))
    assert {r.incident.channel_id for r in by_prose} == {"C1", "C3"}


async def test_the_own_channel_is_not_related_and_the_start_date_is_kept(
    file_db: Database, org: str
) -> None:
    recall = RecallStore(file_db)
    first = await recall.record(org, "C1", POOL, started_at=NOV)
    again = await recall.record(org, "C1", DISK, summary_version=3)
    assert again.dir_name == first.dir_name
    [listed] = await recall.incidents(Viewer(org, "C1"))
    assert listed.summary == DISK
    assert listed.summary_version == 3
    query = RecallQuery(services=("search-indexer",), words=("disk", "full"))
    assert await recall.related(Viewer(org, "C1"), query) == []
    assert [r.incident.channel_id for r in await recall.related(Viewer(org, "C2"), query)] == ["C1"]
    # the old summary is no longer indexed
    old = RecallQuery(services=("checkout-api",), words=("pool", "exhausted"))
    assert await recall.related(Viewer(org, "C2"), old) == []


async def test_another_orgs_incidents_are_never_found_nor_listed(
    file_db: Database, org: str
) -> None:
    recall = RecallStore(file_db)
    other = f"T{uuid.uuid4().hex[:12]}"
    await recall.record(other, "C1", POOL, started_at=NOV)
    await FileStore(file_db).write(
        Namespace(other, Scope.INCIDENT, "C1"),
        "/findings.md",
        "pool",
        Origin("u"),
        expected_version=None,
    )
    viewer = Viewer(org, "C9", private_org_wide=True)
    query = RecallQuery(services=("checkout-api",), words=("pool", "exhausted"))
    assert await recall.related(viewer, query) == []
    assert await recall.incidents(viewer) == []
    assert await recall.incident(viewer, "2026-11-02-C1") is None
    assert await recall.files(viewer) == []
    assert [f.path for f in await recall.files(Viewer(other, "C9"))] == ["/findings.md"]


async def test_a_private_channels_incident_is_seen_from_that_channel_or_org_wide_if_allowed(
    file_db: Database, org: str
) -> None:
    recall = RecallStore(file_db)
    await recall.record(org, "CPRIV", POOL, started_at=NOV)
    await recall.mark_private(org, "CPRIV")
    await recall.mark_private(org, "CPRIV")  # idempotent
    query = RecallQuery(services=("checkout-api",), words=("pool",))
    elsewhere = Viewer(org, "C9")
    assert await recall.related(elsewhere, query) == []
    assert await recall.incidents(elsewhere) == []
    assert await recall.incident(elsewhere, "2026-11-02-CPRIV") is None
    [own] = await recall.incidents(Viewer(org, "CPRIV"))
    assert own.private
    org_wide = Viewer(org, "C9", private_org_wide=True)
    assert [r.incident.channel_id for r in await recall.related(org_wide, query)] == ["CPRIV"]
    assert await recall.incident(org_wide, "2026-11-02-CPRIV") is not None


async def test_notes_of_visible_incidents_are_read_in_one_statement(
    file_db: Database, org: str
) -> None:
    recall, files = RecallStore(file_db), FileStore(file_db)
    await recall.record(org, "C1", POOL, started_at=NOV)
    await recall.record(org, "C2", DISK, started_at=NOV)
    await recall.mark_private(org, "C2")
    for channel in ("C1", "C2", "C3"):  # C3 has notes but no recorded summary
        await files.write(
            Namespace(org, Scope.INCIDENT, channel),
            "/findings.md",
            f"Pool in {channel}",
            Origin("u"),
            expected_version=None,
        )
    viewer = Viewer(org, "C9")
    assert [(f.dir_name, f.path) for f in await recall.files(viewer)] == [
        ("2026-11-02-C1", "/findings.md")
    ]
    assert await recall.files(viewer, containing="pool", ignore_case=True) != []
    assert await recall.files(viewer, containing="no such text") == []
    assert await recall.files(viewer, "2026-11-02-C2") == []


async def test_what_a_session_was_given_is_kept_once(file_db: Database, org: str) -> None:
    recall = RecallStore(file_db)
    item = {"title": "t", "path": "/incidents/2026-11-02-C1/"}
    await recall.note_given("s1", org, "C9", [item], thread_ts="1.0001")
    await recall.note_given("s1", org, "C9", [], thread_ts="1.0001")  # a step run again
    [given] = await recall.given(org, "C9")
    assert given.session_id == "s1"
    assert given.thread_ts == "1.0001"
    assert list(given.items) == [item]
    assert await recall.given(org, "C1") == []


async def test_grep_and_glob_over_the_tree_work_like_over_one_incident(
    file_db: Database, org: str
) -> None:
    recall, files = RecallStore(file_db), FileStore(file_db)
    await recall.record(org, "C1", POOL, started_at=NOV)
    ns = Namespace(org, Scope.INCIDENT, "C1")
    text = "pool size 5\nthe 500s rise from 14:02\npool size 50 restored\n"
    await files.write(ns, "/findings.md", text, Origin("u"), expected_version=None)
    await files.write(ns, "/raw/log.txt", "pool x\n", Origin("u"), expected_version=None)
    viewer = Viewer(org, "C9")
    direct = grep_lines(await files.grep(ns, r"pool size \d+", before=1))
    tree = grep_lines(await recall.grep(viewer, r"pool size \d+", before=1))
    assert [(m.line_number, m.line, m.is_context) for m in tree] == [
        (m.line_number, m.line, m.is_context) for m in direct
    ]
    assert {m.path for m in tree} == {"/2026-11-02-C1/findings.md"}
    inside = grep_lines(
        await recall.grep(viewer, "pool", prefix="/2026-11-02-C1/raw", glob="*.txt")
    )
    assert [m.path for m in inside] == ["/2026-11-02-C1/raw/log.txt"]
    names = await recall.glob(viewer, "**/*.md", generated=("timeline.md",))
    assert {e.path for e in names} == {
        "/2026-11-02-C1/findings.md",
        "/2026-11-02-C1/timeline.md",
    }
    assert await recall.grep(Viewer(f"T{uuid.uuid4().hex[:12]}", "C9"), "pool") == []
