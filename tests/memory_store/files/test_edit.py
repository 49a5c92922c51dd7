"""Conformance: edit against the current content (both backends)."""

from __future__ import annotations

import pytest

from memory_store import (
    AmbiguousMatch,
    Database,
    FileExists,
    FileNotFound,
    FileStore,
    FileTooLarge,
    Limits,
    Namespace,
    NoChange,
    StringNotFound,
)
from tests.memory_store.file_support import who

NOTES = "# Checkout outage\n- pods: crashlooping\n- db: fine\n"


async def test_edit_replaces_a_unique_string_and_returns_the_new_content(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/n.md", NOTES, who(), expected_version=0)

    result = await store.edit(memory, "/n.md", "crashlooping", "OOMKilled", who(), seen_version=1)

    assert (result.version, result.base_version, result.replacements) == (2, 1, 1)
    assert result.content == NOTES.replace("crashlooping", "OOMKilled")
    assert result.concurrent_change is False
    assert (await store.read(memory, "/n.md")).content == result.content


async def test_edit_applies_to_current_version_when_other_lines_changed(
    store: FileStore, memory: Namespace
) -> None:
    # Given this session read version 1, then another session changed another line
    await store.write(memory, "/n.md", NOTES, who(), expected_version=0)
    await store.edit(memory, "/n.md", "db: fine", "db: pool exhausted", who(session="S2"))

    # When this session edits the line it saw
    result = await store.edit(memory, "/n.md", "crashlooping", "OOMKilled", who(), seen_version=1)

    # Then both changes are in the file and the caller is told about the other one
    assert result.content == "# Checkout outage\n- pods: OOMKilled\n- db: pool exhausted\n"
    assert (result.version, result.base_version, result.concurrent_change) == (3, 2, True)


async def test_edit_with_identical_strings_raises_no_change(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/n.md", NOTES, who(), expected_version=0)

    with pytest.raises(NoChange):
        await store.edit(memory, "/n.md", "db", "db", who())


async def test_edit_of_a_missing_file_raises_file_not_found(
    store: FileStore, memory: Namespace
) -> None:
    with pytest.raises(FileNotFound):
        await store.edit(memory, "/n.md", "a", "b", who())


async def test_edit_of_a_deleted_file_raises_file_not_found(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/n.md", NOTES, who(), expected_version=0)
    await store.delete(memory, "/n.md", who())

    with pytest.raises(FileNotFound):
        await store.edit(memory, "/n.md", "db", "DB", who())


async def test_edit_with_an_absent_string_raises_string_not_found_with_current_version(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/n.md", NOTES, who(), expected_version=0)
    await store.write(memory, "/n.md", NOTES + "more\n", who(), expected_version=1)

    with pytest.raises(StringNotFound) as caught:
        await store.edit(memory, "/n.md", "no such text", "x", who())

    assert caught.value.current_version == 2


async def test_edit_with_a_repeated_string_raises_ambiguous_match_with_the_count(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/n.md", NOTES, who(), expected_version=0)

    with pytest.raises(AmbiguousMatch) as caught:
        await store.edit(memory, "/n.md", "- ", "* ", who())

    assert (caught.value.count, caught.value.current_version) == (2, 1)
    assert (await store.read(memory, "/n.md")).content == NOTES


async def test_edit_with_replace_all_replaces_every_occurrence(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/n.md", NOTES, who(), expected_version=0)

    result = await store.edit(memory, "/n.md", "- ", "* ", who(), replace_all=True)

    assert result.replacements == 2
    assert result.content == NOTES.replace("- ", "* ")


async def test_edit_with_an_empty_old_string_creates_a_missing_file(
    store: FileStore, memory: Namespace
) -> None:
    result = await store.edit(memory, "/new.md", "", "hello\n", who())

    assert (result.version, result.base_version, result.content) == (1, 0, "hello\n")
    assert [r.operation for r in await store.history(memory, "/new.md")] == ["create"]


async def test_edit_with_an_empty_old_string_fills_an_empty_file(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/e.md", "", who(), expected_version=0)

    result = await store.edit(memory, "/e.md", "", "filled", who())

    assert (result.version, result.content) == (2, "filled")


async def test_edit_with_an_empty_old_string_on_a_non_empty_file_raises_file_exists(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/n.md", NOTES, who(), expected_version=0)

    with pytest.raises(FileExists):
        await store.edit(memory, "/n.md", "", "x", who())


async def test_edit_that_grows_a_file_past_the_cap_raises_file_too_large(
    file_db: Database, memory: Namespace
) -> None:
    store = FileStore(file_db, Limits(max_file_bytes=20))
    await store.write(memory, "/n.md", "short", who(), expected_version=0)

    with pytest.raises(FileTooLarge):
        await store.edit(memory, "/n.md", "short", "much longer than twenty", who())

    assert (await store.read(memory, "/n.md")).content == "short"


async def test_edit_records_the_number_of_replacements_in_history(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/n.md", "a a a", who(), expected_version=0)
    await store.edit(memory, "/n.md", "a", "b", who("tu1"), replace_all=True)

    last = (await store.history(memory, "/n.md"))[-1]

    assert (last.operation, last.replacements, last.base_version, last.tool_use_id) == (
        "edit",
        3,
        1,
        "tu1",
    )
