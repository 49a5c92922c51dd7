"""Paths: normalisation (pure) and the store refusing escapes and look-alike clashes."""

from __future__ import annotations

import pytest

from memory_store import (
    CaseConflict,
    FileNotFound,
    FileStore,
    InvalidPath,
    Namespace,
    normalise_file_path,
    normalise_path,
)
from tests.memory_store.file_support import who


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/a/b.md", "/a/b.md"),
        ("//a///b.md", "/a/b.md"),
        ("/a/./b/../c.md", "/a/c.md"),
        ("/a/b/", "/a/b"),
        ("/", "/"),
        ("/caf\u0065\u0301.md", "/caf\u00e9.md"),  # NFC: e + combining acute → é
        ("/%2e%2e/x", "/%2e%2e/x"),  # never URL-decoded: literal characters
        ("/\uff0e\uff0e/x", "/\uff0e\uff0e/x"),  # fullwidth dots are not dots
        ("/\u2024\u2024/x", "/\u2024\u2024/x"),  # one-dot leaders are not dots
        ("/...", "/..."),
        ("/a/..b", "/a/..b"),
    ],
)
def test_normalise_path_gives_the_canonical_form(raw: str, expected: str) -> None:
    assert normalise_path(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("notes.md", "relative"),
        ("./notes.md", "relative"),
        ("/..", "escapes above the root"),
        ("/../x", "escapes above the root"),
        ("/a/../../x", "escapes above the root"),
        ("/a/b/../../../../etc/passwd", "escapes above the root"),
        ("/a/\n.md", "U+000A"),
        ("/a\x00.md", "U+0000"),
        ("/a\x7f.md", "U+007F"),
        ("/evil\u202egpj.md", "U+202E"),  # right-to-left override
        ("/zero\u200bwidth.md", "U+200B"),
        ("/" + "a" * 256, "longer than 255"),
        ("/a" * 600, "longer than 1024"),
    ],
)
def test_normalise_path_refuses_with_a_reason(raw: str, reason: str) -> None:
    with pytest.raises(InvalidPath) as caught:
        normalise_path(raw)

    assert reason in caught.value.reason


def test_a_file_path_may_not_be_the_root_or_end_with_a_slash() -> None:
    for raw in ("/", "//", "/a/..", "/a/"):
        with pytest.raises(InvalidPath):
            normalise_file_path(raw)


@pytest.mark.parametrize(
    "escape", ["/../x.md", "/a/../../x.md", "/a/./../../b/x.md", "/../../../../etc/passwd"]
)
async def test_the_store_refuses_dot_dot_chains_above_the_scope_root(
    store: FileStore, memory: Namespace, escape: str
) -> None:
    with pytest.raises(InvalidPath):
        await store.write(memory, escape, "x", who(), expected_version=0)
    with pytest.raises(InvalidPath):
        await store.read(memory, escape)
    assert await store.index(memory) == []


@pytest.mark.parametrize("look_alike", ["/%2e%2e/x.md", "/\uff0e\uff0e/x.md", "/\u2024\u2024/x.md"])
async def test_encoded_and_look_alike_dots_stay_inside_the_scope_as_names(
    store: FileStore, memory: Namespace, look_alike: str
) -> None:
    await store.write(memory, look_alike, "x", who(), expected_version=0)

    assert [e.path for e in await store.index(memory)] == [look_alike]
    with pytest.raises(FileNotFound):
        await store.read(memory, "/x.md")


async def test_paths_that_normalise_alike_are_one_file(store: FileStore, memory: Namespace) -> None:
    await store.write(memory, "/notes/caf\u0065\u0301.md", "one", who(), expected_version=0)

    result = await store.write(memory, "//notes/./caf\u00e9.md", "two", who(), expected_version=1)

    assert (result.path, result.version) == ("/notes/caf\u00e9.md", 2)


async def test_a_path_differing_only_by_case_is_refused_naming_the_existing_one(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/Runbook.md", "x", who(), expected_version=0)

    with pytest.raises(CaseConflict) as caught:
        await store.write(memory, "/runbook.md", "y", who(), expected_version=None)
    with pytest.raises(CaseConflict):
        await store.edit(memory, "/RUNBOOK.md", "", "y", who())

    assert caught.value.existing_path == "/Runbook.md"
    assert [e.path for e in await store.index(memory)] == ["/Runbook.md"]


async def test_a_directory_differing_only_by_case_is_refused(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/Teams/a.md", "x", who(), expected_version=0)

    with pytest.raises(CaseConflict) as caught:
        await store.write(memory, "/teams/b.md", "y", who(), expected_version=0)

    assert caught.value.existing_path == "/Teams"


async def test_case_folding_covers_unicode_case(store: FileStore, memory: Namespace) -> None:
    await store.write(memory, "/Straße.md", "x", who(), expected_version=0)

    with pytest.raises(CaseConflict):
        await store.write(memory, "/STRASSE.md", "y", who(), expected_version=0)


async def test_a_case_twin_may_be_created_once_the_original_is_deleted(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/A.md", "x", who(), expected_version=0)
    await store.delete(memory, "/A.md", who())

    created = await store.write(memory, "/a.md", "y", who(), expected_version=0)

    assert created.created
    with pytest.raises(CaseConflict):
        await store.restore(memory, "/A.md", 1, who())


async def test_a_file_cannot_sit_where_a_directory_is_or_under_a_file(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/dir/a.md", "x", who(), expected_version=0)

    with pytest.raises(InvalidPath, match="is a directory"):
        await store.write(memory, "/dir", "y", who(), expected_version=0)
    with pytest.raises(InvalidPath, match="is a file"):
        await store.write(memory, "/dir/a.md/b.md", "y", who(), expected_version=0)


def test_the_shortcut_for_plain_paths_agrees_with_the_full_normalisation() -> None:
    # Every path built from these pieces (dots, slashes, spaces, a control character,
    # non-ASCII, a name at the length limit) is normalised, or refused, alike with and
    # without the shortcut that returns a plain path as it is.
    from memory_store.files import paths

    pieces = ["/", "a", ".", "..", " ", "\t", "é", "b.md", "//", "x" * 255, "\u202e", "-"]
    seen = 0
    for first in pieces:
        for second in pieces:
            for third in pieces:
                raw = "/" + first + second + third
                taken = paths._already_normal(raw)
                try:
                    expected: str | None = _without_shortcut(raw)
                except InvalidPath:
                    expected = None
                if taken:
                    seen += 1
                    assert expected == raw, raw
                try:
                    got: str | None = normalise_path(raw)
                except InvalidPath:
                    got = None
                assert got == expected, raw
    assert seen > 100  # the shortcut was taken, not only the full way


def _without_shortcut(raw: str) -> str:
    from unittest import mock

    from memory_store.files import paths

    with mock.patch.object(paths, "_already_normal", return_value=False):
        return normalise_path(raw)
