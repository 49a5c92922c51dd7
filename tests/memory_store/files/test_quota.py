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
