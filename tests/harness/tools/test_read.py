"""Read on the virtual mounts: numbering, windows, notices, directories, read-state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import ReadRecord
from memory_store import Namespace, Origin, Scope
from tests.harness.tool_support import JailWorkspace, SessionDriver, error_text, open_store

ORG = "T-READ"
HUMAN = Origin("U-HUMAN")
MEMORY = Namespace(ORG, Scope.MEMORY)


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(tmp_path), org_id=ORG)


async def seed(agent: SessionDriver, path: str, content: str) -> None:
    await agent.store.write(MEMORY, path, content, HUMAN, expected_version=None)


async def test_read_numbers_lines_like_cat_n_starting_at_one(agent: SessionDriver) -> None:
    await seed(agent, "/notes.md", "alpha\nbeta\n")

    outcome = await agent.call("Read", {"file_path": "/memory/notes.md"})

    assert not outcome.is_error
    assert outcome.content == "1\talpha\n2\tbeta\n3"  # the empty line after the last newline
    assert agent.read_state["/memory/notes.md"] == ReadRecord(1, full=True, notified_version=1)


async def test_read_returns_the_whole_file_by_default(agent: SessionDriver) -> None:
    await seed(agent, "/long.md", "".join(f"line {i}\n" for i in range(1, 3001)))

    outcome = await agent.call("Read", {"file_path": "/memory/long.md"})

    lines = outcome.content.split("\n")
    assert lines[0] == "1\tline 1"
    assert lines[2999:] == ["3000\tline 3000", "3001"]
    assert agent.read_state["/memory/long.md"].full


async def test_read_with_offset_and_limit_returns_that_window_and_counts_as_a_read(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/n.md", "a\nb\nc\nd\n")

    outcome = await agent.call("Read", {"file_path": "/memory/n.md", "offset": 2, "limit": 2})

    assert outcome.content == "2\tb\n3\tc"
    assert agent.read_state["/memory/n.md"] == ReadRecord(1, full=True, notified_version=1)


async def test_read_shows_long_lines_whole_and_removes_carriage_returns(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/wide.md", "x" * 2500 + "\r\nshort\r\n")

    outcome = await agent.call("Read", {"file_path": "/memory/wide.md"})

    assert outcome.content == "1\t" + "x" * 2500 + "\n2\tshort\n3"


async def test_a_file_with_a_line_over_2000_chars_can_be_rewritten_after_one_read(
    agent: SessionDriver,
) -> None:
    # Given: a shared file with one very long line, read once
    await seed(agent, "/wide.md", "x" * 2500 + "\nshort\n")
    await agent.call("Read", {"file_path": "/memory/wide.md"})

    # When: the model rewrites it with Write
    outcome = await agent.call("Write", {"file_path": "/memory/wide.md", "content": "rewritten\n"})

    # Then: the write is accepted
    assert not outcome.is_error, outcome.content
    assert outcome.content == (
        "The file /memory/wide.md has been updated successfully. (file state is current in "
        "your context \u2014 no need to Read it back)"
    )


async def test_read_of_an_empty_file_says_it_exists_but_is_empty(agent: SessionDriver) -> None:
    await seed(agent, "/empty.md", "")

    outcome = await agent.call("Read", {"file_path": "/memory/empty.md"})

    assert outcome.content == (
        "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
    )
    assert agent.read_state["/memory/empty.md"].full


async def test_read_past_the_end_says_how_many_lines_the_file_has(agent: SessionDriver) -> None:
    await seed(agent, "/short.md", "a\nb\nc\n")

    outcome = await agent.call("Read", {"file_path": "/memory/short.md", "offset": 10})

    assert outcome.content == (
        "<system-reminder>Warning: the file exists but is shorter than the provided offset "
        "(10). The file has 4 lines.</system-reminder>"
    )


async def test_read_of_a_missing_virtual_file_says_file_does_not_exist(
    agent: SessionDriver,
) -> None:
    outcome = await agent.call("Read", {"file_path": "/memory/nope.md"})

    assert outcome.is_error
    assert (
        outcome.content
        == "File does not exist. Note: your current working directory is /workspace."
    )  # unwrapped, as Claude Code gives it
    assert "/memory/nope.md" not in agent.read_state


async def test_read_of_a_virtual_directory_lists_its_entries_directories_first(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/teams/payments.md", "pay\n")
    await seed(agent, "/teams/ops/oncall.md", "ops\n")
    await seed(agent, "/readme.md", "top\n")

    outcome = await agent.call("Read", {"file_path": "/memory/teams"})

    lines = outcome.content.split("\n")
    assert lines[0] == "/memory/teams/ is a directory with 2 entries:"
    assert lines[1] == "- ops/"
    assert lines[2].startswith("- payments.md (4 bytes, updated ")
    assert "/memory/teams" not in agent.read_state


async def test_read_of_a_mount_root_lists_it_even_when_empty(agent: SessionDriver) -> None:
    empty = await agent.call("Read", {"file_path": "/incident"})
    await seed(agent, "/a.md", "a\n")
    listed = await agent.call("Read", {"file_path": "/memory/"})

    assert empty.content == "/incident/ is an empty directory."
    assert listed.content.startswith("/memory/ is a directory with 1 entry:\n- a.md (")


async def test_incident_files_belong_to_their_channel(agent: SessionDriver) -> None:
    # Given a note written in channel C1
    writer = SessionDriver(agent.store, agent.workspace, org_id=ORG, channel_id="C1")
    await writer.call("Write", {"file_path": "/incident/notes.md", "content": "db pool\n"})
    # When sessions in C1 and C2 read it
    same = SessionDriver(agent.store, agent.workspace, org_id=ORG, channel_id="C1")
    other = SessionDriver(agent.store, agent.workspace, org_id=ORG, channel_id="C2")
    seen = await same.call("Read", {"file_path": "/incident/notes.md"})
    unseen = await other.call("Read", {"file_path": "/incident/notes.md"})
    # Then only the same incident sees it
    assert seen.content == "1\tdb pool\n2"
    assert unseen.is_error
    assert unseen.content.startswith("File does not exist.")


async def test_memory_is_shared_across_channels_but_not_across_orgs(agent: SessionDriver) -> None:
    await seed(agent, "/shared.md", "lesson\n")
    elsewhere = SessionDriver(agent.store, agent.workspace, org_id=ORG, channel_id="C-OTHER")
    other_org = SessionDriver(agent.store, agent.workspace, org_id="T-OTHER")

    assert (await elsewhere.call("Read", {"file_path": "/memory/shared.md"})).content == (
        "1\tlesson\n2"
    )
    unseen = await other_org.call("Read", {"file_path": "/memory/shared.md"})
    assert unseen.is_error
    assert unseen.content.startswith("File does not exist.")


async def test_a_partial_read_after_a_full_read_of_the_same_version_stays_full(
    agent: SessionDriver,
) -> None:
    await seed(agent, "/n.md", "a\nb\n")
    await agent.call("Read", {"file_path": "/memory/n.md"})

    await agent.call("Read", {"file_path": "/memory/n.md", "offset": 2})

    assert agent.read_state["/memory/n.md"].full


async def test_read_of_a_relative_path_is_taken_from_the_working_directory(
    agent: SessionDriver,
) -> None:
    (agent.jail.root / "sub").mkdir()
    (agent.jail.root / "sub" / "notes.md").write_text("here\n")
    agent.cwd = "/workspace/sub"

    outcome = await agent.call("Read", {"file_path": "notes.md"})

    assert outcome.content == "1\there\n2"
    assert "/workspace/sub/notes.md" in agent.read_state


async def test_read_of_a_path_escaping_its_mount_is_refused(agent: SessionDriver) -> None:
    outcome = await agent.call("Read", {"file_path": "/skills/../memory/x.md"})

    assert error_text(outcome) == "path escapes its mount root: '/skills/../memory/x.md'"
