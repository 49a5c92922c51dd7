"""Read, Write and Edit on sandbox paths: same formats and sentences, no read-state."""

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
    return agent.workspace.root / name


async def test_read_numbers_sandbox_lines_and_keeps_no_read_state(agent: SessionDriver) -> None:
    host(agent, "app.log").write_text("started\nlistening on :8080\n")

    outcome = await agent.call("Read", {"file_path": "/workspace/app.log", "offset": 2})

    assert outcome.content == "     2\tlistening on :8080"
    assert agent.read_state == {}


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


async def test_write_in_the_sandbox_needs_no_read_and_says_created_or_updated(
    agent: SessionDriver,
) -> None:
    host(agent, "existing.txt").write_text("old")

    created = await agent.call("Write", {"file_path": "/workspace/sub/new.txt", "content": "n\n"})
    updated = await agent.call("Write", {"file_path": "/workspace/existing.txt", "content": "x"})
    same = await agent.call("Write", {"file_path": "/workspace/existing.txt", "content": "x"})

    assert created.content == "File created successfully at: /workspace/sub/new.txt"
    assert updated.content == "The file /workspace/existing.txt has been updated successfully."
    assert same.content == (
        "The file /workspace/existing.txt already has exactly this content; nothing changed."
    )
    assert host(agent, "sub/new.txt").read_text() == "n\n"
    assert host(agent, "existing.txt").read_text() == "x"


async def test_edit_in_the_sandbox_applies_and_shows_a_snippet(agent: SessionDriver) -> None:
    host(agent, "c.yaml").write_text("replicas: 2\nimage: v1\n")

    outcome = await agent.call(
        "Edit", {"file_path": "/workspace/c.yaml", "old_string": "v1", "new_string": "v2"}
    )

    assert outcome.content == (
        "The file /workspace/c.yaml has been updated. Here's the result of running `cat -n` on "
        "a snippet of the edited file:\n     1\treplicas: 2\n     2\timage: v2"
    )
    assert host(agent, "c.yaml").read_text() == "replicas: 2\nimage: v2\n"


async def test_edit_in_the_sandbox_gives_claude_codes_errors(agent: SessionDriver) -> None:
    host(agent, "c.txt").write_text("a a\n")
    path = "/workspace/c.txt"

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
        "The file /workspace/n.txt has been updated. All occurrences of 'x' were successfully "
        "replaced with 'y'."
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
