"""Conformance: read and write (both backends)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_store import (
    Database,
    FileNotFound,
    FileStore,
    FileTooLarge,
    InvalidContent,
    Limits,
    Namespace,
    StaleVersion,
)
from tests.memory_store.file_support import who


async def test_write_creates_a_file_at_version_one_that_read_returns(
    store: FileStore, memory: Namespace
) -> None:
    result = await store.write(
        memory, "/teams/payments.md", "deploys from release\n", who(), expected_version=0
    )

    assert (result.version, result.base_version, result.created, result.unchanged) == (
        1,
        0,
        True,
        False,
    )
    current = await store.read(memory, "/teams/payments.md")
    assert (current.path, current.version, current.content) == (
        "/teams/payments.md",
        1,
        "deploys from release\n",
    )


async def test_read_reports_who_made_the_version_and_when(
    store: FileStore, memory: Namespace
) -> None:
    before = datetime.now(UTC)
    await store.write(memory, "/a.md", "x", who(actor="U123", session="S9"), expected_version=0)

    current = await store.read(memory, "/a.md")

    assert (current.actor, current.session_id) == ("U123", "S9")
    assert current.updated_at.tzinfo is not None
    assert before - timedelta(seconds=1) <= current.updated_at <= datetime.now(UTC)


async def test_read_of_a_missing_file_raises_file_not_found(
    store: FileStore, memory: Namespace
) -> None:
    with pytest.raises(FileNotFound) as caught:
        await store.read(memory, "/nope.md")
    assert caught.value.path == "/nope.md"


async def test_write_at_the_current_version_replaces_content_and_bumps_version(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "one", who(), expected_version=0)

    result = await store.write(memory, "/a.md", "two", who(), expected_version=1)

    assert (result.version, result.base_version, result.created) == (2, 1, False)
    assert (await store.read(memory, "/a.md")).content == "two"


async def test_write_at_a_stale_version_raises_stale_version_carrying_the_current_one(
    store: FileStore, memory: Namespace
) -> None:
    # Given a file another session moved to version 2
    await store.write(memory, "/a.md", "one", who(), expected_version=0)
    await store.write(memory, "/a.md", "two", who(actor="U2", session="S2"), expected_version=1)

    # When this session writes from version 1
    with pytest.raises(StaleVersion) as caught:
        await store.write(memory, "/a.md", "mine", who(), expected_version=1)

    # Then it learns the current version and who made it, and nothing changed
    error = caught.value
    assert (error.expected_version, error.current_version) == (1, 2)
    assert (error.changed_by_actor, error.changed_by_session) == ("U2", "S2")
    assert (await store.read(memory, "/a.md")).content == "two"


async def test_write_expecting_absence_refuses_an_existing_file(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "one", who(), expected_version=0)

    with pytest.raises(StaleVersion) as caught:
        await store.write(memory, "/a.md", "other", who(), expected_version=0)

    assert caught.value.current_version == 1


async def test_write_expecting_a_version_of_a_missing_file_is_stale_at_version_zero(
    store: FileStore, memory: Namespace
) -> None:
    with pytest.raises(StaleVersion) as caught:
        await store.write(memory, "/a.md", "x", who(), expected_version=3)

    assert caught.value.current_version == 0
    assert caught.value.changed_by_actor is None


async def test_unconditional_write_replaces_whatever_is_there(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "one", who(), expected_version=None)
    result = await store.write(memory, "/a.md", "two", who(), expected_version=None)

    assert (result.version, result.created) == (2, False)
    assert (await store.read(memory, "/a.md")).content == "two"


async def test_writing_identical_content_is_unchanged_and_makes_no_version(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "same", who(), expected_version=0)

    for expected in (1, None, 0):
        result = await store.write(memory, "/a.md", "same", who(), expected_version=expected)
        assert (result.version, result.unchanged) == (1, True)
    assert len(await store.history(memory, "/a.md")) == 1


async def test_unicode_content_round_trips(store: FileStore, memory: Namespace) -> None:
    content = "naïve café 🚒 — 火事\n\ttabs and \r\n crlf\n"
    await store.write(memory, "/ü.md", content, who(), expected_version=0)

    assert (await store.read(memory, "/ü.md")).content == content


async def test_content_over_the_size_cap_is_refused_counting_utf8_bytes(
    file_db: Database, memory: Namespace
) -> None:
    store = FileStore(file_db, Limits(max_file_bytes=10))
    await store.write(memory, "/ok.md", "x" * 10, who(), expected_version=0)

    with pytest.raises(FileTooLarge) as caught:
        await store.write(memory, "/big.md", "é" * 6, who(), expected_version=0)

    assert (caught.value.size_bytes, caught.value.limit_bytes) == (12, 10)
    with pytest.raises(FileNotFound):
        await store.read(memory, "/big.md")


async def test_content_with_nul_characters_is_refused(store: FileStore, memory: Namespace) -> None:
    with pytest.raises(InvalidContent):
        await store.write(memory, "/a.md", "bin\x00ary", who(), expected_version=0)


async def test_each_change_of_a_conditional_write_chain_is_one_new_version(
    store: FileStore, memory: Namespace
) -> None:
    version = 0
    for i in range(5):
        version = (
            await store.write(memory, "/a.md", f"v{i}", who(), expected_version=version)
        ).version

    assert version == 5
    assert [r.version for r in await store.history(memory, "/a.md")] == [1, 2, 3, 4, 5]
