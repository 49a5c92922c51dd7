"""Per-step change notices for files a session read and someone else changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import ReadRecord, change_notices
from memory_store import Namespace, Origin, Scope
from tests.harness.tool_support import STATE_CURRENT, JailWorkspace, SessionDriver, open_store

ORG = "T-NOTICE"
MEMORY = Namespace(ORG, Scope.MEMORY)
INCIDENT = Namespace(ORG, Scope.INCIDENT, "C-INCIDENT")
TEAMMATE = Origin("agent", "s-teammate", "toolu_other")


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(tmp_path), org_id=ORG, session_id="s-me")


async def change(agent: SessionDriver, path: str, content: str, n: int = 1) -> None:
    origin = Origin(TEAMMATE.actor, TEAMMATE.session_id, f"toolu_other_{path}_{n}")
    await agent.store.write(MEMORY, path, content, origin, expected_version=None)


async def test_a_changed_file_is_told_with_a_numbered_diff_and_not_to_revert_it(
    agent: SessionDriver,
) -> None:
    # Given this session read a file that a teammate's session then changed
    await change(agent, "/x.md", "a\nb\nc\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await change(agent, "/x.md", "a\nB\nc\n", 2)
    # When the next model step is prepared
    texts = await agent.next_step_notices()
    # Then exactly this reminder is added
    assert texts == [  # Claude Code 2.1.336's sentence, naming who changed it
        "<system-reminder>\nNote: /memory/x.md was changed by another agent session "
        "(s-teammate) since you last read it (version 1 → 2). That's usually deliberate, so "
        "take it as the current state rather than reverting it; if the change looks wrong, "
        "say so rather than undoing it yourself \u2014 otherwise no need to call it out. Here "
        "are the relevant changes (shown with line numbers):\n"
        "1\ta\n2\tB\n3\tc\n</system-reminder>"
    ]


async def test_each_change_is_told_only_once(agent: SessionDriver) -> None:
    await change(agent, "/x.md", "a\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await change(agent, "/x.md", "b\n", 2)

    first = await agent.next_step_notices()
    second = await agent.next_step_notices()

    assert len(first) == 1
    assert second == []
    assert agent.read_state["/memory/x.md"] == ReadRecord(1, full=True, notified_version=2)


async def test_a_later_change_is_told_as_the_diff_since_the_last_notice(
    agent: SessionDriver,
) -> None:
    await change(agent, "/x.md", "one\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await change(agent, "/x.md", "one\ntwo\n", 2)
    await agent.next_step_notices()
    await change(agent, "/x.md", "one\ntwo\nthree\n", 3)

    (text,) = await agent.next_step_notices()

    assert "(version 2 → 3)" in text
    assert text.endswith("1\tone\n2\ttwo\n3\tthree\n</system-reminder>")


async def test_a_notice_counts_as_seeing_the_change_so_write_may_follow(
    agent: SessionDriver,
) -> None:
    # Claude Code 2.1.336: once a notice showed the change, Write replaces the file
    await change(agent, "/x.md", "a\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await change(agent, "/x.md", "b\n", 2)
    unseen = await agent.call("Write", {"file_path": "/memory/x.md", "content": "c\n"})
    await agent.next_step_notices()

    outcome = await agent.call("Write", {"file_path": "/memory/x.md", "content": "c\n"})

    assert "File has been modified since read" in unseen.content
    assert not outcome.is_error, outcome.content


async def test_a_deleted_file_is_said_deleted_and_may_then_be_written_again(
    agent: SessionDriver,
) -> None:
    await change(agent, "/x.md", "a\n")
    await agent.call("Read", {"file_path": "/memory/x.md"})
    await agent.store.delete(MEMORY, "/x.md", Origin("U-BOB", None, "del"))

    texts = await agent.next_step_notices()
    again = await agent.next_step_notices()
    recreated = await agent.call("Write", {"file_path": "/memory/x.md", "content": "new\n"})

    assert texts == [
        "<system-reminder>\nNote: /memory/x.md was deleted by <@U-BOB> after you read it. This "
        "was intentional; do not recreate it unless the user asks you to.\n</system-reminder>"
    ]
    assert again == []
    assert recreated.content == "File created successfully at: /memory/x.md" + STATE_CURRENT


async def test_the_sessions_own_writes_are_not_told_back_to_it(agent: SessionDriver) -> None:
    await agent.call("Write", {"file_path": "/memory/mine.md", "content": "a\n"})
    await agent.call("Edit", {"file_path": "/memory/mine.md", "old_string": "a", "new_string": "b"})

    assert await agent.next_step_notices() == []


async def test_notices_cover_every_virtual_mount_and_ignore_sandbox_paths(
    agent: SessionDriver,
) -> None:
    await agent.store.write(INCIDENT, "/t.md", "1\n", TEAMMATE, expected_version=None)
    await change(agent, "/m.md", "1\n")
    await agent.call("Read", {"file_path": "/incident/t.md"})
    await agent.call("Read", {"file_path": "/memory/m.md"})
    agent.read_state["/workspace/app.log"] = ReadRecord(1, full=True)
    await agent.store.write(
        INCIDENT, "/t.md", "2\n", Origin("agent", "s-x", "toolu_t2"), expected_version=1
    )
    await change(agent, "/m.md", "2\n", 2)

    texts = await agent.next_step_notices()

    assert [t.split(" was ")[0] for t in texts] == [
        "<system-reminder>\nNote: /incident/t.md",
        "<system-reminder>\nNote: /memory/m.md",
    ]


async def test_no_read_files_means_no_notices_and_no_updates(agent: SessionDriver) -> None:
    assert await change_notices(agent.store, agent.checkpoint()) == ([], {})
