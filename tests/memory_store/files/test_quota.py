"""Conformance: per-org quotas on file count and bytes (both backends)."""

from __future__ import annotations

import pytest

from memory_store import Database, FileStore, Limits, Namespace, QuotaExceeded, Scope
from tests.memory_store.file_support import who


async def test_creating_a_file_past_the_file_quota_is_refused(file_db: Database, org: str) -> None:
    # Given an org allowed two files, holding one memory file and one incident note
    store = FileStore(file_db, Limits(max_files_per_org=2))
    await store.write(Namespace(org, Scope.MEMORY), "/a.md", "x", who(), expected_version=0)
    await store.write(Namespace(org, Scope.INCIDENT, "C1"), "/b.md", "x", who(), expected_version=0)

    # When a third file is created in any scope
    with pytest.raises(QuotaExceeded) as caught:
        await store.write(Namespace(org, Scope.SKILLS), "/c.md", "x", who(), expected_version=0)

    # Then the error says which quota and how full it is
    error = caught.value
    assert (error.org_id, error.what, error.used, error.limit) == (org, "files", 2, 2)


async def test_replacing_a_file_at_the_file_quota_is_allowed(
    file_db: Database, memory: Namespace
) -> None:
    store = FileStore(file_db, Limits(max_files_per_org=1))
    await store.write(memory, "/a.md", "x", who(), expected_version=0)

    result = await store.write(memory, "/a.md", "y", who(), expected_version=1)

    assert result.version == 2


async def test_deleting_a_file_frees_its_quota(file_db: Database, memory: Namespace) -> None:
    store = FileStore(file_db, Limits(max_files_per_org=1))
    await store.write(memory, "/a.md", "x", who(), expected_version=0)
    await store.delete(memory, "/a.md", who())

    result = await store.write(memory, "/b.md", "y", who(), expected_version=0)

    assert result.created


async def test_growth_past_the_byte_quota_is_refused_for_every_kind_of_change(
    file_db: Database, memory: Namespace
) -> None:
    store = FileStore(file_db, Limits(max_bytes_per_org=10))
    await store.write(memory, "/a.md", "12345", who(), expected_version=0)
    await store.write(memory, "/b.md", "1234", who(), expected_version=0)

    with pytest.raises(QuotaExceeded) as conditional:
        await store.write(memory, "/a.md", "1234567", who(), expected_version=1)
    with pytest.raises(QuotaExceeded):
        await store.write(memory, "/a.md", "1234567", who(), expected_version=None)
    with pytest.raises(QuotaExceeded):
        await store.edit(memory, "/a.md", "5", "567", who())
    with pytest.raises(QuotaExceeded):
        await store.write(memory, "/c.md", "12", who(), expected_version=0)

    assert (conditional.value.what, conditional.value.used, conditional.value.limit) == (
        "bytes",
        9,
        10,
    )
    assert (await store.read(memory, "/a.md")).version == 1


async def test_growth_up_to_the_byte_quota_and_shrinking_are_allowed(
    file_db: Database, memory: Namespace
) -> None:
    store = FileStore(file_db, Limits(max_bytes_per_org=10))
    await store.write(memory, "/a.md", "12345", who(), expected_version=0)

    grown = await store.write(memory, "/a.md", "1234567890", who(), expected_version=1)
    shrunk = await store.edit(memory, "/a.md", "67890", "", who())

    assert (grown.version, shrunk.version, shrunk.content) == (2, 3, "12345")


async def test_quotas_are_per_org(file_db: Database, org: str) -> None:
    store = FileStore(file_db, Limits(max_files_per_org=1))
    await store.write(Namespace(org, Scope.MEMORY), "/a.md", "x", who(), expected_version=0)

    result = await store.write(
        Namespace(org + "-other", Scope.MEMORY), "/a.md", "x", who(), expected_version=0
    )

    assert result.created


async def test_memory_cannot_take_the_room_kept_for_incident_notes(
    file_db: Database, org: str
) -> None:
    # Given an org of 10 files, a tenth of them kept for /incident, memory filled to 9
    store = FileStore(file_db, Limits(max_files_per_org=10, incident_reserve_share=0.1))
    memory = Namespace(org, Scope.MEMORY)
    for i in range(9):
        await store.write(memory, f"/spam-{i}.md", "x", who(), expected_version=0)

    # When one more memory file and then an incident note are written
    with pytest.raises(QuotaExceeded) as caught:
        await store.write(memory, "/more.md", "x", who(), expected_version=0)
    note = await store.write(
        Namespace(org, Scope.INCIDENT, "C1"),
        "/timeline.md",
        "14:02 500s",
        who(),
        expected_version=0,
    )

    # Then memory is refused with advice, and the note still fits
    assert (caught.value.used, caught.value.limit) == (9, 9)
    assert "warroom memory rm" in str(caught.value)
    assert note.created


async def test_the_usage_counter_follows_every_kind_of_change(
    file_db: Database, memory: Namespace, org: str
) -> None:
    store = FileStore(file_db)
    await store.write(memory, "/a.md", "12345", who(), expected_version=0)
    await store.write(memory, "/b.md", "123", who(), expected_version=0)
    await store.edit(memory, "/a.md", "12345", "1234567890", who())
    await store.write(memory, "/b.md", "1", who(), expected_version=1)  # the one-statement path
    await store.delete(memory, "/a.md", who())
    await store.restore(memory, "/a.md", 1, who())

    files = await store.glob(memory, "**")
    assert await store.usage(org) == (2, 6)
    assert sum(e.size_bytes or 0 for e in files) == 6
