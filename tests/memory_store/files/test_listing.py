"""Conformance: listdir, glob, grep and index (both backends)."""

from __future__ import annotations

import pytest

from memory_store import Entry, FileStore, GrepMatch, InvalidPath, Namespace, Scope, grep_lines
from tests.memory_store.file_support import who

TREE = {
    "/README.md": "top\n",
    "/teams/payments.md": "Payments deploy from release.\nOn-call: @pay\n",
    "/teams/search.md": "Search deploys from main.\n",
    "/teams/old/legacy.txt": "legacy notes\n",
    "/runbooks/db.md": "Check the DB pool first.\nThen the replicas.\n",
}


@pytest.fixture
async def tree(store: FileStore, memory: Namespace) -> FileStore:
    """A small tree of files, written in the order of ``TREE``."""
    for path, content in TREE.items():
        await store.write(memory, path, content, who(), expected_version=0)
    return store


def paths(entries: list[Entry]) -> list[str]:
    return [entry.path for entry in entries]


async def test_listdir_shows_one_level_directories_first_then_files(
    tree: FileStore, memory: Namespace
) -> None:
    entries = await tree.listdir(memory, "/")

    assert [(e.path, e.is_dir) for e in entries] == [
        ("/runbooks", True),
        ("/teams", True),
        ("/README.md", False),
    ]
    readme = entries[2]
    assert (readme.version, readme.size_bytes) == (1, 4)
    assert readme.updated_at is not None


async def test_listdir_of_a_subdirectory_lists_its_children(
    tree: FileStore, memory: Namespace
) -> None:
    entries = await tree.listdir(memory, "/teams/")

    assert paths(entries) == ["/teams/old", "/teams/payments.md", "/teams/search.md"]


async def test_listdir_normalises_the_prefix_and_does_not_match_sibling_names(
    tree: FileStore, memory: Namespace
) -> None:
    await tree.write(memory, "/teamsters.md", "not a child of /teams", who(), expected_version=0)

    assert paths(await tree.listdir(memory, "/runbooks/../teams/old/.")) == [
        "/teams/old/legacy.txt"
    ]
    assert "/teamsters.md" not in paths(await tree.listdir(memory, "/teams"))


async def test_listdir_leaves_out_deleted_files_and_empty_directories(
    tree: FileStore, memory: Namespace
) -> None:
    await tree.delete(memory, "/runbooks/db.md", who())

    assert paths(await tree.listdir(memory, "/")) == ["/teams", "/README.md"]
    assert await tree.listdir(memory, "/runbooks") == []


async def test_listdir_refuses_an_escaping_prefix(tree: FileStore, memory: Namespace) -> None:
    with pytest.raises(InvalidPath):
        await tree.listdir(memory, "/../")


async def test_glob_double_star_matches_any_depth_most_recent_first(
    tree: FileStore, memory: Namespace
) -> None:
    # Given the payments file changed last
    await tree.edit(memory, "/teams/payments.md", "release", "release/1.x", who())

    found = paths(await tree.glob(memory, "**/*.md"))

    assert found[0] == "/teams/payments.md"
    assert sorted(found) == [
        "/README.md",
        "/runbooks/db.md",
        "/teams/payments.md",
        "/teams/search.md",
    ]


async def test_glob_single_star_stays_in_one_directory(tree: FileStore, memory: Namespace) -> None:
    assert paths(await tree.glob(memory, "*.md")) == ["/README.md"]
    assert sorted(paths(await tree.glob(memory, "*/*.md"))) == [
        "/runbooks/db.md",
        "/teams/payments.md",
        "/teams/search.md",
    ]


async def test_glob_supports_question_mark_classes_and_braces(
    tree: FileStore, memory: Namespace
) -> None:
    assert paths(await tree.glob(memory, "/runbooks/d?.md")) == ["/runbooks/db.md"]
    assert paths(await tree.glob(memory, "/teams/[p]*.md")) == ["/teams/payments.md"]
    assert paths(await tree.glob(memory, "/teams/[!p]*.md")) == ["/teams/search.md"]
    assert sorted(paths(await tree.glob(memory, "**/{db,search}.md"))) == [
        "/runbooks/db.md",
        "/teams/search.md",
    ]


async def test_glob_is_relative_to_its_prefix(tree: FileStore, memory: Namespace) -> None:
    assert sorted(paths(await tree.glob(memory, "**/*", prefix="/teams"))) == [
        "/teams/old/legacy.txt",
        "/teams/payments.md",
        "/teams/search.md",
    ]
    assert await tree.glob(memory, "nothing*", prefix="/teams") == []


async def test_grep_finds_matching_lines_in_path_order(tree: FileStore, memory: Namespace) -> None:
    found = grep_lines(await tree.grep(memory, r"deploys? from"))

    assert found == [
        GrepMatch("/teams/payments.md", 1, "Payments deploy from release."),
        GrepMatch("/teams/search.md", 1, "Search deploys from main."),
    ]


async def test_grep_ignores_case_when_asked(tree: FileStore, memory: Namespace) -> None:
    assert grep_lines(await tree.grep(memory, "check the db")) == []

    found = grep_lines(await tree.grep(memory, "check the db", ignore_case=True))

    assert [(m.path, m.line_number) for m in found] == [("/runbooks/db.md", 1)]


async def test_grep_marks_context_lines_and_reports_each_line_once(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/log.md", "a\nERR 1\nb\nERR 2\nc\nd\n", who(), expected_version=0)

    found = grep_lines(await store.grep(memory, "ERR", before=1, after=1))

    assert [(m.line_number, m.line, m.is_context) for m in found] == [
        (1, "a", True),
        (2, "ERR 1", False),
        (3, "b", True),
        (4, "ERR 2", False),
        (5, "c", True),
    ]


async def test_grep_filters_files_by_glob_and_prefix(tree: FileStore, memory: Namespace) -> None:
    by_name = grep_lines(await tree.grep(memory, "legacy|Search", glob="*.txt"))
    by_prefix = grep_lines(await tree.grep(memory, ".", prefix="/runbooks"))
    one_file = grep_lines(await tree.grep(memory, ".", prefix="/teams/search.md"))

    assert [m.path for m in by_name] == ["/teams/old/legacy.txt"]
    assert {m.path for m in by_prefix} == {"/runbooks/db.md"}
    assert [m.path for m in one_file] == ["/teams/search.md"]


async def test_grep_multiline_matches_across_lines_reporting_the_first_line(
    tree: FileStore, memory: Namespace
) -> None:
    found = grep_lines(await tree.grep(memory, r"pool first\.\nThen", multiline=True))

    assert [(m.path, m.line_number, m.line) for m in found] == [
        ("/runbooks/db.md", 1, "Check the DB pool first.")
    ]


async def test_grep_with_a_bad_regex_raises_value_error(tree: FileStore, memory: Namespace) -> None:
    with pytest.raises(ValueError, match="invalid regular expression"):
        await tree.grep(memory, "(unclosed")


async def test_index_summarises_each_live_file_by_path(store: FileStore, memory: Namespace) -> None:
    await store.write(
        memory,
        "/b.md",
        "---\ndescription: How payments deploy\n---\n# B\n",
        who(),
        expected_version=0,
    )
    await store.write(
        memory, "/a.md", "\n\n  First real line  \nsecond\n", who(), expected_version=0
    )
    await store.write(memory, "/long.md", "x" * 300, who(), expected_version=0)
    await store.write(memory, "/gone.md", "deleted", who(), expected_version=0)
    await store.delete(memory, "/gone.md", who())

    index = await store.index(memory)

    assert [(e.path, e.summary, e.version) for e in index] == [
        ("/a.md", "First real line", 1),
        ("/b.md", "How payments deploy", 1),
        ("/long.md", "x" * 200, 1),
    ]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("**/*.md", ["/teams/ops run.md", "/teams/payments/ab.md", "/a.md"]),
        ("/teams/{pay,ops}*/[!x]?.md", ["/teams/payments/ab.md"]),
        ("/teams/ops r?n.md", ["/teams/ops run.md"]),
        ("*.txt", []),
    ],
)
async def test_a_limited_glob_matches_as_the_unlimited_one_does(
    store: FileStore, memory: Namespace, pattern: str, expected: list[str]
) -> None:
    for path in ("/a.md", "/teams/payments/ab.md", "/teams/ops run.md"):
        await store.write(memory, path, "x", who(), expected_version=0)

    limited = await store.glob(memory, pattern, limit=10)
    unlimited = await store.glob(memory, pattern)
    first = await store.glob(memory, pattern, limit=1)

    assert [e.path for e in limited] == [e.path for e in unlimited] == expected
    assert [e.path for e in first] == expected[:1]


async def test_versions_of_reads_each_namespace_apart_in_the_order_asked(
    tree: FileStore, memory: Namespace
) -> None:
    # Given a tree in one org's memory, an edited file, a deleted one, and files of the
    # same paths in another channel's incident notes and in another org
    await tree.write(memory, "/README.md", "top, again\n", who(), expected_version=1)
    await tree.delete(memory, "/teams/search.md", who(), expected_version=1)
    incident = Namespace(memory.org_id, Scope.INCIDENT, "C0INCIDENT")
    await tree.write(incident, "/README.md", "notes\n", who(), expected_version=0)
    other_org = Namespace("T0OTHER", memory.scope, memory.channel_id)
    await tree.write(other_org, "/other.md", "theirs\n", who(), expected_version=0)
    empty = Namespace(memory.org_id, Scope.INCIDENT, "C0QUIET")

    # When the versions of four namespaces are read at once
    found = await tree.versions_of([incident, empty, memory, other_org])

    # Then each namespace has its own live files and versions, nothing of the others
    assert found == [
        {"/README.md": 1},
        {},
        {
            "/README.md": 2,
            "/teams/payments.md": 1,
            "/teams/old/legacy.txt": 1,
            "/runbooks/db.md": 1,
        },
        {"/other.md": 1},
    ]
    assert await tree.versions_of([]) == []
