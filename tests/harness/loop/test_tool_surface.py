"""The tool surface as the model meets it through ``advance``: errors the model can act
on (never a crashed step), the Skill tool, and the todo reminder.

Real parts: a ``FileStore`` (SQLite), the real ``AnthropicModel`` against the fake
Messages API, and real local sandboxes (bubblewrap).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Inbound, SandboxWorkspaces, ToolFinished, ToolUnknown
from harness.loop.todo_reminder import MARK
from memory_store import Namespace, Origin, Scope
from sandbox_client import LocalConfig, LocalProvider, SandboxManager
from tests.conftest import require_bwrap
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply
from tests.harness.step_support import ORG, Kit, open_kit, texts_of

SKILLS = Namespace(ORG, Scope.SKILLS)
HUMAN = Origin("U-HUMAN")
DEPLOYS = (
    "---\nname: deploys\ndescription: How to roll back a deploy.\n---\n"
    "# Roll back\nRun `kubectl rollout undo`.\n"
)


@pytest.fixture(scope="module")
def provider() -> Iterator[LocalProvider]:
    state = Path(tempfile.mkdtemp(prefix="wr-surf-"))  # Unix socket paths must stay short
    local = LocalProvider(LocalConfig(state_dir=state, network="none"))
    yield local
    asyncio.run(local.destroy_all())
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
async def kit(tmp_path: Path, provider: LocalProvider) -> AsyncIterator[Kit]:
    manager = SandboxManager(provider)
    try:
        async with open_kit(tmp_path, SandboxWorkspaces(manager)) as shared:
            yield shared
    finally:
        await manager.aclose()


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI() as server:
        yield server


def ask(text: str) -> tuple[Inbound, ...]:
    return (Inbound("U-ALICE", text, "Alice"),)


def tool_result(fake: FakeAnthropicAPI, request: int) -> dict[str, Any]:
    """The first tool_result of request ``request`` (0-based)."""
    block: dict[str, Any] = fake.requests[request].messages[-1]["content"][0]
    return block


# ------------------------------------------------ paths outside the roots (issue 12.1)


async def test_file_calls_outside_the_roots_are_tool_errors_and_the_session_answers(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    require_bwrap()
    # Given: a model whose first calls name paths outside the four roots
    calls = [
        Reply.tool("Read", {"file_path": "/etc/os-release"}),
        Reply.tool("Write", {"file_path": "/tmp/x", "content": "x"}),
        Reply.tool("Read", {"file_path": "/"}),
        Reply.tool("Write", {"file_path": "/Memory/x", "content": "x"}),
        Reply.tool("Write", {"file_path": "/mem\u043ery/x", "content": "x"}),
        Reply.tool("Edit", {"file_path": "/etc/hosts", "old_string": "a", "new_string": "b"}),
    ]
    fake.push(*calls, Reply.text("Done."))
    run = kit.session(fake.base_url)

    # When: the session runs, each step as the durable layer runs it
    await run.run(ask("look around"))

    # Then: every call came back to the model as an error it can act on; no step crashed
    finished = run.of_kind(ToolFinished)
    assert [f.is_error for f in finished] == [True] * len(calls)
    assert run.of_kind(ToolUnknown) == []
    results = [tool_result(fake, i) for i in range(1, len(calls) + 1)]
    assert all(r["is_error"] is True for r in results)
    assert "use Bash (for example `cat /etc/os-release`" in results[0]["content"]
    assert "Did you mean /memory/x?" in results[3]["content"]
    assert "Did you mean /memory/x?" in results[4]["content"]
    assert "/etc/hosts is outside the paths Edit can use" in results[5]["content"]
    assert all("crash" not in r["content"] for r in results)
    assert run.answers == ["Done."]


async def test_a_crashed_edit_outside_the_roots_is_answered_with_the_refusal_not_unknown(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    require_bwrap()
    # Given: a worker that died after committing the intent of an Edit on /etc/hosts
    edit = {"file_path": "/etc/hosts", "old_string": "a", "new_string": "b"}
    fake.push(Reply.tool("Edit", edit), Reply.text("ok"))
    run = kit.session(fake.base_url)
    await run.step(ask("edit hosts"))
    await run.step()
    run.cp = run.saves.last_checkpoint()
    assert run.cp.in_flight is not None

    # When: the next worker recovers the call
    recovered = await run.step()

    # Then: the model gets the refusal, not "the outcome could not be recovered"
    [finished] = [e for e in recovered.events if isinstance(e, ToolFinished)]
    assert finished.is_error
    assert finished.output_head.startswith(
        "<tool_use_error>/etc/hosts is outside the paths Edit can use."
    )


# ------------------------------------------------------------------ Skill


async def test_the_skill_tool_loads_a_listed_skill_and_refuses_an_unknown_one(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: an org with one skill
    await kit.store.write(SKILLS, "/deploys/SKILL.md", DEPLOYS, HUMAN, expected_version=0)
    fake.push(
        Reply.tool("Skill", {"skill": "deploys", "args": "payments"}),
        Reply.tool("Skill", {"skill": "nope"}),
        Reply.text("Rolled back."),
    )
    run = kit.session(fake.base_url)

    # When: the model loads it, then a skill that does not exist
    await run.run(ask("roll back payments"))

    # Then: the first result says it is launched and the instructions follow it as a block
    # of their own (Claude Code 2.1.336); the second is a tool error
    loaded, unknown = tool_result(fake, 1), tool_result(fake, 2)
    assert loaded["content"] == "Launching skill: deploys"
    follow_up = fake.requests[1].messages[-1]["content"][1]
    assert (follow_up["type"], follow_up["text"]) == (
        "text",
        "Base directory for this skill: /skills/deploys\n\n"
        "# Roll back\nRun `kubectl rollout undo`.\n\nARGUMENTS: payments",
    )
    assert unknown["is_error"] is True
    assert unknown["content"] == (
        "<tool_use_error>Unknown skill: nope. Skills: deploys.</tool_use_error>"
    )
    assert any(t["name"] == "Skill" for t in fake.requests[0].body["tools"])


# ------------------------------------------------------------------ todo reminder


async def test_the_todo_reminder_comes_after_ten_tool_results_without_todowrite(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    # Given: a model that makes eleven calls and never touches its task list
    reads = [Reply.tool("Glob", {"pattern": "*.md", "path": "/memory"}) for _ in range(11)]
    fake.push(*reads, Reply.text("Nothing there."))
    run = kit.session(fake.base_url)

    # When: the session runs
    await run.run(ask("look in memory"))

    # Then: the reminder joins the message after the tenth result, once
    with_reminder = [
        i for i, r in enumerate(fake.requests) if any(MARK in t for t in texts_of(r.messages[-1]))
    ]
    assert with_reminder == [10]


async def test_the_todo_reminder_waits_for_ten_calls_after_a_todowrite(
    fake: FakeAnthropicAPI, kit: Kit
) -> None:
    todo = {"todos": [{"content": "Check", "status": "in_progress", "activeForm": "Checking"}]}
    calls = [Reply.tool("Glob", {"pattern": "*.md", "path": "/memory"}) for _ in range(9)]
    fake.push(*calls[:5], Reply.tool("TodoWrite", todo), *calls, Reply.text("ok"))
    run = kit.session(fake.base_url)

    await run.run(ask("look"))

    assert not any(MARK in t for r in fake.requests for t in texts_of(r.messages[-1]))
