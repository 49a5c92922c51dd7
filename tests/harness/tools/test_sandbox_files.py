"""Read, Write and Edit on sandbox paths: same formats and sentences, and Claude Code's
read-before-write rule (a fingerprint of what was read)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import run_tool
from tests.harness.tool_support import JailWorkspace, SessionDriver, error_text, open_store


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    root = tmp_path / "ws"
    root.mkdir()
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(root), org_id="T-SANDBOX")


def host(agent: SessionDriver, name: str) -> Path:
    return agent.jail.root / name


async def test_read_numbers_sandbox_lines_and_records_a_partial_read(agent: SessionDriver) -> None:
    host(agent, "app.log").write_text("started\nlistening on :8080\n")

    outcome = await agent.call("Read", {"file_path": "/workspace/app.log", "offset": 2})

    assert outcome.content == "2\tlistening on :8080"
    assert not agent.read_state["/workspace/app.log"].full


async def test_a_whole_sandbox_file_over_256_kb_is_refused_but_can_be_read_in_parts(
    agent: SessionDriver,
) -> None:
    host(agent, "big.log").write_text("line of text\n" * 30_000)  # 390,000 bytes

    whole = await agent.call("Read", {"file_path": "/workspace/big.log"})
    part = await agent.call("Read", {"file_path": "/workspace/big.log", "offset": 100, "limit": 2})

    assert error_text(whole) == (
        "File content (380.9KB) exceeds maximum allowed size (256KB). Use offset and limit "
        "parameters to read specific portions of the file, or search for specific content "
        "instead of reading the whole file."
    )
    assert part.content.startswith("100\tline of text\n101\tline of text\n")


async def test_a_window_over_25000_tokens_is_refused(agent: SessionDriver) -> None:
    host(agent, "wide.log").write_text(("y" * 1900 + "\n") * 100)  # 190 KB, 2,000-char lines

    outcome = await agent.call("Read", {"file_path": "/workspace/wide.log"})

    assert error_text(outcome).startswith("File content (47")
    assert "exceeds maximum allowed tokens (25000)" in error_text(outcome)


async def test_read_of_sandbox_edge_cases_uses_the_same_wording(agent: SessionDriver) -> None:
    host(agent, "empty").write_text("")
    host(agent, "dir").mkdir()
    host(agent, "blob.bin").write_bytes(b"\x7fELF\x00\x01")

    empty = await agent.call("Read", {"file_path": "/workspace/empty"})
    missing = await agent.call("Read", {"file_path": "/workspace/missing"})
    directory = await agent.call("Read", {"file_path": "/workspace/dir"})
    binary = await agent.call("Read", {"file_path": "/workspace/blob.bin"})

    assert empty.content == (
        "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
    )
    assert error_text(missing) == "File does not exist."
    assert error_text(directory) == (
        "/workspace/dir is a directory, not a file. List it with Bash (`ls /workspace/dir`) or "
        "find files in it with Glob."
    )
    assert error_text(binary).startswith("This tool cannot read binary files: /workspace/blob.bin")


async def test_write_in_the_sandbox_creates_freely_and_overwrites_after_a_full_read(
    agent: SessionDriver,
) -> None:
    host(agent, "existing.txt").write_text("old")
    path = "/workspace/existing.txt"

    created = await agent.call("Write", {"file_path": "/workspace/sub/new.txt", "content": "n\n"})
    unread = await agent.call("Write", {"file_path": path, "content": "x"})
    await agent.call("Read", {"file_path": path})
    updated = await agent.call("Write", {"file_path": path, "content": "x"})
    same = await agent.call("Write", {"file_path": path, "content": "x"})

    assert created.content == "File created successfully at: /workspace/sub/new.txt"
    assert error_text(unread) == "File has not been read yet. Read it first before writing to it."
    assert updated.content == "The file /workspace/existing.txt has been updated successfully."
    assert same.content == (
        "The file /workspace/existing.txt already has exactly this content; nothing changed."
    )
    assert host(agent, "sub/new.txt").read_text() == "n\n"
    assert host(agent, "existing.txt").read_text() == "x"


async def test_a_sandbox_file_changed_since_it_was_read_must_be_read_again(
    agent: SessionDriver,
) -> None:
    # Given: a file read by the model, then changed by a command
    host(agent, "conf.txt").write_text("a\n")
    path = "/workspace/conf.txt"
    await agent.call("Read", {"file_path": path})
    await agent.call("Bash", {"command": "echo b >> conf.txt"})

    # When: the model writes and edits it from what it read
    write = await agent.call("Write", {"file_path": path, "content": "c\n"})
    edit = await agent.call("Edit", {"file_path": path, "old_string": "a", "new_string": "z"})

    # Then: both are refused with Claude Code's sentence, and nothing changed
    for outcome in (write, edit):
        assert error_text(outcome).startswith(
            "File has been modified since read, either by the user or by a linter. Read it "
            "again before attempting to write it."
        )
    assert host(agent, "conf.txt").read_text() == "a\nb\n"


async def test_a_partly_read_sandbox_file_may_be_edited_but_not_overwritten(
    agent: SessionDriver,
) -> None:
    host(agent, "p.txt").write_text("one\ntwo\nthree\n")
    path = "/workspace/p.txt"
    await agent.call("Read", {"file_path": path, "limit": 1})

    write = await agent.call("Write", {"file_path": path, "content": "x\n"})
    edit = await agent.call("Edit", {"file_path": path, "old_string": "one", "new_string": "1"})

    assert error_text(write).startswith("File has not been read in full")
    assert not edit.is_error
    assert host(agent, "p.txt").read_text() == "1\ntwo\nthree\n"


async def test_edit_in_the_sandbox_applies_after_a_read_and_says_so(agent: SessionDriver) -> None:
    host(agent, "c.yaml").write_text("replicas: 2\nimage: v1\n")
    unread = await agent.call(
        "Edit", {"file_path": "/workspace/c.yaml", "old_string": "v1", "new_string": "v2"}
    )
    await agent.call("Read", {"file_path": "/workspace/c.yaml"})

    outcome = await agent.call(
        "Edit", {"file_path": "/workspace/c.yaml", "old_string": "v1", "new_string": "v2"}
    )

    assert error_text(unread) == "File has not been read yet. Read it first before writing to it."
    assert outcome.content == (
        "The file /workspace/c.yaml has been updated successfully. (file state is current in "
        "your context \u2014 no need to Read it back)"
    )
    assert host(agent, "c.yaml").read_text() == "replicas: 2\nimage: v2\n"


async def test_edit_in_the_sandbox_gives_claude_codes_errors(agent: SessionDriver) -> None:
    host(agent, "c.txt").write_text("a a\n")
    path = "/workspace/c.txt"
    await agent.call("Read", {"file_path": path})

    same = await agent.call("Edit", {"file_path": path, "old_string": "a", "new_string": "a"})
    missing = await agent.call(
        "Edit", {"file_path": "/workspace/none", "old_string": "a", "new_string": "b"}
    )
    exists = await agent.call("Edit", {"file_path": path, "old_string": "", "new_string": "b"})
    absent = await agent.call("Edit", {"file_path": path, "old_string": "zz", "new_string": "b"})
    twice = await agent.call("Edit", {"file_path": path, "old_string": "a", "new_string": "b"})

    assert error_text(same) == "No changes to make: old_string and new_string are exactly the same."
    assert error_text(missing) == "File does not exist."
    assert error_text(exists) == "Cannot create new file - file already exists."
    assert error_text(absent) == "String to replace not found in file.\nString: zz"
    assert error_text(twice).startswith(
        "Found 2 matches of the string to replace, but replace_all is false."
    )
    assert host(agent, "c.txt").read_text() == "a a\n"


async def test_edit_in_the_sandbox_creates_a_file_from_an_empty_old_string_and_replaces_all(
    agent: SessionDriver,
) -> None:
    created = await agent.call(
        "Edit", {"file_path": "/workspace/n.txt", "old_string": "", "new_string": "x x\n"}
    )
    replaced = await agent.call(
        "Edit",
        {
            "file_path": "/workspace/n.txt",
            "old_string": "x",
            "new_string": "y",
            "replace_all": True,
        },
    )

    assert created.content == "File created successfully at: /workspace/n.txt"
    assert replaced.content == (
        "The file /workspace/n.txt has been updated. All occurrences were successfully replaced."
    )
    assert host(agent, "n.txt").read_text() == "y y\n"


async def test_a_sandbox_edit_interrupted_by_a_crash_is_reported_unknown_not_redone(
    agent: SessionDriver,
) -> None:
    host(agent, "c.txt").write_text("a\n")
    edit = {"file_path": "/workspace/c.txt", "old_string": "a", "new_string": "aa"}

    recovered = await run_tool("Edit", edit, agent.context("toolu_x"), recovering=True)

    assert recovered is None
    assert host(agent, "c.txt").read_text() == "a\n"
