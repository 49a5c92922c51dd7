"""Grep on the store: linear time, off the event loop, with a timeout; ripgrep's syntax."""

from __future__ import annotations

import asyncio
import time

import pytest

from memory_store import FileStore, Namespace, SearchTimeout, grep_lines
from memory_store.files.grep import compile_pattern, grep_content, scanner
from tests.memory_store.file_support import who

CATASTROPHIC = r"^(\w+\s?)*$"  # exponential for a backtracking engine on a near-match


class LoopLag:
    """The longest time the event loop took to run a callback due every 10 ms."""

    def __init__(self) -> None:
        self.worst_s = 0.0
        self._loop = asyncio.get_running_loop()
        self._due = self._loop.time() + 0.01
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        self.worst_s = max(self.worst_s, self._loop.time() - self._due)
        self._due = self._loop.time() + 0.01
        self._handle = self._loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        self._handle.cancel()


async def test_a_catastrophic_pattern_leaves_the_event_loop_responsive(
    store: FileStore, memory: Namespace
) -> None:
    # Given: a line that a backtracking engine needs seconds for (2^24 paths)
    await store.write(memory, "/near.md", "a" * 24 + "!\n", who(), expected_version=0)

    # When: it is searched while the loop's lag is watched
    lag = LoopLag()
    try:
        matches = grep_lines(await store.grep(memory, CATASTROPHIC))
    finally:
        lag.stop()

    # Then: no match, and no callback waited long
    assert matches == []
    assert lag.worst_s < 0.5


async def test_a_catastrophic_pattern_on_a_long_line_returns_promptly(
    store: FileStore, memory: Namespace
) -> None:
    line = "word " * 8 + "x" * 37 + "!"
    await store.write(memory, "/long.md", f"{line}\nfine words\n", who(), expected_version=0)

    started = time.monotonic()
    matches = grep_lines(await store.grep(memory, CATASTROPHIC))

    assert [m.line for m in matches] == ["fine words"]
    assert time.monotonic() - started < 5


async def test_a_search_past_its_time_budget_gives_up(store: FileStore, memory: Namespace) -> None:
    await store.write(memory, "/a.md", "alpha\n", who(), expected_version=0)

    with pytest.raises(SearchTimeout):
        grep_lines(await store.grep(memory, "alpha", timeout_s=0))


@pytest.mark.parametrize(
    ("pattern", "matched"),
    [
        (r"\p{Greek}+", ["λόγος"]),
        (r"[[:digit:]]{3}", ["code 500"]),
        (r"code\s\d+\z", ["code 500"]),
        (r"^alpha$", ["alpha"]),
    ],
)
async def test_patterns_use_ripgrep_syntax(
    store: FileStore, memory: Namespace, pattern: str, matched: list[str]
) -> None:
    await store.write(memory, "/a.md", "alpha\nλόγος\ncode 500\n", who(), expected_version=0)

    assert [m.line for m in grep_lines(await store.grep(memory, pattern))] == matched


@pytest.mark.parametrize("pattern", [r"(?<=a)b", r"(a)\1"])
async def test_look_around_and_backreferences_are_refused_as_ripgrep_does(
    store: FileStore, memory: Namespace, pattern: str
) -> None:
    with pytest.raises(ValueError, match="invalid regular expression"):
        grep_lines(await store.grep(memory, pattern))


async def test_a_literal_in_the_pattern_narrows_rows_without_losing_matches(
    store: FileStore, memory: Namespace
) -> None:
    await store.write(memory, "/a.md", "ERROR code 4217\n", who(), expected_version=0)
    await store.write(memory, "/b.md", "error CODE 17\n", who(), expected_version=0)

    exact = grep_lines(await store.grep(memory, r"ERROR code \d+"))
    folded = grep_lines(await store.grep(memory, r"error code \d+", ignore_case=True))

    assert [m.path for m in exact] == ["/a.md"]
    assert [m.path for m in folded] == ["/a.md", "/b.md"]


async def test_files_can_come_newest_first(store: FileStore, memory: Namespace) -> None:
    await store.write(memory, "/a.md", "hit\n", who(), expected_version=0)
    await store.write(memory, "/b.md", "hit\n", who(), expected_version=0)

    newest = grep_lines(await store.grep(memory, "hit", newest_first=True))
    by_path = grep_lines(await store.grep(memory, "hit"))

    assert [m.path for m in newest] == ["/b.md", "/a.md"]
    assert [m.path for m in by_path] == ["/a.md", "/b.md"]


CONTENTS = (
    "",
    "\n\n",
    "alpha\nbeta gamma\n\ndelta alpha\nalpha",
    "a\nb\nab\na\n\nb a\n",
    "café au lait\nnaïve ünïcode\n日本語 テキスト\ncafé\n",
    "x = 1;  y = 22\n\tindented line\ntrailing space \nend",
    "line 1: one\nline 10: ten\nline 2: two\nline 19: nineteen\n",
)
PATTERNS = (
    "alpha",  # plain text: looked for in each line
    "ALPHA",
    r"a\.b",
    "a",
    "^a",
    "a$",
    "^$",
    "x*",  # matches the empty string: every line
    r"\bb\b",
    r"a\sb",  # may run across a newline in the whole content
    r"[^z]+",
    r"a\nb",
    r"\d+",
    "é",
    r"\pL+ \pL+",
    "line 1[0-9]?:",
    "(?:al|be)ta",
    r"\s$",
)


@pytest.mark.parametrize("ignore_case", [False, True])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_lines_found_in_one_pass_are_the_lines_that_match_on_their_own(
    pattern: str, ignore_case: bool
) -> None:
    # Given a pattern eligible for the one-pass scan (plain text, or bytes RE2)
    regex = compile_pattern(pattern, ignore_case=ignore_case, multiline=False)
    scan = scanner(regex)
    for content in (*CONTENTS, "a\nab\nba\n", "é\néé\n"):  # and every line matching
        for before in (0, 1):
            # When each content is searched by the scan and line by line
            scanned = grep_content("/f.md", content, regex, before=before, scan=scan)
            by_line = grep_content("/f.md", content, regex, before=before)
            # Then both find the same lines, context included
            assert scanned == by_line, (pattern, content, before)


def test_plain_text_is_looked_for_without_the_regex_engine() -> None:
    regex = compile_pattern(r"db\.internal (prod)?", ignore_case=False, multiline=False)
    assert scanner(compile_pattern(r"db\.internal", ignore_case=False, multiline=False)) == (
        "db.internal"
    )
    assert not isinstance(scanner(regex), str)
    assert not isinstance(scanner(compile_pattern("pools", ignore_case=True, multiline=False)), str)
