"""Claude Code's other tool names: aliases that run Warroom's tools, the task tools over the
todo list, and the names refused with a sentence saying what to use instead."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness import Todo, ToolContext, canonical_name, run_tool
from harness.loop.checkpoint import TodoStatus
from tests.harness.tool_support import JailWorkspace, SessionDriver, error_text, open_store


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(tmp_path), org_id="T-NAMES")


class Spawner:
    """Records the subagents it is asked to start."""

    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    async def spawn(self, **kw: Any) -> str:
        self.started.append(kw)
        return "s-child"


async def test_task_is_claude_codes_alias_of_agent(agent: SessionDriver) -> None:
    spawner = Spawner()
    ctx: ToolContext = replace(agent.context(), agents=spawner)

    outcome = await run_tool("Task", {"description": "Check pods", "prompt": "Look."}, ctx)

    assert outcome.pending
    assert [s["prompt"] for s in spawner.started] == ["Look."]
    assert canonical_name("Task") == "Agent"


async def test_kill_bash_is_claude_codes_alias_of_task_stop(agent: SessionDriver) -> None:
    outcome = await agent.call("KillBash", {"shell_id": "bnosuchid"})

    assert error_text(outcome) == "No task found with ID: bnosuchid"
    assert canonical_name("KillBash") == "TaskStop"


async def test_the_task_tools_edit_the_list_todowrite_keeps(agent: SessionDriver) -> None:
    # Given a list written with TodoWrite
    first = {"content": "Check pods", "status": "in_progress", "activeForm": "Checking pods"}
    await agent.call("TodoWrite", {"todos": [first]})
    # When the model goes on with Claude Code's task tools
    created = await agent.call(
        "TaskCreate", {"subject": "Read logs", "description": "api logs", "activeForm": "Reading"}
    )
    updated = await agent.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    listed = await agent.call("TaskList", {})
    got = await agent.call("TaskGet", {"taskId": "2"})
    deleted = await agent.call("TaskUpdate", {"taskId": "1", "status": "deleted"})
    missing = await agent.call("TaskGet", {"taskId": "7"})
    # Then it is one list, in either vocabulary
    assert created.content == "Task #2 created successfully: Read logs"
    assert updated.content == "Updated task #1 status"
    assert listed.content == "#1 [completed] Check pods\n#2 [pending] Read logs"
    assert got.content == "Task #2: Read logs\nStatus: pending\nActive form: Reading"
    assert deleted.content == "Task #1 deleted. Later tasks moved up one id."
    assert agent.todos == (Todo("Read logs", TodoStatus.PENDING, "Reading"),)
    assert error_text(missing) == "Task not found: 7. Task ids are list positions (1 to 1)."


@pytest.mark.parametrize(
    ("name", "advice"),
    [
        ("WebSearch", "There is no web search from Warroom"),
        ("NotebookEdit", "Edit the notebook's JSON with Read and Edit"),
        ("ListAgents", "Subagents answer their Agent call"),
        ("EnterWorktree", "The sandbox is this session's own checkout"),
    ],
)
async def test_claude_codes_other_tools_are_refused_with_what_to_use(
    agent: SessionDriver, name: str, advice: str
) -> None:
    outcome = await agent.call(name, {})

    assert error_text(outcome).startswith(f"{name} is not available in Warroom. {advice}")


async def test_a_name_claude_code_does_not_have_is_no_such_tool(agent: SessionDriver) -> None:
    for name in ("TaskOutput", "BashOutput", "NoSuchTool"):
        outcome = await agent.call(name, {})
        assert error_text(outcome) == f"Error: No such tool available: {name}"
