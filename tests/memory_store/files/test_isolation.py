"""Tenant isolation: another org's rows and another channel's incident are invisible."""

from __future__ import annotations

import pytest

from memory_store import (
    FileKey,
    FileNotFound,
    FileStore,
    Namespace,
    Scope,
    StaleVersion,
    grep_lines,
)
from tests.memory_store.file_support import who

SECRET = "db password rotated; new one in vault path secret/payments\n"


@pytest.fixture
async def theirs(store: FileStore, org: str) -> Namespace:
    """Another org's memory, holding a secret at /secret.md (version 2)."""
    ns = Namespace(org + "-other", Scope.MEMORY)
    await store.write(ns, "/secret.md", "draft", who("their-tool"), expected_version=0)
    await store.write(ns, "/secret.md", SECRET, who(), expected_version=1)
    return ns


async def test_another_orgs_file_cannot_be_read_listed_or_searched(
    store: FileStore, memory: Namespace, theirs: Namespace
) -> None:
    with pytest.raises(FileNotFound):
        await store.read(memory, "/secret.md")
    with pytest.raises(FileNotFound):
        await store.history(memory, "/secret.md")
    assert await store.listdir(memory) == []
    assert await store.glob(memory, "**/*") == []
    assert grep_lines(await store.grep(memory, "password")) == []
    assert await store.index(memory) == []


async def test_another_orgs_file_cannot_be_changed_through_the_same_path(
    store: FileStore, memory: Namespace, theirs: Namespace
) -> None:
    with pytest.raises(FileNotFound):
        await store.edit(memory, "/secret.md", "vault", "nowhere", who())
    with pytest.raises(FileNotFound):
        await store.delete(memory, "/secret.md", who())
    with pytest.raises(FileNotFound):
        await store.restore(memory, "/secret.md", 2, who())
    with pytest.raises(StaleVersion) as caught:
        await store.write(memory, "/secret.md", "mine", who(), expected_version=2)

    assert caught.value.current_version == 0
    assert (await store.read(theirs, "/secret.md")).content == SECRET


async def test_the_same_path_in_two_orgs_is_two_files_with_their_own_versions(
    store: FileStore, memory: Namespace, theirs: Namespace
) -> None:
    mine = await store.write(memory, "/secret.md", "ours", who(), expected_version=0)

    assert (mine.version, mine.created) == (1, True)
    assert (await store.read(theirs, "/secret.md")).version == 2
    assert (await store.read(memory, "/secret.md")).content == "ours"


async def test_another_orgs_tool_use_id_does_not_replay_their_result(
    store: FileStore, memory: Namespace, theirs: Namespace
) -> None:
    result = await store.write(memory, "/secret.md", "ours", who("their-tool"), expected_version=0)

    assert (result.version, result.created) == (1, True)
    assert (await store.read(memory, "/secret.md")).content == "ours"


async def test_changed_since_does_not_reveal_another_orgs_file(
    store: FileStore, memory: Namespace, theirs: Namespace
) -> None:
    assert await store.changed_since({FileKey(memory, "/secret.md"): 0}) == []


async def test_another_channels_incident_notes_are_invisible(store: FileStore, org: str) -> None:
    ours = Namespace(org, Scope.INCIDENT, "C-OURS")
    other = Namespace(org, Scope.INCIDENT, "C-OTHER")
    await store.write(other, "/timeline.md", "14:02 500s start\n", who(), expected_version=0)

    with pytest.raises(FileNotFound):
        await store.read(ours, "/timeline.md")
    assert grep_lines(await store.grep(ours, "500s")) == []
    assert await store.listdir(ours) == []
    created = await store.write(ours, "/timeline.md", "ours\n", who(), expected_version=0)
    assert created.created


async def test_org_scopes_do_not_see_each_other(store: FileStore, org: str) -> None:
    await store.write(Namespace(org, Scope.SKILLS), "/notes.md", "skill", who(), expected_version=0)

    for scope_ns in (Namespace(org, Scope.MEMORY), Namespace(org, Scope.INCIDENT, "C1")):
        with pytest.raises(FileNotFound):
            await store.read(scope_ns, "/notes.md")


def test_a_namespace_needs_a_channel_exactly_for_incidents() -> None:
    with pytest.raises(ValueError, match="channel_id"):
        Namespace("T1", Scope.INCIDENT)
    with pytest.raises(ValueError, match="channel_id"):
        Namespace("T1", Scope.MEMORY, "C1")
    with pytest.raises(ValueError, match="org_id"):
        Namespace("", Scope.MEMORY)
