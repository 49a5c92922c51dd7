"""Conformance: a repeated tool call (same tool_use id) is a no-op (both backends)."""

from __future__ import annotations

import asyncio

from memory_store import FileStore, Namespace
from tests.memory_store.file_support import who


async def test_repeated_write_with_the_same_tool_use_id_returns_the_first_result(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "one", who(), expected_version=0)
    first = await store.write(memory, "/a.md", "two", who("tu-1"), expected_version=1)

    # The retry names version 1, which is stale now: it must still be the first result
    again = await store.write(memory, "/a.md", "two", who("tu-1"), expected_version=1)

    assert again == first
    assert len(await store.history(memory, "/a.md")) == 2


async def test_repeated_create_with_the_same_tool_use_id_returns_the_first_result(
    store: FileStore, memory: Namespace
) -> None:
    first = await store.write(memory, "/a.md", "one", who("tu-1"), expected_version=0)

    again = await store.write(memory, "/a.md", "one", who("tu-1"), expected_version=0)

    assert again == first
    assert again.created is True


async def test_repeated_edit_with_the_same_tool_use_id_returns_the_first_result(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "status: red\n", who(), expected_version=0)
    first = await store.edit(memory, "/a.md", "red", "green", who("tu-2"), seen_version=1)

    # "red" is gone now; without idempotency the retry would fail with StringNotFound
    again = await store.edit(memory, "/a.md", "red", "green", who("tu-2"), seen_version=1)

    assert again == first
    assert len(await store.history(memory, "/a.md")) == 2


async def test_repeated_delete_with_the_same_tool_use_id_returns_the_first_tombstone(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "x", who(), expected_version=0)
    first = await store.delete(memory, "/a.md", who("tu-3"))

    again = await store.delete(memory, "/a.md", who("tu-3"))

    assert again == first == 2


async def test_the_same_tool_use_id_on_another_file_is_a_separate_change(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "x", who("tu-4"), expected_version=0)

    result = await store.write(memory, "/b.md", "y", who("tu-4"), expected_version=0)

    assert (result.path, result.version) == ("/b.md", 1)
    assert (await store.read(memory, "/b.md")).content == "y"


async def test_concurrent_duplicates_of_one_tool_call_make_one_revision(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "count: 1\n", who(), expected_version=0)

    results = await asyncio.gather(
        *(store.edit(memory, "/a.md", "1", "2", who("tu-5")) for _ in range(5))
    )

    assert len(set(results)) == 1
    assert [r.version for r in await store.history(memory, "/a.md")] == [1, 2]


async def test_concurrent_duplicates_of_one_create_make_one_revision(
    store: FileStore, memory: Namespace
) -> None:
    results = await asyncio.gather(
        *(store.write(memory, "/a.md", "x", who("tu-6"), expected_version=0) for _ in range(5))
    )

    assert {(r.version, r.created) for r in results} == {(1, True)}
    assert len(await store.history(memory, "/a.md")) == 1
