"""Bash: the guard first, then a real command in a jailed /workspace."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import ToolContext, run_tool
from harness.loop.limits import Limits
from tests.harness.tool_support import (
    JailWorkspace,
    SessionDriver,
    bwrap_available,
    error_text,
    open_store,
)

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (bwrap) is not installed")


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[SessionDriver]:
    root = tmp_path / "ws"
    root.mkdir()
    async with open_store(None, tmp_path) as store:
        yield SessionDriver(store, JailWorkspace(root), org_id="T-BASH")


async def test_bash_runs_in_workspace_and_returns_stdout_then_stderr(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Bash", {"command": "pwd; echo err >&2", "description": "Show where we are"}
    )

    assert not outcome.is_error
    assert outcome.content == "/workspace\nerr"


async def test_bash_shows_a_non_zero_exit_code_as_an_error(agent: SessionDriver) -> None:
    outcome = await agent.call("Bash", {"command": "echo partial; echo oops >&2; exit 3"})

    assert outcome.is_error
    assert outcome.content == "Exit code 3\npartial\noops"


async def test_bash_without_output_says_so(agent: SessionDriver) -> None:
    outcome = await agent.call("Bash", {"command": "true"})

    assert outcome.content == "(no output)"


async def test_bash_reports_a_timeout_and_the_process_is_killed(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Bash", {"command": "echo started; sleep 30; touch late", "timeout": 300}
    )

    assert outcome.is_error
    assert outcome.content.startswith("Command timed out after 0.3 s and was killed.")
    assert not (agent.workspace.root / "late").exists()


async def test_bash_cuts_output_over_30000_chars_keeping_head_and_tail(
    agent: SessionDriver,
) -> None:
    outcome = await agent.call(
        "Bash", {"command": "printf 'H%.0s' $(seq 20000); printf 'T%.0s' $(seq 20000)"}
    )

    head, marker, tail = outcome.content.split("\n\n")
    assert head == "H" * 15000
    assert marker == "... [10000 characters cut] ..."
    assert tail == "T" * 15000


async def test_bash_refuses_commands_that_reach_virtual_paths(agent: SessionDriver) -> None:
    outcome = await agent.call("Bash", {"command": "cat /memory/teams.md"})

    assert error_text(outcome).startswith("Refused: this command would read /memory/teams.md.")
    assert "Use the Read tool" in error_text(outcome)
    assert agent.workspace.started == []


async def test_bash_timeout_over_600000_ms_is_an_input_error(agent: SessionDriver) -> None:
    outcome = await agent.call("Bash", {"command": "true", "timeout": 600001})

    assert error_text(outcome) == (
        "InputValidationError: Bash failed due to the following issue:\n"
        "The parameter `timeout` is invalid: Input should be less than or equal to 600000"
    )


async def test_bash_names_the_process_after_the_tool_use_id_so_a_retry_does_not_rerun(
    agent: SessionDriver,
) -> None:
    command = {"command": "echo run >> runs.txt; cat runs.txt"}
    first = await agent.call("Bash", command, tool_use_id="toolu_once")
    again = await agent.call("Bash", command, tool_use_id="toolu_once")

    assert first.content == again.content == "run"
    assert (agent.workspace.root / "runs.txt").read_text() == "run\n"


async def test_recovering_a_bash_call_takes_the_sandboxs_record_or_admits_it_is_unknown(
    agent: SessionDriver,
) -> None:
    # Given one call that ran before the worker died, and one that never reached the sandbox
    await agent.call("Bash", {"command": "echo done"}, tool_use_id="toolu_ran")
    # When each is recovered
    known = await run_tool(
        "Bash", {"command": "echo done"}, agent.context("toolu_ran"), recovering=True
    )
    unknown = await run_tool(
        "Bash", {"command": "echo done"}, agent.context("toolu_lost"), recovering=True
    )
    # Then the first result comes from the sandbox and the second is unknown (never re-run)
    assert known is not None
    assert known.content == "done"
    assert unknown is None
    assert agent.workspace.started == ["echo done"]


async def test_the_sessions_limits_cap_the_bash_timeout(agent: SessionDriver) -> None:
    ctx = ToolContext.for_session(
        agent.checkpoint(),
        agent.store,
        agent.workspace,
        "toolu_cap",
        Limits(bash_max_timeout_ms=200),
    )

    outcome = await run_tool("Bash", {"command": "sleep 5", "timeout": 60000}, ctx)

    assert outcome.content == "Command timed out after 0.2 s and was killed."


async def test_bash_keeps_the_event_loop_running_while_the_guard_analyses(
    agent: SessionDriver,
) -> None:
    # Given a command the guard needs its whole time budget for (tree-sitter's parse of
    # thousands of nested arrays), and a heartbeat on the event loop
    command = "a=(" * 5000 + ")" * 5000 + "; cat /mem*/x"
    beats = 0

    async def heartbeat() -> None:
        nonlocal beats
        while True:
            await asyncio.sleep(0.01)
            beats += 1

    ticker = asyncio.create_task(heartbeat())
    # When the Bash tool is called with it
    try:
        outcome = await agent.call("Bash", {"command": command})
    finally:
        ticker.cancel()

    # Then it is refused, and the loop kept beating while the guard worked in a thread
    assert "too complex" in error_text(outcome)
    assert beats >= 20
