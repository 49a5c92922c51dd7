"""vfs.resolve: the pure mount table (docs/architecture.md §6)."""

from __future__ import annotations

import doctest

import pytest

from harness import vfs
from harness.vfs import Mount, PathError, Resolved, resolve


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/memory/teams/payments.md", Resolved(Mount.MEMORY, "/teams/payments.md")),
        ("/memory", Resolved(Mount.MEMORY, "/")),
        ("/memory/", Resolved(Mount.MEMORY, "/")),
        ("/skills/deploy/SKILL.md", Resolved(Mount.SKILLS, "/deploy/SKILL.md")),
        ("/incident/timeline.md", Resolved(Mount.INCIDENT, "/timeline.md")),
        ("/workspace/app.log", Resolved(Mount.SANDBOX, "/workspace/app.log")),
        ("/etc/hosts", Resolved(Mount.SANDBOX, "/etc/hosts")),
        ("/", Resolved(Mount.SANDBOX, "/")),
    ],
)
def test_resolve_routes_each_root_to_its_mount(path: str, expected: Resolved) -> None:
    assert resolve(path) == expected


def test_resolve_collapses_double_slashes_and_dots_within_a_mount() -> None:
    assert resolve("//memory//teams/./x/../payments.md") == Resolved(
        Mount.MEMORY, "/teams/payments.md"
    )


def test_resolve_normalises_unicode_to_nfc() -> None:
    decomposed = "/memory/cafe\u0301.md"
    assert resolve(decomposed).path == "/caf\u00e9.md"


def test_resolve_treats_a_name_that_only_starts_like_a_mount_as_sandbox() -> None:
    assert resolve("/memoryless/x").mount is Mount.SANDBOX
    assert resolve("/skills.txt").mount is Mount.SANDBOX


@pytest.mark.parametrize(
    "path",
    ["/skills/../memory/x.md", "/memory/../etc/passwd", "/incident/a/../../x"],
)
def test_resolve_refuses_dot_dot_that_leaves_a_virtual_mount(path: str) -> None:
    with pytest.raises(PathError, match="escapes its mount root"):
        resolve(path)


def test_resolve_routes_a_sandbox_path_climbing_into_a_mount_by_where_it_ends() -> None:
    # A sandbox path may use "..", but only the final location decides the mount.
    assert resolve("/workspace/../memory/x.md") == Resolved(Mount.MEMORY, "/x.md")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "path is empty"),
        ("notes.md", "path must be absolute"),
        ("/memory/a\x00b", "control characters"),
        ("/memory/a\nb", "control characters"),
    ],
)
def test_resolve_refuses_unusable_paths_with_a_reason(path: str, message: str) -> None:
    with pytest.raises(PathError, match=message):
        resolve(path)


def test_display_gives_back_the_path_the_model_uses() -> None:
    assert resolve("/memory/teams//a.md").display() == "/memory/teams/a.md"
    assert resolve("/incident").display() == "/incident"
    assert resolve("/workspace/x").display() == "/workspace/x"


def test_only_database_mounts_are_virtual() -> None:
    assert resolve("/skills/x/SKILL.md").is_virtual
    assert not resolve("/workspace").is_virtual


def test_vfs_doctests_pass() -> None:
    result = doctest.testmod(vfs, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_every_table_of_virtual_roots_follows_the_stores_scopes() -> None:
    from harness.guard.paths import VIRTUAL_ROOTS as GUARDED
    from memory_store import READ_ONLY_TREES, Scope
    from sandbox_client.providers.local.jail import VIRTUAL_MOUNTS

    scopes = {scope.value for scope in Scope} | set(READ_ONLY_TREES)
    assert "incidents" in scopes
    assert {root.lstrip("/") for root, _ in vfs.VIRTUAL_ROOTS} == scopes
    assert set(GUARDED) == scopes
    assert set(VIRTUAL_MOUNTS) == scopes  # the jail's stubs: a leaf package, checked here
