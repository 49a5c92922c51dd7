"""One step of the agent loop (``advance``), driven step by step over real parts.

Each test steps a session the way the durable layer does (``SessionRun``), with a
real ``FileStore`` (SQLite), the real ``AnthropicModel`` talking to the fake Messages
API, and, where sandbox tools run, real local sandboxes (bubblewrap). A second
session's changes are direct ``FileStore`` writes under another ``Origin``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness import (
    Answered,
    Checkpoint,
    Inbound,
    LimitReached,
    Limits,
    ModelResponded,
    ModelUnavailable,
    Notice,
    SandboxWorkspaces,
    StepLimitReached,
    TokenLimitReached,
    ToolFinished,
    ToolIntent,
    ToolTimeLimitReached,
    ToolUnknown,
)
from memory_store import FileStore, Namespace, Origin, Scope
from sandbox_client import Health, LocalConfig, LocalProvider, SandboxHandle, SandboxManager
from tests.conftest import require_bwrap
from tests.fakes.anthropic_api import FakeAnthropicAPI, Fault, RecordedRequest, Reply, ToolCall
from tests.harness.step_support import (
    CHANNEL,
    ORG,
    Kit,
    new_checkpoint,
    open_kit,
    prefix_stable,
    static_prefix,
    texts_of,
    transcript_problems,
)

MEMORY = Namespace(ORG, Scope.MEMORY)
INCIDENT = Namespace(ORG, Scope.INCIDENT, CHANNEL)
OTHER = Origin("U-BOB", "s-other", None)
RUNBOOK = "# Payments runbook\nrestart: kubectl rollout restart deploy/payments\npool: 20\n"
SUMMARY_MARK = "will be compacted"


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def provider() -> Iterator[LocalProvider]:
    """One local provider for the module; its jails are destroyed at the end."""
    state = Path(tempfile.mkdtemp(prefix="wr-step-"))  # Unix socket paths must stay short
    local = LocalProvider(LocalConfig(state_dir=state, network="none"))
    yield local
    asyncio.run(local.destroy_all())
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
async def workspaces(provider: LocalProvider) -> AsyncIterator[SandboxWorkspaces]:
    """Sandbox access; no jail starts until a sandbox tool runs."""
    manager = SandboxManager(provider)
    try:
        yield SandboxWorkspaces(manager)
    finally:
        await manager.aclose()


@pytest.fixture
async def kit(tmp_path: Path, workspaces: SandboxWorkspaces) -> AsyncIterator[Kit]:
    async with open_kit(tmp_path, workspaces) as shared:
        yield shared


@pytest.fixture
def sandbox() -> None:
    """Marks a test whose session runs sandbox tools (needs bubblewrap)."""
    require_bwrap()


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI() as server:
        yield server


def ask(text: str, user: str = "U-ALICE", name: str = "Alice") -> tuple[Inbound, ...]:
    return (Inbound(user, text, name),)


def read(path: str) -> Reply:
    return Reply.tool("Read", {"file_path": path})


def bash(command: str) -> Reply:
    return Reply.tool("Bash", {"command": command, "description": "test command"})


def assert_every_request_valid(fake: FakeAnthropicAPI) -> None:
    for number, request in enumerate(fake.requests, 1):
        assert transcript_problems(request.messages) == [], f"request {number}"


def last_user_texts(request: RecordedRequest) -> list[str]:
    return texts_of(request.messages[-1])


async def destroy_from_outside(provider: LocalProvider, handle_json: str) -> None:
    """Destroy a session's sandbox, and wait until the provider sees it gone (the jail's
    init dies asynchronously after its SIGKILL)."""
    handle = SandboxHandle.from_json(handle_json)
    await provider.destroy(handle)
    deadline_s = time.monotonic() + 10.0
    while not await _looks_gone(provider, handle):
        assert time.monotonic() < deadline_s, "the destroyed sandbox still looks alive"
        await asyncio.sleep(0.01)


async def _looks_gone(provider: LocalProvider, handle: SandboxHandle) -> bool:
    try:
        return await provider.health(handle) is Health.GONE
    except FileNotFoundError:  # its cgroup is removed while its init is still dying
        return False


async def seed_runbook(store: FileStore) -> None:
    await store.write(MEMORY, "/payments.md", RUNBOOK, OTHER, expected_version=0)
    await store.write(MEMORY, "/unread.md", "# Not read yet\n", OTHER, expected_version=0)
    await store.write(
        INCIDENT, "/timeline.md", "# Timeline\n14:02 500s\n", OTHER, expected_version=0
    )


# ------------------------------------------------------------ the cache prefix


async def test_each_request_repeats_the_previous_one_while_another_session_changes_memory(
    fake: FakeAnthropicAPI, kit: Kit, sandbox: None
) -> None:
    # Given: an org with a runbook the session will read, and a 20-request script
    await seed_runbook(kit.store)
    todos = [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking pods"}]
    script = [
        read("/memory/payments.md"),
        read("/incident/timeline.md"),
        Reply.tool("Grep", {"pattern": "pool", "path": "/memory", "output_mode": "content"}),
        bash("echo 'pod-1 CrashLoopBackOff' > pods.txt; cat pods.txt"),
        Reply.tool("TodoWrite", {"todos": todos}),
        Reply.tool(
            "Edit",
            {
                "file_path": "/incident/timeline.md",
                "old_string": "14:02 500s",
                "new_string": "14:02 500s\n14:05 pods crashlooping",
            },
        ),
        Reply.tool("Glob", {"pattern": "**/*.md", "path": "/memory"}),
        read("/workspace/pods.txt"),
        Reply.tool("Write", {"file_path": "/incident/findings.md", "content": "# Findings\n"}),
        bash("wc -l pods.txt"),
        Reply.tool("Grep", {"pattern": "CrashLoop", "path": "/workspace"}),
        read("/memory/payments.md"),
        Reply.tool(
            "Edit",
            {
                "file_path": "/incident/findings.md",
                "old_string": "# Findings\n",
                "new_string": "# Findings\n- pool exhausted\n",
            },
        ),
        read("/incident/findings.md"),
        bash("echo done"),
        Reply.tool("Glob", {"pattern": "*.md", "path": "/incident"}),
        read("/memory/payments.md"),
        Reply.tool("TodoWrite", {"todos": [{**todos[0], "status": "completed"}]}),
        bash("cat pods.txt"),
        Reply.text("The payments pods crashloop: the DB pool is exhausted."),
    ]
    fake.push(*script)
    run = kit.session(fake.base_url)

    async def other_session(step: int) -> None:
        if step == 4:  # after the session read the runbook
            await kit.store.edit(MEMORY, "/payments.md", "pool: 20", "pool: 50", OTHER)
            await kit.store.edit(MEMORY, "/unread.md", "Not read", "Never read", OTHER)
        if step == 12:
            await kit.store.write(
                INCIDENT, "/db-notes.md", "DB pool graphs\n", OTHER, expected_version=0
            )

    # When: the session runs to its answer while the other session writes
    await run.run(ask("payments is returning 500s"), between=other_session)

    # Then: every request starts with the exact bytes of the one before. Messages are
    # compared without cache_control: the rolling breakpoint sits on the last message,
    # so it moves on every request (expected); tools and system keep theirs, byte-equal.
    requests = fake.requests
    assert len(requests) == 20
    assert run.answers == ["The payments pods crashloop: the DB pool is exhausted."]
    for n in range(len(requests) - 1):
        assert prefix_stable(requests[n], requests[n + 1]), (
            f"request {n + 2} rewrote request {n + 1}"
        )
    assert len({static_prefix(r) for r in requests}) == 1
    assert b'"cache_control":{"type":"ephemeral"}' in static_prefix(requests[0])
    assert_every_request_valid(fake)
    # And: each notice is told once, appended where it happened
    final = [t for m in requests[-1].messages for t in texts_of(m)]
    changed = [t for t in final if "/memory/payments.md was changed by" in t]
    added = [t for t in final if "New shared files were added" in t]
    assert len(changed) == 1
    assert changed[0].endswith("\n3\tpool: 50\n</system-reminder>")
    assert changed[0].startswith("<system-reminder>")
    assert len(added) == 1
    assert "/incident/db-notes.md: DB pool graphs" in added[0]
    assert "findings.md" not in added[0]  # the session's own file is not news to it
    assert not [t for t in final if "/memory/unread.md" in t and "modified" in t]
    told_at = next(
        i for i, r in enumerate(requests) if any(changed[0] in t for t in last_user_texts(r))
    )
    assert all(
        changed[0] not in t for r in requests[:told_at] for m in r.messages for t in texts_of(m)
    )


# ------------------------------------------------------------------ steering


async def test_steering_given_while_a_tool_call_is_pending_follows_the_tool_results(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: the model asked for a tool call that has not run yet
    await seed_runbook(kit.store)
    fake.push(read("/memory/payments.md"), Reply.text("Checking the DB pool."))
    run = kit.session(fake.base_url)
    await run.step(ask("payments is down"))

    # When: a teammate replies while the call is pending, then the session goes on
    await run.step(ask("ignore the cache, check the DB pool", "U-BOB", "Bob"))
    await run.run()

    # Then: the next user message has the tool result first, then the teammate's text
    blocks = fake.requests[1].messages[-1]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text"]
    assert blocks[1]["text"] == (
        "Message from Bob in the incident thread:\nignore the cache, check the DB pool"
    )
    assert_every_request_valid(fake)


async def test_a_system_input_reaches_the_model_as_its_bare_text_not_as_a_teammates_message(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: a session whose turn ended
    fake.push(Reply.text("Rollout started; I will check back."), Reply.text("It finished."))
    run = kit.session(fake.base_url)
    await run.step(ask("watch the rollout"))
    await run.run()

    # When: the system wakes it (a timed wake-up's note)
    note = "<task-notification>rollout done</task-notification>"
    await run.step((Inbound("", note, kind="wake"),))
    await run.run()

    # Then: the model reads the note itself, with no "Message from" label
    assert [b["text"] for b in fake.requests[1].messages[-1]["content"]] == [note]
    assert_every_request_valid(fake)


async def test_steering_during_a_tool_step_that_crashed_reaches_the_model_once(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: an Edit step that received a teammate's reply, and whose worker died after
    # committing the intent (the durable layer keeps the reply in the inbox until commit)
    await seed_runbook(kit.store)
    edit = Reply.tool(
        "Edit",
        {"file_path": "/memory/payments.md", "old_string": "Payments", "new_string": "Pay"},
    )
    fake.push(read("/memory/payments.md"), edit, Reply.text("ok"))
    run = kit.session(fake.base_url)
    await run.step(ask("payments is down"))
    await run.step()  # Read
    await run.step()  # the model asks for the Edit
    steer = ask("check the DB pool", "U-BOB", "Bob")
    await run.step(steer)
    intent = run.saves.last_checkpoint()
    assert intent.in_flight is not None

    # When: the next worker recovers from the intent and gets the same inbox again
    run.cp = intent
    await run.step(steer)
    await run.run()

    # Then: the model hears the reply once
    texts = last_user_texts(fake.requests[2])
    assert sum("check the DB pool" in t for t in texts) == 1
    assert intent.pending_input == ()


# ------------------------------------------------------------- loops and limits


async def test_the_same_call_repeated_earns_a_note_on_the_nth_time(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    await seed_runbook(kit.store)
    fake.push(*[read("/memory/payments.md")] * 3, Reply.text("Stuck reading."))
    run = kit.session(fake.base_url, limits=Limits(loop_repeats=3))

    await run.run(ask("payments is down"))

    results = [fake.requests[i].messages[-1]["content"][0]["content"] for i in (1, 2, 3)]
    assert ["same input" in r for r in results] == [False, False, True]
    assert "exact Read call 3 times in a row" in results[2]
    assert results[2].startswith("1\t# Payments runbook")


def always_two_calls(request: RecordedRequest) -> Reply:
    """A model that never stops calling tools, two at a time."""
    n = len(request.messages)
    return Reply(
        (
            ToolCall("Read", {"file_path": "/memory/payments.md"}, f"toolu_a{n}"),
            ToolCall("Grep", {"pattern": "pool", "path": "/memory"}, f"toolu_b{n}"),
        )
    )


async def test_the_step_cap_ends_with_a_best_effort_answer_and_answers_every_tool_call(
    kit: Kit,
) -> None:
    # Given: a model that never ends its turn and a cap of 5 steps
    await seed_runbook(kit.store)
    async with FakeAnthropicAPI(always_two_calls) as fake:
        run = kit.session(fake.base_url, limits=Limits(max_steps=5))

        # When: the session runs
        await run.run(ask("payments is down"))

    # Then: it answers (best effort), never raising, and every request is valid
    assert len(run.answers) == 1
    answer = run.of_kind(Answered)[0]
    assert answer.best_effort
    assert "step limit" in answer.text
    assert_every_request_valid(fake)
    last = fake.requests[-1]
    assert last_user_texts(last)[-1].startswith(
        "<system-reminder>\nThe session reached its step limit: 5 steps used, 5 allowed. "
        "Do not call any more tools."
    )
    results = [b["content"] for b in last.messages[-1]["content"] if b["type"] == "tool_result"]
    assert len(results) == 2
    assert results[0].startswith("1\t# Payments runbook")  # ran before the cap
    assert results[1] == "Not run: The session reached its step limit: 5 steps used, 5 allowed."
    assert transcript_problems([m.to_dict() for m in run.cp.messages]) == []
    [notice] = [n for n in run.of_kind(Notice) if n.topic == "limit"]
    assert "5 steps" in notice.text


async def test_a_reply_after_a_capped_answer_sends_a_valid_transcript(kit: Kit) -> None:
    await seed_runbook(kit.store)
    async with FakeAnthropicAPI(always_two_calls) as fake:
        run = kit.session(fake.base_url, limits=Limits(max_steps=3))
        await run.run(ask("payments is down"))

        await run.run(ask("and the cache?", "U-BOB", "Bob"))

    assert len(run.answers) == 2
    assert_every_request_valid(fake)


async def test_the_token_limit_ends_with_a_best_effort_answer(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    await seed_runbook(kit.store)
    fake.push(read("/memory/payments.md"), Reply.text("Partial: the runbook says pool 20."))
    run = kit.session(fake.base_url, limits=Limits(max_session_tokens=100))

    await run.run(ask("payments is down"))

    [answer] = run.of_kind(Answered)
    assert answer.best_effort
    assert answer.text.startswith("Partial: the runbook says pool 20.")
    assert next(n.text for n in run.of_kind(Notice) if n.topic == "limit").startswith(
        "The session reached its token limit"
    )
    assert fake.requests[1].messages[-1]["content"][0]["content"].startswith("Not run:")


async def test_the_tool_time_limit_ends_with_a_best_effort_answer(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    await seed_runbook(kit.store)
    fake.push(*[read("/memory/payments.md")] * 2, Reply.text("Stopping here."))
    run = kit.session(fake.base_url, limits=Limits(max_tool_time_s=1e-9))

    await run.run(ask("payments is down"))

    [answer] = run.of_kind(Answered)
    assert answer.best_effort
    assert len(run.of_kind(ToolFinished)) == 1  # the second call was not run
    assert run.cp.tool_time_s > 0
    assert_every_request_valid(fake)


async def test_a_command_may_not_run_past_the_tool_time_budget(
    fake: FakeAnthropicAPI, kit: Kit, sandbox: None
) -> None:
    fake.push(bash("sleep 30"), Reply.text("The command hung."))
    run = kit.session(fake.base_url, limits=Limits(max_tool_time_s=0.2))

    await run.run(ask("run the slow check"))

    [finished] = run.of_kind(ToolFinished)
    assert finished.output_head == "Exit code 143\nCommand timed out after 0.2s"
    [answer] = run.of_kind(Answered)
    assert answer.best_effort
    assert answer.text.startswith("The command hung.")


def test_limits_are_typed_errors_with_the_figures() -> None:
    limits = Limits(max_steps=3, max_session_tokens=10, max_tool_time_s=2.0)
    base = new_session_checkpoint()

    with pytest.raises(StepLimitReached) as steps:
        limits.enforce(replace(base, steps=3))
    with pytest.raises(TokenLimitReached) as tokens:
        limits.enforce(replace(base, usage=replace(base.usage, output_tokens=11)))
    with pytest.raises(ToolTimeLimitReached) as tool_time:
        limits.enforce(replace(base, tool_time_s=2.5))
    limits.enforce(replace(base, steps=2, tool_time_s=1.0))

    assert (steps.value.used, steps.value.limit) == (3, 3)
    assert (tokens.value.used, tokens.value.limit) == (11, 10)
    assert (tool_time.value.used, tool_time.value.limit) == (2.5, 2.0)
    assert isinstance(steps.value, LimitReached)


def new_session_checkpoint() -> Checkpoint:
    return new_checkpoint("s-limits")


# ------------------------------------------------------------------ compaction


def compacting_script(actions: list[Reply]) -> Any:
    """Answers compaction requests with a summary; otherwise plays ``actions`` in order."""

    def reply(request: RecordedRequest) -> Reply:
        if any(SUMMARY_MARK in t for t in last_user_texts(request)):
            return Reply.text("Summary: read the runbook; pool is 20.")
        return actions.pop(0)

    return reply


async def test_compaction_replaces_the_transcript_and_makes_write_read_again(
    kit: Kit,
) -> None:
    # Given: a session that read the runbook, then a log big enough to pass the
    # compaction threshold (the fake counts 4 bytes a token)
    await seed_runbook(kit.store)
    log = "".join(
        f"{i:05d} payments ERROR pool exhausted, waiting for a connection\n" for i in range(600)
    )
    await kit.store.write(MEMORY, "/big-log.md", log, OTHER, expected_version=0)
    new_runbook = RUNBOOK.replace("pool: 20", "pool: 40")
    write = Reply.tool("Write", {"file_path": "/memory/payments.md", "content": new_runbook})
    actions = [
        read("/memory/payments.md"),
        read("/memory/big-log.md"),
        Reply.tool("Grep", {"pattern": "restart", "path": "/memory"}),
        write,
        read("/memory/payments.md"),
        write,
        Reply.text("Raised the pool in the runbook."),
    ]
    async with FakeAnthropicAPI(compacting_script(actions)) as fake:
        run = kit.session(fake.base_url, limits=Limits(compact_at_tokens=8000))

        # When: it runs to its answer
        await run.run(ask("payments is down"))

    # Then: it compacted once: the frozen context + summary, an ack, then the next turn
    assert run.cp.compactions == 1
    [summary_request] = [r for r in fake.requests if SUMMARY_MARK in last_user_texts(r)[-1]]
    assert [b["type"] for b in summary_request.messages[-1]["content"]] == ["tool_result", "text"]
    after = fake.requests[fake.requests.index(summary_request) + 1]
    first = texts_of(after.messages[0])
    assert first[0].startswith("<system-reminder>\nSkills available")
    assert "Summary: read the runbook; pool is 20." in first[1]
    assert texts_of(after.messages[1]) == ["Understood. Continuing."]
    assert len(after.messages) == 3
    assert [e.topic for e in run.of_kind(Notice)] == ["compaction"]
    # And: the first Write after compaction was refused until the file was read again
    writes = [e for e in run.of_kind(ToolFinished) if e.name == "Write"]
    assert [w.is_error for w in writes] == [True, False]
    assert "has not been read since the conversation was compacted" in writes[0].output_head
    assert (await kit.store.read(MEMORY, "/payments.md")).content == new_runbook
    assert_every_request_valid(fake)


# ------------------------------------------------------------------ crash recovery


async def test_a_crashed_bash_call_is_recovered_from_the_sandbox_not_run_twice(
    fake: FakeAnthropicAPI, kit: Kit, sandbox: None, provider: LocalProvider
) -> None:
    # Given: a worker that ran a Bash call and died before committing its result
    fake.push(
        bash("echo ran >> runs.txt; wc -l < runs.txt"), bash("cat runs.txt"), Reply.text("ok")
    )
    run = kit.session(fake.base_url)
    await run.step(ask("count the runs"))
    await run.step()
    crashed = run.saves.last_checkpoint()
    assert crashed.in_flight is not None

    # When: the next worker (its own sandbox manager) takes over from the committed intent
    next_worker = SandboxManager(provider)
    run.cp, run.workspaces = crashed, SandboxWorkspaces(next_worker)
    try:
        recovered = await run.step()
        await run.run()
    finally:
        await next_worker.aclose()

    # Then: the sandbox's own record is the result; the command ran once
    [finished] = [e for e in recovered.events if isinstance(e, ToolFinished)]
    assert finished.output_head == "1"
    assert recovered.checkpoint.in_flight is None
    assert fake.requests[2].messages[-1]["content"][0]["content"] == "ran"


async def test_a_crashed_bash_call_in_a_sandbox_that_is_gone_is_reported_unknown(
    fake: FakeAnthropicAPI, kit: Kit, sandbox: None, provider: LocalProvider
) -> None:
    # Given: a crash after a Bash call's intent, and the sandbox destroyed since
    fake.push(bash("echo ran >> runs.txt"), Reply.text("I will check before re-running."))
    run = kit.session(fake.base_url)
    await run.step(ask("append a run"))
    await run.step()
    crashed = run.saves.last_checkpoint()
    assert crashed.sandbox is not None
    await destroy_from_outside(provider, crashed.sandbox)

    # When: the next worker recovers
    run.cp = crashed
    recovered = await run.step()
    await run.run()

    # Then: the model is told the command may or may not have run, and what was lost
    assert [type(e) for e in recovered.events if not isinstance(e, Notice)] == [ToolUnknown]
    result = fake.requests[1].messages[-1]["content"][0]
    assert result["is_error"] is True
    assert "may or may not have run" in result["content"]
    reminders = [t for t in last_user_texts(fake.requests[1]) if "sandbox was replaced" in t]
    assert len(reminders) == 1
    assert recovered.checkpoint.sandbox != crashed.sandbox


async def test_a_read_saves_no_intent_mid_step_and_commits_it_with_its_result(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    await seed_runbook(kit.store)
    fake.push(read("/memory/payments.md"), Reply.text("ok"))
    run = kit.session(fake.base_url)
    await run.step(ask("read the runbook"))
    result = await run.step()
    assert run.saves.commits == []
    assert [type(e) for e in result.events] == [ToolIntent, ToolFinished]
    assert result.checkpoint.in_flight is None


async def test_a_crashed_write_is_redone_without_a_second_revision(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: a Write that reached the store, whose worker died before committing the
    # step (a Write is simply run again after a crash: no intent is committed first)
    await seed_runbook(kit.store)
    new_runbook = RUNBOOK + "owner: team-payments\n"
    write = Reply.tool("Write", {"file_path": "/memory/payments.md", "content": new_runbook})
    fake.push(read("/memory/payments.md"), write, Reply.text("Recorded the owner."))
    run = kit.session(fake.base_url)
    await run.step(ask("record the owner"))
    await run.step()
    await run.step()
    before_write = run.cp
    await run.step()
    assert run.saves.commits == []  # nothing was saved mid-step

    # When: the next worker takes the step again from the last commit
    run.cp = before_write
    recovered = await run.step()
    await run.run()

    # Then: the redo succeeds and the store holds one new revision
    [finished] = [e for e in recovered.events if isinstance(e, ToolFinished)]
    assert not finished.is_error
    versions = [r.version for r in await kit.store.history(MEMORY, "/payments.md")]
    assert versions == [1, 2]
    assert run.cp.read_state["/memory/payments.md"].version == 2


# ------------------------------------------------------------ sandbox replaced


async def test_a_replaced_sandbox_serves_the_next_call_and_the_model_is_told(
    fake: FakeAnthropicAPI, kit: Kit, sandbox: None, provider: LocalProvider
) -> None:
    # Given: a session that made a file in its sandbox
    fake.push(
        bash("echo data > scratch.txt"),
        bash("ls; echo alive"),
        Reply.text("The workspace was reset."),
    )
    run = kit.session(fake.base_url)
    await run.step(ask("prepare"))
    await run.step()
    first_sandbox = run.cp.sandbox
    assert first_sandbox is not None
    await run.step()  # the model asks for the next command

    # When: the sandbox is destroyed from outside, and the session goes on
    await destroy_from_outside(provider, first_sandbox)
    await run.run()

    # Then: the call ran in a new sandbox, and the next model step says what was lost
    assert run.cp.sandbox not in (None, first_sandbox)
    result = fake.requests[2].messages[-1]["content"][0]
    assert result["content"] == "alive"
    texts = last_user_texts(fake.requests[2])
    [told] = [t for t in texts if "sandbox was replaced" in t]
    assert told.startswith("<system-reminder>")
    assert any(n.topic == "sandbox_replaced" for n in run.of_kind(Notice))


# ------------------------------------------------------------------ model errors


@pytest.mark.parametrize(
    "faults",
    [
        pytest.param([Fault.status(429, retry_after_s=0)] * 3, id="429-storm"),
        pytest.param([Fault.status(529)], id="529"),
        pytest.param([Fault.stall(after_events=2)], id="stall"),
    ],
)
async def test_a_model_step_survives_transient_model_errors_and_records_usage_once(
    fake: FakeAnthropicAPI,
    kit: Kit,
    faults: list[Fault],
) -> None:
    fake.push(*faults, Reply.text("All good."))
    run = kit.session(fake.base_url, stall_timeout_s=0.5)

    result = await run.step(ask("status?"))

    [responded] = [e for e in result.events if isinstance(e, ModelResponded)]
    assert responded.attempts == len(faults) + 1
    assert len(fake.requests) == len(faults) + 1
    assert run.answers == ["All good."]
    assert result.checkpoint.usage == responded.usage
    assert responded.usage.output_tokens > 0
    assert result.checkpoint.last_input_tokens == responded.usage.prompt_tokens()


async def test_model_unavailable_after_retries_leaves_the_checkpoint_as_it_was(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: a session one tool call into its turn, and an API that keeps failing
    await seed_runbook(kit.store)
    fake.push(read("/memory/payments.md"))
    run = kit.session(fake.base_url)
    await run.step(ask("payments is down"))
    await run.step()
    before = run.cp
    saved = len(run.saves.commits)
    fake.push(*[Fault.status(529)] * 4)

    # When: the model step runs out of attempts
    with pytest.raises(ModelUnavailable) as raised:
        await run.step(ask("any news?", "U-BOB", "Bob"))

    # Then: the typed error carries the figures and nothing was saved or changed
    assert (raised.value.status, raised.value.attempts) == (529, 4)
    assert run.cp == before
    assert len(run.saves.commits) == saved
    # And: the same step succeeds later from the same checkpoint
    fake.push(Reply.text("Pool is 20."))
    await run.step(ask("any news?", "U-BOB", "Bob"))
    assert run.answers == ["Pool is 20."]
    assert_every_request_valid(fake)


# ------------------------------------------------------------ two sessions, one file


async def test_two_sessions_on_one_memory_file_edit_disjointly_and_are_told(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: two sessions that both read the runbook
    await seed_runbook(kit.store)
    alice = kit.session(fake.base_url, session_id="s-alice")
    bob = kit.session(fake.base_url, session_id="s-bob")
    for run, who in ((alice, "Alice"), (bob, "Bob")):
        fake.push(read("/memory/payments.md"))
        await run.step(ask("payments is down", f"U-{who.upper()}", who))
        await run.step()

    # When: each edits a different line, then Alice writes the whole file
    fake.push(edit("pool: 20", "pool: 40"))
    await alice.step()
    await alice.step()
    fake.push(edit("# Payments runbook", "# Payments runbook (owner: team-pay)"))
    await bob.step()
    await bob.step()
    fake.push(Reply.tool("Write", {"file_path": "/memory/payments.md", "content": "# wiped\n"}))
    await alice.step()
    told_in = fake.requests[-1]
    await alice.step()
    fake.push(Reply.text("done"))
    await alice.step()

    # Then: both edits landed, Bob's over Alice's with a note; Alice, told of Bob's change
    # before she wrote, replaced the file (Claude Code's rule: a notice counts as seeing it)
    bob_edit = next(e for e in bob.of_kind(ToolFinished) if e.name == "Edit")
    assert "the file had been modified on disk since you last read it" in bob_edit.output_head
    write = next(e for e in alice.of_kind(ToolFinished) if e.name == "Write")
    assert not write.is_error
    assert (await kit.store.read(MEMORY, "/payments.md")).content == "# wiped\n"
    # And: Alice heard of Bob's edit at her next model step, once
    [told] = [t for t in last_user_texts(told_in) if "was changed by" in t]
    assert "another agent session (s-bob)" in told
    assert "1\t# Payments runbook (owner: team-pay)" in told
    later = [t for m in fake.requests[-1].messages for t in texts_of(m) if "was changed by" in t]
    assert later == [told]


def edit(old: str, new: str) -> Reply:
    return Reply.tool(
        "Edit", {"file_path": "/memory/payments.md", "old_string": old, "new_string": new}
    )


def test_checkpoint_round_trips_the_new_fields() -> None:
    cp = replace(new_checkpoint("s-json"), tool_time_s=1.25, in_flight="toolu_x")
    assert Checkpoint.from_json(cp.to_json()) == cp
    old = json.loads(cp.to_json())
    del old["tool_time_s"]
    assert Checkpoint.from_json(json.dumps(old)).tool_time_s == 0.0
