"""Read, Write and Edit on sandbox paths: same formats and sentences, and Claude Code's
read-before-write rule (a fingerprint of what was read)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import run_tool
from tests.harness.tool_support import (
    STATE_CURRENT,
    JailWorkspace,
    SessionDriver,
    error_text,
    open_store,
)


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    root = tmp_path / "ws"
    root.mkdir()
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(root), org_id="T-SANDBOX")


def host(agent: SessionDriver, name: str) -> Path:
    return agent.jail.root / name


async def test_read_numbers_sandbox_lines_from_an_offset(agent: SessionDriver) -> None:
    host(agent, "app.log").write_text("started\r\nlistening on :8080\r\n")

    outcome = await agent.call("Read", {"file_path": "/workspace/app.log", "offset": 2})

    assert outcome.content == "2\tlistening on :8080\n3"  # CRs removed, last empty line numbered
    assert agent.read_state["/workspace/app.log"].full


async def test_a_whole_sandbox_file_over_256_kb_is_refused_but_can_be_read_in_parts(
    agent: SessionDriver,
) -> None:
    host(agent, "big.log").write_text("line of text\n" * 30_000)  # 390,000 bytes

    whole = await agent.call("Read", {"file_path": "/workspace/big.log"})
    part = await agent.call("Read", {"file_path": "/workspace/big.log", "offset": 100, "limit": 2})

    large = await agent.call("Read", {"file_path": "/workspace/big.log", "allow_large": True})

    assert whole.is_error
    assert whole.content == (  # unwrapped, as Claude Code gives it
        "File content (380.9KB) exceeds maximum allowed size (256KB). Use offset and limit "
        "parameters to read specific portions of the file, or search for specific content "
        "instead of reading the whole file. To read it anyway, up to what still fits in your "
        "context, call Read again with allow_large: true \u2014 only if you genuinely need all of "
        "it or the user asked for the whole file."
    )
    assert part.content == "100\tline of text\n101\tline of text"
    assert large.content.startswith("1\tline of text\n")
    assert large.content.endswith("to fit in your context; read on with offset 5618.)")


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
    assert missing.is_error
    assert directory.is_error
    assert missing.content == (
        "File does not exist. Note: your current working directory is /workspace."
    )
    assert directory.content == "EISDIR: illegal operation on a directory, read '/workspace/dir'"
    assert error_text(binary) == (
        "This tool cannot read binary files. The file appears to be a binary .bin file. Use a "
        "skill for this file type if one is available, or a shell command or script that can "
        "read the format."
    )


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

    assert created.content == "File created successfully at: /workspace/sub/new.txt" + STATE_CURRENT
    assert error_text(unread) == "File has not been read yet. Read it first before writing to it."
    assert (
        updated.content
        == "The file /workspace/existing.txt has been updated successfully." + STATE_CURRENT
    )
    assert same.content == updated.content
    assert host(agent, "sub/new.txt").read_text() == "n\n"
    assert host(agent, "existing.txt").read_text() == "x"


async def test_a_file_changed_behind_the_models_back_is_edited_with_a_note_but_not_overwritten(
    agent: SessionDriver,
) -> None:
    # Given: a file read by the model, then changed where no tool result reports it
    host(agent, "conf.txt").write_text("a\n")
    path = "/workspace/conf.txt"
    await agent.call("Read", {"file_path": path})
    host(agent, "conf.txt").write_text("a\nb\n")

    # When: the model writes and edits it from what it read
    write = await agent.call("Write", {"file_path": path, "content": "c\n"})
    edit = await agent.call("Edit", {"file_path": path, "old_string": "a", "new_string": "z"})

    # Then: Write is refused, Edit applies with Claude Code's note
    assert error_text(write).startswith(
        "File has been modified since read, either by the user or by a linter. Read it "
        "again before attempting to write it."
    )
    assert edit.content == (
        "The file /workspace/conf.txt has been updated successfully. (note: the file had been "
        "modified on disk since you last read it \u2014 the edit applied cleanly, but the file "
        "contains other changes not in your context. Read it before edits that depend on "
        "surrounding content.)"
    )
    assert host(agent, "conf.txt").read_text() == "z\nb\n"


async def test_a_command_that_changes_a_read_file_reports_it_and_write_may_follow(
    agent: SessionDriver,
) -> None:
    # Given: a file read by the model
    host(agent, "conf.txt").write_text("a\n")
    path = "/workspace/conf.txt"
    await agent.call("Read", {"file_path": path})

    # When: a command changes it, then the model writes it
    bash = await agent.call("Bash", {"command": "echo b >> conf.txt"})
    again = await agent.call("Bash", {"command": "true"})
    write = await agent.call("Write", {"file_path": path, "content": "c\n"})

    # Then: the command's result says so, with the new lines, once; Write proceeds
    assert bash.content == (
        "(Bash completed with no output)\n\n<system-reminder>\nNote: /workspace/conf.txt "
        "changed on disk since you last read it. That's usually deliberate, so take it as the "
        "current state rather than reverting it; if the change looks wrong, say so rather than "
        "undoing it yourself \u2014 otherwise no need to call it out. Here are the relevant "
        "changes (shown with line numbers):\n1\ta\n2\tb\n</system-reminder>"
    )
    assert again.content == "(Bash completed with no output)"
    assert not write.is_error, write.content
    assert host(agent, "conf.txt").read_text() == "c\n"


async def test_a_cd_persists_between_bash_calls_and_relative_paths_follow_it(
    agent: SessionDriver,
) -> None:
    host(agent, "sub").mkdir()
    host(agent, "sub/x.txt").write_text("x\n")

    moved = await agent.call("Bash", {"command": "cd sub && pwd"})
    where = await agent.call("Bash", {"command": "pwd"})
    read = await agent.call("Read", {"file_path": "x.txt"})

    assert moved.content.endswith("/sub")
    assert where.content == moved.content
    assert read.content == "1\tx\n2"


async def test_a_partly_read_sandbox_file_may_be_edited_and_overwritten(
    agent: SessionDriver,
) -> None:
    host(agent, "p.txt").write_text("one\ntwo\nthree\n")
    path = "/workspace/p.txt"
    await agent.call("Read", {"file_path": path, "limit": 1})

    edit = await agent.call("Edit", {"file_path": path, "old_string": "one", "new_string": "1"})
    write = await agent.call("Write", {"file_path": path, "content": "x\n"})

    assert not edit.is_error
    assert not write.is_error
    assert host(agent, "p.txt").read_text() == "x\n"


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
    assert error_text(missing) == (
        "File does not exist. Note: your current working directory is /workspace."
    )
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

    assert created.content == (
        "The file /workspace/n.txt has been updated successfully. (file state is current in "
        "your context \u2014 no need to Read it back)"
    )
    assert replaced.content == (
        "The file /workspace/n.txt has been updated. All occurrences were successfully replaced."
        " (file state is current in your context \u2014 no need to Read it back)"
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
