"""The harness's side of long work (issue #17): ScheduleWakeup records a wake-up that
``next_wake`` reports and a fired wake input spends; a background task's notification
marks the task ended in the checkpoint."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import (
    Inbound,
    Limits,
    ParentLink,
    StepKind,
    TaskRecord,
    agent_result_text,
    next_kind,
    next_wake,
)
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply, ToolCall
from tests.harness.step_support import Kit, open_kit


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[Kit]:
    async with open_kit(tmp_path) as shared:
        yield shared


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI() as server:
        yield server


def wakeup(delay_s: float, prompt: str = "check the error rate") -> Reply:
    return Reply.tool(
        "ScheduleWakeup", {"delaySeconds": delay_s, "reason": "error rate", "prompt": prompt}
    )


async def test_schedule_wakeup_parks_with_its_time_and_a_fired_wake_spends_it(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    fake.push(wakeup(300), Reply.text("Will check at the time."), Reply.text("All quiet."))
    run = kit.session(fake.base_url)
    before = time.time()
    await run.run((Inbound("U-ALICE", "watch checkout", "Alice"),))

    result = fake.requests[1].messages[-1]["content"][0]
    wake = next_wake(run.cp)
    assert wake is not None
    at, note = wake
    assert note == "check the error rate"
    assert before + 300 <= at.timestamp() <= time.time() + 300
    assert result["content"] == (
        f"Next wakeup scheduled for {at:%H:%M:%S} (in 300s). If you owe the user a status update "
        "this tick, write it now as ordinary response text; then end the turn \u2014 the harness "
        "re-invokes you when the wakeup fires or a task-notification arrives."
    )
    # When the sweeper fires it (an input of kind wake, at its time)
    run.cp = replace(run.cp, wakeup=replace(run.cp.wakeup, due_at=time.time() - 1))  # type: ignore[type-var]
    await run.run((Inbound("", note, kind="wake"),))
    # Then the model reads the prompt and nothing is armed again
    assert fake.requests[2].messages[-1]["content"][-1]["text"] == note
    assert run.cp.wakeup is None
    assert next_wake(run.cp) is None


async def test_a_delay_out_of_range_is_moved_into_it(fake: FakeAnthropicAPI, kit: Kit) -> None:
    fake.push(wakeup(5), Reply.text("ok"), wakeup(7200), Reply.text("ok"))
    run = kit.session(fake.base_url, limits=Limits(min_wakeup_s=60))
    await run.run((Inbound("U-ALICE", "watch", "Alice"),))
    short = run.cp.wakeup
    await run.run((Inbound("U-ALICE", "later", "Alice"),))
    long = run.cp.wakeup

    assert short is not None
    assert long is not None
    assert 55 <= short.due_at - time.time() <= 60
    assert 3590 <= long.due_at - time.time() <= 3600
    said = fake.requests[1].messages[-1]["content"][0]["content"]
    assert "(in 60s) (clamped to 60s from your requested value). If you owe" in said


async def test_a_negative_delay_is_moved_into_range_as_the_schema_says(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # The schema tells the model "other values are moved into range": a negative delay too
    fake.push(wakeup(-30), Reply.text("ok"))
    run = kit.session(fake.base_url, limits=Limits(min_wakeup_s=60))
    await run.run((Inbound("U-ALICE", "watch", "Alice"),))

    result = fake.requests[1].messages[-1]["content"][0]
    assert not result.get("is_error"), result["content"]
    assert run.cp.wakeup is not None
    assert 55 <= run.cp.wakeup.due_at - time.time() <= 60
    assert "(clamped to 60s from your requested value)" in result["content"]


async def test_a_subagent_is_offered_no_wake_up_it_could_never_get(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # A subagent ends once it answers: a wake-up it scheduled would never fire
    fake.push(Reply.text("pods: healthy"))
    run = kit.session(fake.base_url)
    run.cp = replace(run.cp, parent=ParentLink("s-parent", "toolu_1"))
    await run.run((Inbound("U-ALICE", "check the pods", "Alice"),))

    offered = [t["name"] for t in fake.requests[0].body["tools"]]
    assert "Bash" in offered
    assert "ScheduleWakeup" not in offered
    assert "Agent" not in offered


async def test_a_wake_up_missed_while_stopped_is_dropped_when_a_reply_comes(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    fake.push(wakeup(300), Reply.text("Will check."), Reply.text("Here."))
    run = kit.session(fake.base_url)
    await run.run((Inbound("U-ALICE", "watch", "Alice"),))
    assert run.cp.wakeup is not None
    # Given its time passed long ago without it firing (the session was stopped)
    run.cp = replace(run.cp, wakeup=replace(run.cp.wakeup, due_at=time.time() - 3600))
    # When a teammate replies
    await run.run((Inbound("U-BOB", "anything new?", "Bob"),))
    # Then the wake-up is not armed again
    assert run.cp.wakeup is None


async def test_a_notification_marks_its_task_ended_in_the_checkpoint(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    fake.push(Reply.text("Started."), Reply.text("It finished."))
    run = kit.session(fake.base_url)
    await run.run((Inbound("U-ALICE", "go", "Alice"),))
    run.cp = run.cp.with_task(TaskRecord("b1", "toolu_1", "bash", "sleep", time.time()))
    text = (
        "<task-notification>\n<task-id>b1</task-id>\n<tool-use-id>toolu_1</tool-use-id>\n"
        "<output-file>/workspace/.warroom/tasks/b1.output</output-file>\n<status>failed</status>\n"
        '<summary>Background command "sleep" failed with exit code 2</summary>\n'
        "</task-notification>"
    )
    await run.run((Inbound("", text, kind="notification"),))

    assert [t.status for t in run.cp.tasks] == ["failed"]
    assert run.cp.running_tasks() == ()
    assert fake.requests[1].messages[-1]["content"][-1]["text"] == text
    assert datetime.now(UTC).timestamp() >= run.cp.tasks[0].started_at


class Spawner:
    """Records the subagents a step starts (the durable layer's part, in memory)."""

    def __init__(self) -> None:
        self.spawned: list[tuple[str, str, bool]] = []

    async def spawn(
        self, *, tool_use_id: str, description: str, prompt: str, background: bool
    ) -> str:
        self.spawned.append((tool_use_id, prompt, background))
        return f"child-{tool_use_id}"


async def test_agent_calls_park_the_session_until_each_answer_arrives_as_its_result(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    calls = tuple(
        ToolCall("Agent", {"description": f"Check {n}", "prompt": f"check {n}"}, id=f"toolu_{n}")
        for n in ("a", "b")
    )
    fake.push(Reply(calls), Reply.text("Both checked."))
    run = kit.session(fake.base_url)
    spawner = Spawner()
    run.spawner = spawner
    await run.run((Inbound("U-ALICE", "check a and b", "Alice"),))

    # Both subagents started, and the session waits without a result for either
    assert [s[0] for s in spawner.spawned] == ["toolu_a", "toolu_b"]
    assert run.cp.awaited_calls() == {"toolu_a", "toolu_b"}
    assert next_kind(run.cp) is StepKind.WAIT
    # When the answers arrive out of order (and one twice), with a teammate's message
    await run.run((Inbound("", agent_result_text("toolu_b", "b is fine"), kind="agent"),))
    assert len(fake.requests) == 1, "the model was asked with an answer missing"
    await run.run(
        (
            Inbound("", agent_result_text("toolu_a", "a is fine"), kind="agent"),
            Inbound("", agent_result_text("toolu_b", "b again"), kind="agent"),
            Inbound("U-BOB", "also check c", "Bob"),
        )
    )
    # Then the model gets each answer once, in call order, then the message
    content = fake.requests[1].messages[-1]["content"]
    assert [(b["type"], b.get("tool_use_id")) for b in content[:2]] == [
        ("tool_result", "toolu_a"),
        ("tool_result", "toolu_b"),
    ]
    assert [b["content"] for b in content[:2]] == ["a is fine", "b is fine"]
    assert "also check c" in content[-1]["text"]
    assert [a.status for a in run.cp.agents] == ["completed", "completed"]


@pytest.mark.parametrize("kind", ["Explore", "Plan"])
async def test_an_explore_or_plan_subagent_is_told_to_only_read_and_report(
    fake: FakeAnthropicAPI, kit: Kit, kind: str
) -> None:
    call = ToolCall(
        "Agent",
        {"description": "Find the pool", "prompt": "find the pool size", "subagent_type": kind},
        id="toolu_x",
    )
    fake.push(Reply((call,)))
    run = kit.session(fake.base_url)
    spawner = Spawner()
    run.spawner = spawner
    await run.run((Inbound("U-ALICE", "where is the pool set?", "Alice"),))
    [(_, prompt, _)] = spawner.spawned
    assert prompt.startswith(f"<system-reminder>You are a {kind} subagent")
    assert "Change nothing" in prompt
    assert prompt.endswith("find the pool size")


async def test_an_unknown_subagent_type_is_refused_naming_the_known_ones(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    call = ToolCall(
        "Agent",
        {"description": "x", "prompt": "y", "subagent_type": "statusline-setup"},
        id="toolu_y",
    )
    fake.push(Reply((call,)), Reply.text("ok"))
    run = kit.session(fake.base_url)
    run.spawner = Spawner()
    await run.run((Inbound("U-ALICE", "go", "Alice"),))
    [result] = fake.requests[1].messages[-1]["content"]
    assert result["is_error"] is True
    assert "Available agents: general-purpose, Explore, Plan" in str(result["content"])


async def test_schedule_wakeup_with_stop_cancels_the_pending_wake_up(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given a session that scheduled a wake-up
    fake.push(wakeup(300), Reply.text("Will check."))
    run = kit.session(fake.base_url)
    await run.run((Inbound("U-ALICE", "watch checkout", "Alice"),))
    assert next_wake(run.cp) is not None
    # When the model calls ScheduleWakeup with Claude Code's stop
    fake.push(Reply.tool("ScheduleWakeup", {"stop": True}), Reply.text("Stopped watching."))
    await run.run((Inbound("U-ALICE", "no need to watch any more", "Alice"),))
    # Then nothing is armed
    assert next_wake(run.cp) is None
    result = fake.requests[-1].messages[-1]["content"][0]
    assert result["content"].startswith("Loop stopped \u2014 cancelled 1 pending wakeup(s);")
    # And a second stop finds nothing pending, and says so as Claude Code does
    fake.push(Reply.tool("ScheduleWakeup", {"stop": True}), Reply.text("Nothing to stop."))
    await run.run((Inbound("U-ALICE", "stop again", "Alice"),))
    again = fake.requests[-1].messages[-1]["content"][0]
    assert again["content"].startswith(
        "Loop stopped \u2014 any dynamic loop in this session is ended; there was no pending"
    )


async def test_schedule_wakeup_errors_are_claude_codes(fake: FakeAnthropicAPI, kit: Kit) -> None:
    fake.push(
        Reply.tool("ScheduleWakeup", {"noop": True}),
        Reply.tool("ScheduleWakeup", {"delaySeconds": 120, "reason": "no prompt"}),
        Reply.text("ok"),
    )
    run = kit.session(fake.base_url)
    await run.run((Inbound("U-ALICE", "watch", "Alice"),))
    [first] = fake.requests[1].messages[-1]["content"]
    [second] = fake.requests[2].messages[-1]["content"]
    assert first["is_error"] is True
    assert first["content"] == "`delaySeconds` and `reason` are required when `stop` is not true."
    assert second["content"] == "`prompt` is required when `stop` is not true."
    assert next_wake(run.cp) is None


async def test_a_task_call_runs_agent_through_the_loop(fake: FakeAnthropicAPI, kit: Kit) -> None:
    # Given a model that calls Claude Code's alias of Agent
    call = ToolCall("Task", {"description": "Check a", "prompt": "check a"}, id="toolu_task")
    fake.push(Reply((call,)), Reply.text("Checked."))
    run = kit.session(fake.base_url)
    spawner = Spawner()
    run.spawner = spawner
    await run.run((Inbound("U-ALICE", "check a", "Alice"),))
    # Then a subagent started and the session waits for its answer, which is the result
    assert [s[0] for s in spawner.spawned] == ["toolu_task"]
    assert run.cp.awaited_calls() == {"toolu_task"}
    await run.run((Inbound("", agent_result_text("toolu_task", "a is fine"), kind="agent"),))
    assert fake.requests[1].messages[-1]["content"][0]["content"] == "a is fine"


async def test_task_tools_through_the_loop_keep_the_sessions_todo_list(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given a model that plans with Claude Code's task tools
    fake.push(
        Reply.tool("TaskCreate", {"subject": "Check pods", "description": "prod"}),
        Reply.tool("TaskUpdate", {"taskId": "1", "status": "in_progress"}),
        Reply.text("On it."),
    )
    run = kit.session(fake.base_url)
    await run.run((Inbound("U-ALICE", "payments is down", "Alice"),))
    # Then the checkpoint's todo list (the thread's plan) holds the task, in progress
    assert [(t.content, t.status.value) for t in run.cp.todos] == [("Check pods", "in_progress")]
