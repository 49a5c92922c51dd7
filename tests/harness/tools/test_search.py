"""Glob and Grep: the same output formats on the virtual mounts and in the sandbox."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_store import Namespace, Origin, Scope
from tests.harness.tool_support import (
    JailWorkspace,
    SessionDriver,
    error_text,
    open_store,
)

ORG = "T-SEARCH"
MEMORY = Namespace(ORG, Scope.MEMORY)
HUMAN = Origin("U-HUMAN")
needs_jail = pytest.mark.bwrap


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    root = tmp_path / "ws"
    root.mkdir()
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(root), org_id=ORG)


async def seed(agent: SessionDriver, files: dict[str, str]) -> None:
    for path, content in files.items():
        await agent.store.write(MEMORY, path, content, HUMAN, expected_version=None)


def put(agent: SessionDriver, files: dict[str, str]) -> None:
    """Create sandbox files, the first one newest, each next one a second older."""
    for age, (name, content) in enumerate(files.items()):
        host = agent.jail.root / name
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_text(content)
        os.utime(host, (1_700_000_000 - age, 1_700_000_000 - age))


NOTES = {
    "/a.md": "alpha\nhello world\n",
    "/teams/b.md": "Hello again\nbeta\nhello\n",
    "/teams/c.txt": "nothing here\n",
}


# ---------------------------------------------------------------- Glob, virtual


async def test_glob_lists_matches_least_recently_modified_first(agent: SessionDriver) -> None:
    await seed(agent, {"/old.md": "1\n", "/teams/mid.md": "2\n", "/new.md": "3\n", "/x.txt": "4"})

    outcome = await agent.call("Glob", {"pattern": "*.md", "path": "/memory"})

    assert outcome.content == "/memory/old.md\n/memory/teams/mid.md\n/memory/new.md"


async def test_glob_takes_an_absolute_pattern_on_a_virtual_mount(agent: SessionDriver) -> None:
    await seed(agent, NOTES)

    outcome = await agent.call("Glob", {"pattern": "/memory/teams/*.md"})

    assert outcome.content == "/memory/teams/b.md"


async def test_glob_without_matches_says_no_files_found(agent: SessionDriver) -> None:
    outcome = await agent.call("Glob", {"pattern": "**/*.md", "path": "/incident"})

    assert outcome.content == "No files found"


async def test_glob_shows_the_100_oldest_paths_then_says_how_many_were_left_out(
    agent: SessionDriver,
) -> None:
    await seed(agent, {f"/n{i:03}.md": "x" for i in range(101)})

    outcome = await agent.call("Glob", {"pattern": "*.md", "path": "/memory"})

    lines = outcome.content.split("\n")
    assert len(lines) == 101
    assert lines[0] == "/memory/n000.md"
    assert lines[-2] == "/memory/n099.md"
    assert lines[-1] == (
        "(Showing 100 of 101 matching files; 1 more are not listed. Narrow the pattern or path "
        "to see the rest.)"
    )


async def test_glob_over_many_matches_lists_the_oldest_100_and_counts_them_all(
    agent: SessionDriver,
) -> None:
    # Given 121 notes written oldest first
    await seed(agent, {f"/n{i:03}.md": "x" for i in range(121)})

    # When the model globs them
    outcome = await agent.call("Glob", {"pattern": "*.md", "path": "/memory"})

    # Then it sees the 100 oldest, in order, and the true count
    lines = outcome.content.split("\n")
    assert lines[:100] == [f"/memory/n{i:03}.md" for i in range(100)]
    assert lines[100] == (
        "(Showing 100 of 121 matching files; 21 more are not listed. Narrow the pattern or path "
        "to see the rest.)"
    )


# ---------------------------------------------------------------- Grep, virtual


async def test_grep_lists_matching_files_by_default(agent: SessionDriver) -> None:
    await seed(agent, NOTES)

    outcome = await agent.call("Grep", {"pattern": "hello", "path": "/memory"})

    assert outcome.content == "Found 2 files\n/memory/teams/b.md\n/memory/a.md"


async def test_grep_content_mode_shows_path_line_and_text(agent: SessionDriver) -> None:
    await seed(agent, NOTES)

    outcome = await agent.call(
        "Grep", {"pattern": "hello", "path": "/memory", "output_mode": "content", "-i": True}
    )

    assert outcome.content == (
        "/memory/a.md:2:hello world\n/memory/teams/b.md:1:Hello again\n/memory/teams/b.md:3:hello"
    )


async def test_grep_content_mode_shows_context_lines_and_group_separators(
    agent: SessionDriver,
) -> None:
    await seed(agent, {"/log.md": "1\nerr A\n3\n4\n5\n6\nerr B\n8\n"})

    outcome = await agent.call(
        "Grep", {"pattern": "err", "path": "/memory/log.md", "output_mode": "content", "-C": 1}
    )

    assert outcome.content == (
        "/memory/log.md-1-1\n/memory/log.md:2:err A\n/memory/log.md-3-3\n--\n"
        "/memory/log.md-6-6\n/memory/log.md:7:err B\n/memory/log.md-8-8"
    )


async def test_grep_only_matching_with_context_lists_as_ripgrep_does(
    agent: SessionDriver,
) -> None:
    # Given a line with two matches between context lines
    await seed(agent, {"/log.md": "a\nx=4 x=5\nb\nc\nd\nx\n"})

    # When Grep shows only the matching parts, with context
    args = {"pattern": r"x=\d|x", "path": "/memory/log.md", "output_mode": "content"}
    outcome = await agent.call("Grep", args | {"-o": True, "-C": 1})
    limited = await agent.call("Grep", args | {"-o": True, "-C": 1, "head_limit": 3})

    # Then it is `rg -n -o -C1`'s listing: the parts of one line one after the other
    # (no `--` between them), context lines whole
    assert outcome.content == (
        "/memory/log.md-1-a\n/memory/log.md:2:x=4\n/memory/log.md:2:x=5\n/memory/log.md-3-b\n"
        "--\n/memory/log.md-5-d\n/memory/log.md:6:x"
    )
    assert limited.content == (
        "/memory/log.md-1-a\n/memory/log.md:2:x=4\n/memory/log.md:2:x=5\n\n"
        "[Showing results with pagination = limit: 3]"
    )


async def test_grep_content_mode_without_line_numbers(agent: SessionDriver) -> None:
    await seed(agent, NOTES)

    outcome = await agent.call(
        "Grep", {"pattern": "beta", "path": "/memory", "output_mode": "content", "-n": False}
    )

    assert outcome.content == "/memory/teams/b.md:beta"


async def test_grep_count_mode_lists_counts_then_a_total(agent: SessionDriver) -> None:
    await seed(agent, NOTES)

    outcome = await agent.call(
        "Grep", {"pattern": "(?i)hello", "path": "/memory", "output_mode": "count"}
    )

    assert outcome.content == (
        "/memory/a.md:1\n/memory/teams/b.md:2\n\nFound 3 total occurrences across 2 files."
    )


async def test_grep_filters_files_by_glob_and_by_type(agent: SessionDriver) -> None:
    await seed(agent, NOTES)

    by_glob = await agent.call("Grep", {"pattern": "h", "path": "/memory", "glob": "*.txt"})
    by_type = await agent.call("Grep", {"pattern": "h", "path": "/memory", "type": "md"})

    assert by_glob.content == "Found 1 file\n/memory/teams/c.txt"
    assert by_type.content == "Found 2 files\n/memory/teams/b.md\n/memory/a.md"


async def test_grep_head_limit_cuts_the_output_and_gives_the_pagination(
    agent: SessionDriver,
) -> None:
    await seed(agent, {"/many.md": "".join(f"hit {i}\n" for i in range(5))})

    outcome = await agent.call(
        "Grep",
        {"pattern": "hit", "path": "/memory", "output_mode": "content", "head_limit": 2},
    )

    assert outcome.content == (
        "/memory/many.md:1:hit 0\n/memory/many.md:2:hit 1\n\n"
        "[Showing results with pagination = limit: 2]"
    )


@pytest.mark.parametrize("context", [0, 1])
async def test_a_limited_listing_is_the_one_every_match_would_give(
    agent: SessionDriver, context: int
) -> None:
    # Given matches in many files (the search may stop once the listing is full)
    files = {f"/f{i:02}.md": "".join(f"hit {i}.{j}\nmiss\n" for j in range(3)) for i in range(20)}
    await seed(agent, files)
    base = {"pattern": "hit", "path": "/memory", "output_mode": "content", "-C": context}
    # When the listing is limited, and when it is not
    whole = await agent.call("Grep", {**base, "head_limit": 0})
    limited = await agent.call("Grep", {**base, "head_limit": 7, "offset": 5})
    # Then the limited one is the same lines, paged, with its pagination note
    lines = whole.content.split("\n")
    assert limited.content == "\n".join(lines[5:12]) + (
        "\n\n[Showing results with pagination = limit: 7, offset: 5]"
    )


async def test_grep_offset_pages_through_results_in_every_mode(agent: SessionDriver) -> None:
    await seed(agent, {"/many.md": "".join(f"hit {i}\n" for i in range(5)), "/b.md": "hit\n"})
    base = {"pattern": "hit", "path": "/memory", "head_limit": 2, "offset": 3}

    content = await agent.call("Grep", {**base, "output_mode": "content", "glob": "many.md"})
    files = await agent.call("Grep", {**base, "offset": 1})
    past = await agent.call("Grep", {**base, "offset": 9})

    assert content.content == (
        "/memory/many.md:4:hit 3\n/memory/many.md:5:hit 4\n\n"
        "[Showing results with pagination = offset: 3]"
    )
    assert files.content.startswith("Found 1 file offset: 1\n/memory/")
    assert past.content == (
        "No entries at this offset. [Showing results with pagination = offset: 9]"
    )


async def test_grep_replaces_lines_over_500_columns_with_a_marker(agent: SessionDriver) -> None:
    await seed(agent, {"/wide.md": "hit " + "x" * 600 + "\nhit short\n"})

    outcome = await agent.call(
        "Grep", {"pattern": "hit", "path": "/memory", "output_mode": "content"}
    )

    assert outcome.content == (
        "/memory/wide.md:1:[Omitted long matching line]\n/memory/wide.md:2:hit short"
    )


async def test_grep_without_matches_says_so_in_each_mode(agent: SessionDriver) -> None:
    await seed(agent, NOTES)
    base = {"pattern": "zebra", "path": "/memory"}

    files = await agent.call("Grep", base)
    content = await agent.call("Grep", {**base, "output_mode": "content"})
    count = await agent.call("Grep", {**base, "output_mode": "count"})

    assert (files.content, content.content, count.content) == (
        "No files found",
        "No matches found",
        "No matches found\n\nFound 0 total occurrences across 0 files.",
    )


async def test_grep_with_a_bad_regex_on_a_virtual_mount_is_an_error(agent: SessionDriver) -> None:
    outcome = await agent.call("Grep", {"pattern": "a(", "path": "/memory"})

    assert error_text(outcome) == "invalid regular expression 'a(': missing )"


async def test_grep_multiline_matches_across_lines(agent: SessionDriver) -> None:
    await seed(agent, NOTES)

    outcome = await agent.call(
        "Grep",
        {"pattern": "again.beta", "path": "/memory", "multiline": True, "output_mode": "content"},
    )

    assert outcome.content == "/memory/teams/b.md:1:Hello again"


# ---------------------------------------------------------------- sandbox (real ripgrep in a jail)


@needs_jail
async def test_glob_in_the_sandbox_lists_oldest_first_like_on_virtual_mounts(
    agent: SessionDriver,
) -> None:
    put(agent, {"new.py": "", "src/mid.py": "", "old.py": "", "notes.txt": ""})

    outcome = await agent.call("Glob", {"pattern": "*.py"})

    assert outcome.content == "/workspace/old.py\n/workspace/src/mid.py\n/workspace/new.py"


@needs_jail
async def test_glob_in_the_sandbox_quotes_patterns_and_paths(agent: SessionDriver) -> None:
    put(agent, {"my dir/it's.log": ""})

    outcome = await agent.call("Glob", {"pattern": "*'s.log", "path": "/workspace/my dir"})
    none = await agent.call("Glob", {"pattern": "*.nothing"})

    assert outcome.content == "/workspace/my dir/it's.log"
    assert none.content == "No files found"


@needs_jail
async def test_grep_in_the_sandbox_gives_the_same_three_formats(agent: SessionDriver) -> None:
    put(agent, {"b.log": "Hello again\nbeta\nhello\n", "a.log": "alpha\nhello world\n"})

    files = await agent.call("Grep", {"pattern": "hello", "-i": True})
    content = await agent.call(
        "Grep", {"pattern": "hello", "output_mode": "content", "path": "/workspace"}
    )
    count = await agent.call("Grep", {"pattern": "(?i)hello", "output_mode": "count"})

    assert files.content == "Found 2 files\n/workspace/b.log\n/workspace/a.log"
    assert content.content == "/workspace/a.log:2:hello world\n/workspace/b.log:3:hello"
    assert count.content == (
        "/workspace/a.log:1\n/workspace/b.log:2\n\nFound 3 total occurrences across 2 files."
    )


@needs_jail
async def test_grep_in_the_sandbox_parses_paths_and_lines_with_colons_and_dashes(
    agent: SessionDriver,
) -> None:
    put(agent, {"a-1:2.txt": "x\nkey: value-3\ny\n"})

    outcome = await agent.call(
        "Grep", {"pattern": "key", "output_mode": "content", "-B": 1, "-A": 1}
    )

    assert outcome.content == (
        "/workspace/a-1:2.txt-1-x\n/workspace/a-1:2.txt:2:key: value-3\n/workspace/a-1:2.txt-3-y"
    )


@needs_jail
async def test_grep_in_the_sandbox_reports_bad_regexes_and_missing_paths(
    agent: SessionDriver,
) -> None:
    bad = await agent.call("Grep", {"pattern": "(unclosed"})
    missing = await agent.call("Grep", {"pattern": "a", "path": "/workspace/nope"})

    assert bad.is_error
    assert missing.is_error
    assert bad.content == (
        "Search failed \u2014 ripgrep rejected the pattern, glob, or file type without "
        "searching:\nrg: regex parse error:\n    (?:(unclosed)\n    ^\nerror: unclosed group"
    )
    assert missing.content == (
        "Directory does not exist: /workspace/nope. Note: your current working directory is "
        "/workspace."
    )


@needs_jail
async def test_grep_arguments_cannot_inject_shell_commands(agent: SessionDriver) -> None:
    put(agent, {"a.txt": "x\n"})

    await agent.call("Grep", {"pattern": "$(touch /workspace/pwned)", "glob": "`touch pwned2`"})
    await agent.call("Glob", {"pattern": "*; touch pwned3"})

    assert sorted(p.name for p in agent.jail.root.iterdir()) == ["a.txt"]


@needs_jail
async def test_a_grep_result_over_20000_chars_is_kept_in_a_file_behind_a_preview(
    agent: SessionDriver,
) -> None:
    # Given: 400 matching lines of 80 characters (about 34,000 characters of output)
    put(agent, {"big.log": "".join(f"ERROR {i:05} " + "x" * 68 + "\n" for i in range(400))})

    outcome = await agent.call(
        "Grep", {"pattern": "ERROR", "output_mode": "content", "head_limit": 0}
    )

    # Then: a preview and a path; the file holds every line
    assert outcome.content.startswith("<persisted-output>\nOutput too large (")
    path = f"/workspace/.warroom/tool-results/{agent.last_tool_use_id}.txt"
    assert f"Full output saved to: {path}\n" in outcome.content
    kept = (agent.jail.root / path.removeprefix("/workspace/")).read_text()
    assert kept.count("\n") == 399
    assert kept.startswith("/workspace/big.log:1:ERROR 00000 ")


@needs_jail
async def test_glob_in_the_sandbox_lists_files_that_gitignore_hides_but_grep_skips_them(
    agent: SessionDriver,
) -> None:
    # Given: a git checkout whose .gitignore hides build/
    files = {".git/HEAD": "ref: refs/heads/main\n", ".gitignore": "build/\n"}
    put(agent, {**files, "build/out.log": "hit\n", "src.log": "hit\n"})

    glob = await agent.call("Glob", {"pattern": "*.log"})
    grep = await agent.call("Grep", {"pattern": "hit"})

    assert glob.content == "/workspace/src.log\n/workspace/build/out.log"  # oldest first
    assert grep.content == "Found 1 file\n/workspace/src.log"


@needs_jail
async def test_a_newline_in_a_pattern_is_refused_on_a_mount_as_ripgrep_refuses_it(
    agent: SessionDriver,
) -> None:
    # Given the same files in /memory and in the sandbox (where real ripgrep searches)
    await seed(agent, NOTES)
    put(agent, {"a.md": NOTES["/a.md"]})
    # When a pattern that must match a newline is searched without multiline, and with it
    sandbox = await agent.call("Grep", {"pattern": "alpha\\nhello", "path": "/workspace"})
    memory = await agent.call("Grep", {"pattern": "alpha\\nhello", "path": "/memory"})
    allowed = await agent.call(
        "Grep", {"pattern": "alpha\\nhello", "path": "/memory", "multiline": True}
    )
    # Then /memory answers ripgrep's refusal, word for word, and multiline searches
    assert sandbox.is_error
    assert (memory.content, memory.is_error) == (sandbox.content, True)
    assert allowed.content == "Found 1 file\n/memory/a.md"


@pytest.mark.parametrize(
    "pattern",
    [
        "a\\nb",
        "a\\\\nb",
        "[\\n]",
        "[a\\n]",
        "[^\\n]",
        "[[:alpha:]\\n]",
        "a\\x0ab",
        "a\\x0Ab",
        "\\x{a}",
        "\\x{000a}",
        "\\s+",
        "a\nb",
        "[]\\n]",
        "x\\\\\\nb",
        # red team: ripgrep accepts these (a newline dropped from a class, or a comment
        # or whitespace in extended mode)
        "[^]\\n]",
        "[a\nb]",
        "(?x)a # a comment naming \\n",
        "(?x)a\nb",
        # and refuses these (the newline alone, however it is written)
        "[\\n\\n]",
        "[[\\n]]",
        "\\u000a",
        "\\u{a}",
        "\\U0000000A",
        "\\U{a}",
        "(?x)(?-x)\\n",
    ],
)
def test_the_newline_check_agrees_with_ripgrep(pattern: str, tmp_path: Path) -> None:
    import shutil
    import subprocess

    from harness.tools import ripgrep

    rg = shutil.which("rg")
    if rg is None:
        pytest.skip("ripgrep is not installed")
    (tmp_path / "f.txt").write_text("a\nb\n")
    run = subprocess.run([rg, "-c", "-e", pattern, str(tmp_path)], capture_output=True, text=True)
    refused = run.returncode == 2 and "is not allowed in a regex" in run.stderr
    assert ripgrep.refuses_newline(pattern) == refused, run.stderr
