"""Conformance: delete, history and restore (both backends)."""

from __future__ import annotations

import pytest

from memory_store import (
    FileNotFound,
    FileStore,
    Namespace,
    StaleVersion,
    VersionNotFound,
)
from tests.memory_store.file_support import who


async def test_delete_hides_the_file_and_returns_the_tombstone_version(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "x", who(), expected_version=0)

    tombstone = await store.delete(memory, "/a.md", who())

    assert tombstone == 2
    with pytest.raises(FileNotFound):
        await store.read(memory, "/a.md")
    assert await store.listdir(memory) == []


async def test_delete_of_a_missing_file_raises_file_not_found(
    store: FileStore, memory: Namespace
) -> None:
    with pytest.raises(FileNotFound):
        await store.delete(memory, "/a.md", who())


async def test_delete_of_a_deleted_file_raises_file_not_found(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "x", who(), expected_version=0)
    await store.delete(memory, "/a.md", who())

    with pytest.raises(FileNotFound):
        await store.delete(memory, "/a.md", who())


async def test_delete_at_a_stale_version_raises_stale_version(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "x", who(), expected_version=0)
    await store.write(memory, "/a.md", "y", who(), expected_version=1)

    with pytest.raises(StaleVersion) as caught:
        await store.delete(memory, "/a.md", who(), expected_version=1)

    assert caught.value.current_version == 2
    assert (await store.read(memory, "/a.md")).content == "y"


async def test_writing_a_deleted_path_recreates_it_at_the_next_version(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "x", who(), expected_version=0)
    await store.delete(memory, "/a.md", who())

    result = await store.write(memory, "/a.md", "again", who(), expected_version=0)

    assert (result.version, result.base_version, result.created) == (3, 0, True)
    assert (await store.read(memory, "/a.md")).content == "again"


async def test_history_lists_every_revision_oldest_first_with_who_and_how(
    store: FileStore, memory: Namespace
) -> None:
    # Given a file created, edited, rewritten, deleted and restored
    await store.write(memory, "/a.md", "one\n", who("t1", actor="U1"), expected_version=0)
    await store.edit(memory, "/a.md", "one", "two", who("t2", session="S2"))
    await store.write(memory, "/a.md", "three\n", who("t3"), expected_version=2)
    await store.delete(memory, "/a.md", who("t4"))
    await store.restore(memory, "/a.md", 2, who("t5", actor="cli", session=""))

    # When its history is read
    history = await store.history(memory, "/a.md")

    # Then every version is there, deletes included, with who made it
    assert [(r.version, r.base_version, r.operation) for r in history] == [
        (1, 0, "create"),
        (2, 1, "edit"),
        (3, 2, "write"),
        (4, 3, "delete"),
        (5, 0, "restore"),
    ]
    assert [r.content for r in history] == ["one\n", "two\n", "three\n", None, "two\n"]
    assert [r.tool_use_id for r in history] == ["t1", "t2", "t3", "t4", "t5"]
    assert (history[0].actor, history[1].session_id, history[4].actor) == ("U1", "S2", "cli")
    assert all(r.created_at.tzinfo is not None for r in history)
    assert [r.created_at for r in history] == sorted(r.created_at for r in history)


async def test_history_of_a_path_that_never_existed_raises_file_not_found(
    store: FileStore, memory: Namespace
) -> None:
    with pytest.raises(FileNotFound):
        await store.history(memory, "/never.md")


async def test_restore_makes_old_content_current_as_a_new_version(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "good", who(), expected_version=0)
    await store.write(memory, "/a.md", "bad", who(), expected_version=1)

    result = await store.restore(memory, "/a.md", 1, who())

    assert (result.version, result.base_version, result.created) == (3, 2, False)
    assert (await store.read(memory, "/a.md")).content == "good"


async def test_restore_brings_back_a_deleted_file(store: FileStore, memory: Namespace) -> None:
    await store.write(memory, "/a.md", "keep", who(), expected_version=0)
    await store.delete(memory, "/a.md", who())

    result = await store.restore(memory, "/a.md", 1, who())

    assert (result.version, result.created) == (3, True)
    assert (await store.read(memory, "/a.md")).content == "keep"


async def test_restore_of_the_current_content_is_unchanged(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "same", who(), expected_version=0)

    result = await store.restore(memory, "/a.md", 1, who())

    assert (result.version, result.unchanged) == (1, True)


async def test_restore_of_an_unknown_version_raises_version_not_found(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "x", who(), expected_version=0)

    with pytest.raises(VersionNotFound) as caught:
        await store.restore(memory, "/a.md", 7, who())

    assert caught.value.version == 7


async def test_restore_of_a_deletion_raises_version_not_found(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "x", who(), expected_version=0)
    await store.delete(memory, "/a.md", who())

    with pytest.raises(VersionNotFound):
        await store.restore(memory, "/a.md", 2, who())


async def test_restore_of_a_path_that_never_existed_raises_file_not_found(
    store: FileStore, memory: Namespace
) -> None:
    with pytest.raises(FileNotFound) as caught:
        await store.restore(memory, "/never.md", 1, who())

    assert not isinstance(caught.value, VersionNotFound)


async def test_history_comes_in_pages_oldest_first(store: FileStore, memory: Namespace) -> None:
    for i in range(1, 6):
        await store.write(memory, "/p.md", f"v{i}", who(), expected_version=i - 1)

    newest = await store.history(memory, "/p.md", limit=2)
    before = await store.history(memory, "/p.md", before_version=newest[0].version, limit=2)
    first = await store.history(memory, "/p.md", before_version=before[0].version, limit=2)

    assert [r.version for r in newest] == [4, 5]
    assert [r.version for r in before] == [2, 3]
    assert [r.version for r in first] == [1]


async def test_contents_at_reads_only_the_asked_versions(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/c.md", "one", who(), expected_version=0)
    await store.write(memory, "/c.md", "two", who(), expected_version=1)
    await store.delete(memory, "/c.md", who())

    found = await store.contents_at(memory, "/c.md", [1, 3, 9])

    assert found == {1: "one", 3: None}
