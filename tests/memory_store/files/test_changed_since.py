"""Conformance: changed_since, the per-step change check (both backends)."""

from __future__ import annotations

from memory_store import FileKey, FileStore, Namespace, Scope
from tests.memory_store.file_support import who


async def test_changed_since_reports_only_files_no_longer_at_the_seen_version(
    store: FileStore, memory: Namespace
) -> None:
    # Given a session that saw two files at version 1
    await store.write(memory, "/same.md", "x", who(), expected_version=0)
    await store.write(memory, "/moved.md", "x", who(), expected_version=0)
    seen = {FileKey(memory, "/same.md"): 1, FileKey(memory, "/moved.md"): 1}

    # When another session changes one of them
    await store.edit(memory, "/moved.md", "x", "y", who(actor="U7", session="S7"))

    # Then only that one is reported, with who changed it
    changes = await store.changed_since(seen)
    assert [(c.key.path, c.seen_version, c.version, c.deleted) for c in changes] == [
        ("/moved.md", 1, 2, False)
    ]
    assert (changes[0].actor, changes[0].session_id) == ("U7", "S7")


async def test_changed_since_reports_a_deletion(store: FileStore, memory: Namespace) -> None:
    await store.write(memory, "/a.md", "x", who(), expected_version=0)
    await store.delete(memory, "/a.md", who())

    changes = await store.changed_since({FileKey(memory, "/a.md"): 1})

    assert [(c.version, c.deleted) for c in changes] == [(2, True)]


async def test_changed_since_reports_a_file_created_after_it_was_seen_missing(
    store: FileStore, memory: Namespace
) -> None:
    seen = {FileKey(memory, "/later.md"): 0}
    assert await store.changed_since(seen) == []

    await store.write(memory, "/later.md", "x", who(), expected_version=0)

    assert [c.version for c in await store.changed_since(seen)] == [1]


async def test_changed_since_covers_several_namespaces_in_one_call(
    store: FileStore, org: str
) -> None:
    memory = Namespace(org, Scope.MEMORY)
    incident = Namespace(org, Scope.INCIDENT, "C1")
    await store.write(memory, "/a.md", "x", who(), expected_version=0)
    await store.write(incident, "/a.md", "x", who(), expected_version=0)
    await store.write(incident, "/a.md", "y", who(), expected_version=1)

    changes = await store.changed_since(
        {FileKey(memory, "/a.md"): 1, FileKey(incident, "/a.md"): 1}
    )

    assert [(c.key.ns, c.version) for c in changes] == [(incident, 2)]


async def test_changed_since_handles_more_keys_than_one_batch(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/f7.md", "x", who(), expected_version=0)
    seen = {FileKey(memory, f"/f{i}.md"): 0 for i in range(450)}

    changes = await store.changed_since(seen)

    assert [c.key.path for c in changes] == ["/f7.md"]


async def test_changed_since_of_nothing_is_nothing(store: FileStore) -> None:
    assert await store.changed_since({}) == []
