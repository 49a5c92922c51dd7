"""``WARROOM_AGENT_WRITES_SKILLS`` reaches the tools: the runtime built from the setting
lets the model's Write change /skills, or refuses it by default."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.cli.terminal import TerminalReporter
from bot.durable.wiring import Runtime
from bot.settings import Settings
from harness import Checkpoint, CommandResult, Requester, ToolContext, run_tool
from memory_store import Namespace, Scope

SKILL = "---\nname: restart-pods\ndescription: Restart pods.\n---\n# Steps\n"


class NoSandbox:
    """Write on /skills never reaches the sandbox."""

    async def exec(self, name: str, command: str, *, timeout_s: float) -> CommandResult:
        raise AssertionError("the sandbox was used")

    async def lookup(self, name: str, *, timeout_s: float) -> CommandResult | None:
        raise AssertionError("the sandbox was used")

    async def read_file(self, path: str) -> bytes:
        raise AssertionError("the sandbox was used")

    async def write_file(self, path: str, data: bytes) -> None:
        raise AssertionError("the sandbox was used")


async def write_skill_as_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str | None
) -> tuple[bool, str]:
    if flag is not None:
        monkeypatch.setenv("WARROOM_AGENT_WRITES_SKILLS", flag)
    monkeypatch.setenv("WARROOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]

    async def enqueue(session_id: str, token: str) -> None:
        raise AssertionError("nothing is enqueued here")

    runtime = await Runtime.open(
        settings, enqueue=enqueue, reporter=TerminalReporter(io.StringIO())
    )
    try:
        cp = Checkpoint(session_id="S1", org_id="T1", channel_id="C1", requester=Requester("U1"))
        ctx = ToolContext.for_session(
            cp,
            runtime.files,
            NoSandbox(),
            "toolu_1",
            runtime.driver.limits,
        )
        path = "/skills/restart-pods/SKILL.md"
        outcome = await run_tool("Write", {"file_path": path, "content": SKILL}, ctx)
        index = await runtime.files.index(Namespace("T1", Scope.SKILLS))
    finally:
        await runtime.close()
    return any(e.path == "/restart-pods/SKILL.md" for e in index), outcome.content


async def test_the_setting_lets_the_agent_write_skills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, said = await write_skill_as_the_agent(tmp_path, monkeypatch, "true")

    assert written, said


async def test_by_default_the_agent_may_not_write_skills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, said = await write_skill_as_the_agent(tmp_path, monkeypatch, None)

    assert not written
    assert "<tool_use_error>" in said
