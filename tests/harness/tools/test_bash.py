"""Bash: the guard first, then a real command in a jailed /workspace."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness import ToolContext, run_tool
from harness.loop.limits import Limits
from harness.tools.bash import BashInput
from tests.harness.tool_support import (
    JailWorkspace,
    SessionDriver,
    error_text,
    open_store,
)

pytestmark = pytest.mark.bwrap


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

    assert outcome.content == "(Bash completed with no output)"


async def test_bash_reports_a_timeout_and_the_process_is_killed(agent: SessionDriver) -> None:
    outcome = await agent.call(
        "Bash", {"command": "echo started; sleep 30; touch late", "timeout": 300}
    )

    assert outcome.is_error
    assert outcome.content.startswith("Exit code 143\n")
    assert outcome.content.endswith("\nCommand timed out after 0.3s")
    assert not (agent.jail.root / "late").exists()


async def test_bash_output_over_30000_chars_is_kept_in_a_file_the_model_can_read(
    agent: SessionDriver,
) -> None:
    # Given: a command printing 46,893 characters on 4,000 lines
    outcome = await agent.call("Bash", {"command": "for i in $(seq 4000); do echo line-$i..; done"})

    # Then: a short preview and the path of a sandbox file holding everything
    first, saved, blank, title, *preview = outcome.content.split("\n")
    path = saved.removeprefix("Output too large (45.8KB). Full output saved to: ")
    assert first == "<persisted-output>"
    assert path == f"/workspace/.warroom/tool-results/{agent.last_tool_use_id}.txt"
    assert (blank, title) == ("", "Preview (first 2KB):")
    assert preview[0] == "line-1.."
    assert preview[-2:] == ["...", "</persisted-output>"]
    assert len(outcome.content) < 2500
    # And: Read pages through the kept output
    page = await agent.call("Read", {"file_path": path, "offset": 3999, "limit": 2})
    assert page.content == "3999\tline-3999..\n4000\tline-4000.."


async def test_bash_refuses_commands_that_reach_virtual_paths(agent: SessionDriver) -> None:
    outcome = await agent.call("Bash", {"command": "cat /memory/teams.md"})

    assert error_text(outcome).startswith("Refused: this command would read /memory/teams.md.")
    assert "Use the Read tool" in error_text(outcome)
    assert agent.jail.started == []


async def test_bash_timeout_over_600000_ms_is_clamped_not_refused(agent: SessionDriver) -> None:
    outcome = await agent.call("Bash", {"command": "echo ok", "timeout": 900_000})

    assert outcome.content == "ok"
    assert BashInput(command="x", timeout=900_000).timeout_ms(600_000) == 600_000


async def test_bash_names_the_process_after_the_tool_use_id_so_a_retry_does_not_rerun(
    agent: SessionDriver,
) -> None:
    command = {"command": "echo run >> runs.txt; cat runs.txt"}
    first = await agent.call("Bash", command, tool_use_id="toolu_once")
    again = await agent.call("Bash", command, tool_use_id="toolu_once")

    assert first.content == again.content == "run"
    assert (agent.jail.root / "runs.txt").read_text() == "run\n"


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
    assert agent.jail.started == ["echo done"]


async def test_the_sessions_limits_cap_the_bash_timeout(agent: SessionDriver) -> None:
    ctx = ToolContext.for_session(
        agent.checkpoint(),
        agent.store,
        agent.workspace,
        "toolu_cap",
        Limits(bash_max_timeout_ms=200),
    )

    outcome = await run_tool("Bash", {"command": "sleep 5", "timeout": 60000}, ctx)

    assert outcome.content == "Exit code 143\nCommand timed out after 0.2s"


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

    # Then it is refused (as too complex when the parse outlasts the guard's time budget,
    # else for the read it then finds: which depends on the machine's speed), and the loop
    # kept beating while the guard worked in a thread
    assert outcome.is_error
    text = error_text(outcome)
    assert "too complex" in text or "would read /mem*/x" in text
    assert beats >= 20
