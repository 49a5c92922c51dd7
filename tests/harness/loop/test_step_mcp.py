"""MCP tools through the real step (``advance``): a scripted model calls them over the fake
Messages API, with the real server-everything behind them."""

from __future__ import annotations

import asyncio
import doctest
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import (
    APPROVAL_KIND,
    ApprovalDecision,
    ApprovalGate,
    Checkpoint,
    Inbound,
    McpServers,
    McpTool,
    Notice,
    ServerState,
    StepKind,
    ToolUnknown,
    approval_posted,
    next_kind,
    tool_specs,
)
from harness.loop import mcp_reminder
from harness.loop.mcp_reminder import note_server_changes
from tests.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from tests.harness.mcp.support import children_named, config_text, everything, running, until
from tests.harness.step_support import (
    Kit,
    new_checkpoint,
    open_kit,
    prefix_stable,
    texts_of,
    transcript_problems,
)

ECHO = "mcp__everything__echo"
NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)
LONG = "mcp__everything__trigger-long-running-operation"


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI() as server:
        yield server


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[Kit]:
    async with open_kit(tmp_path) as shared:
        yield shared


@pytest.fixture
async def servers() -> AsyncIterator[McpServers]:
    async with running(config_text(everything=everything())) as started:
        yield started


def ask(text: str) -> tuple[Inbound, ...]:
    return (Inbound("U-ALICE", text, "Alice"),)


def tool_names(request: RecordedRequest) -> list[str]:
    return [t["name"] for t in request.body["tools"]]


def last_user_texts(request: RecordedRequest) -> list[str]:
    return texts_of(request.messages[-1])


async def test_a_scripted_model_calls_an_mcp_tool_through_the_step(
    fake: FakeAnthropicAPI, kit: Kit, servers: McpServers
) -> None:
    # Given a model that calls the echo tool of the everything server, then answers
    fake.push(Reply.tool(ECHO, {"message": "checkout 500s"}), Reply.text("It echoed."))
    run = kit.session(fake.base_url, mcp=servers)

    # When the session runs
    await run.run(ask("echo it"))

    # Then the tool list is the built-in tools then the server's, the same bytes each time
    built_in = [s.name for s in tool_specs()]
    names = tool_names(fake.requests[0])
    assert names[: len(built_in)] == built_in
    assert ECHO in names[len(built_in) :]
    assert prefix_stable(fake.requests[0], fake.requests[1])
    # And the model got the server's result
    result = fake.requests[1].messages[-1]["content"][0]
    assert (result["content"], result.get("is_error", False)) == ("Echo: checkout 500s", False)
    assert run.answers == ["It echoed."]
    assert all(transcript_problems(r.messages) == [] for r in fake.requests)


async def test_a_crashed_mcp_call_is_reported_unknown_not_sent_again(
    fake: FakeAnthropicAPI, kit: Kit, servers: McpServers
) -> None:
    # Given a worker that committed an MCP call's intent and died before its result
    fake.push(Reply.tool(ECHO, {"message": "restart payments"}), Reply.text("I will check."))
    run = kit.session(fake.base_url, mcp=servers)
    await run.step(ask("restart it"))
    await run.step()
    crashed = run.saves.last_checkpoint()
    assert crashed.in_flight is not None

    # When the next worker recovers from the intent
    run.cp = crashed
    recovered = await run.step()
    await run.run()

    # Then the model is told the outcome is unknown, and the call was not made again
    assert [type(e) for e in recovered.events] == [ToolUnknown]
    result = fake.requests[1].messages[-1]["content"][0]
    assert result["is_error"] is True
    assert "may or may not have run" in result["content"]
    assert "Echo:" not in result["content"]


async def test_a_server_killed_mid_call_is_a_tool_error_and_the_session_hears_it_go_and_return(
    fake: FakeAnthropicAPI, kit: Kit, servers: McpServers
) -> None:
    # Given a session whose model starts a long MCP call
    fake.push(
        Reply.tool(LONG, {"duration": 30, "steps": 3}),
        Reply.text("The server died; going on without it."),
        Reply.text("It is back."),
    )
    run = kit.session(fake.base_url, mcp=servers)
    await run.step(ask("run the long operation"))

    # When the server process is killed while the call runs
    tool_step = asyncio.create_task(run.step())
    await until(lambda: bool(run.saves.commits), "the call's intent is committed")
    [pid] = children_named("mcp-server-everything")
    os.kill(pid, signal.SIGKILL)
    finished = await asyncio.wait_for(tool_step, 30)

    # Then the model gets a tool error and the session goes on, told the server went away
    [result] = finished.checkpoint.pending_results
    assert result.is_error
    assert "unavailable" in result.content
    await run.run()
    assert run.answers == ["The server died; going on without it."]
    after = fake.requests[1]
    assert not [n for n in tool_names(after) if n.startswith("mcp__everything__")]
    assert any("MCP server everything went away" in t for t in last_user_texts(after))

    # And when it is back, the next model call offers its tools again and says so
    await until(lambda: servers.states()["everything"][0] is ServerState.UP, "reconnected")
    await run.run(ask("try again"))
    back = fake.requests[2]
    assert ECHO in tool_names(back)
    assert any("MCP server everything is available now" in t for t in last_user_texts(back))
    assert [e.topic for e in run.of_kind(Notice) if e.topic == "mcp"] == ["mcp", "mcp"]
    assert all(transcript_problems(r.messages) == [] for r in fake.requests)


def test_the_first_model_call_records_the_servers_without_a_notice() -> None:
    cp = new_checkpoint("s-first")
    tool = McpTool("mcp__k8s__pods", "k8s", "pods", "", {})
    recorded, events = note_server_changes(cp, [tool])
    assert (recorded.mcp_servers, recorded.notices, events) == (("k8s",), (), ())
    unchanged, events = note_server_changes(recorded, [tool])
    assert (unchanged.notices, events) == ((), ())


def test_the_servers_seen_survive_the_checkpoint_round_trip() -> None:
    for seen in (None, (), ("grafana", "k8s")):
        cp = replace(new_checkpoint("s-trip"), mcp_servers=seen)
        assert Checkpoint.from_json(cp.to_json()).mcp_servers == seen


def test_the_reminder_module_doctests_pass() -> None:
    result = doctest.testmod(mcp_reminder)
    assert result.attempted > 0
    assert result.failed == 0


async def test_an_mcp_tool_the_org_asks_approval_for_waits_then_runs_once_approved(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given a server whose echo tool the org marks "ask", and the approval policy on
    policy = {"warroom": {"tools": {"echo": "ask"}}}
    async with running(config_text(everything=everything(**policy))) as servers:
        fake.push(Reply.tool(ECHO, {"message": "resolve INC-42"}), Reply.text("Resolved."))
        run = kit.session(fake.base_url, mcp=servers)
        run.approvals = ApprovalGate()
        # When the model calls it
        await run.step(ask("resolve it"))
        await run.step()
        # Then it is not called: the session asks, bound to the call and its input
        approval = run.cp.approval
        assert approval is not None
        assert approval.pending
        assert approval.action == f'{ECHO} {{"message": "resolve INC-42"}}'
        assert "asks a human to approve" in approval.reason
        assert next_kind(run.cp) is StepKind.ASK
        # And once approved in the thread it is called, with the server's own result
        run.cp = approval_posted(run.cp, "1.0")
        yes = ApprovalDecision(True, approval.tool_use_id, approval.input_sha256, "U2", NOW)
        await run.step((Inbound("", yes.to_text(), kind=APPROVAL_KIND),))
        await run.run()
    result = fake.requests[1].messages[-1]["content"][0]
    assert (result["content"], result.get("is_error", False)) == ("Echo: resolve INC-42", False)
    assert run.answers == ["Resolved."]
