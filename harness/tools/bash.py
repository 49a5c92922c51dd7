"""Bash: run a command in the session's sandbox, after the bash guard.

Claude Code's interface: ``timeout`` in milliseconds (default 120000, max 600000; a
call still running at its timeout is moved to the background, ``detached``, unless it
starts with ``sleep``, which is killed),
output over 30,000 characters cut in the middle, the exit code shown when it is not
0 (docs/tools.md, Bash). Each call is a fresh ``bash -c`` started in the session's
working directory: files and the directory a ``cd`` left (``Checkpoint.cwd``, as in
Claude Code) persist between calls, other shell state (variables) does not. After a
call, files the model read that changed are announced (``sandbox_changes``). The
process is named after the ``tool_use`` id, so a call is never run twice
(docs/architecture.md §5, §8).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from shlex import quote

from pydantic import BaseModel, ConfigDict, Field

from harness.guard.check import Deny, check_bash
from harness.sandbox.workspace import (
    CommandResult,
    WorkspaceFileNotFound,
    WorkspaceIsADirectory,
    WorkspaceRefused,
)
from harness.tools.background import start_in_background
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, tool_error
from harness.tools.detached import can_move, killed_text, run_movable
from harness.tools.sandbox_changes import sandbox_changes
from harness.vfs import WORKSPACE

NO_OUTPUT = "(Bash completed with no output)"  # Claude Code 2.1.332
DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
CWD_FILE = "/workspace/.warroom/cwd"
"""Where a Bash call leaves the directory it ended in (read after calls that may ``cd``)."""
_MAY_CHANGE_DIRECTORY = re.compile(r"\b(cd|pushd|popd)\b")


def in_directory(command: str, cwd: str, *, record: bool) -> str:
    """``command`` started in ``cwd`` (``/workspace`` when it is gone); with ``record``,
    the directory it ends in is written to ``CWD_FILE`` on exit.

    >>> print(in_directory("pwd", "/workspace/sub", record=False))
    cd /workspace/sub 2>/dev/null || cd /workspace
    pwd
    >>> in_directory("pwd", "/workspace", record=False)
    'pwd'
    """
    lines = [] if cwd == WORKSPACE else [f"cd {quote(cwd)} 2>/dev/null || cd {WORKSPACE}"]
    if record:
        directory = CWD_FILE.rsplit("/", 1)[0]
        lines.append(f"trap 'mkdir -p {directory} 2>/dev/null; pwd 2>/dev/null >|{CWD_FILE}' EXIT")
    return "\n".join([*lines, command])


class BashInput(BaseModel):
    """Bash's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    command: str = Field(min_length=1)
    timeout: int | None = Field(default=None, ge=1)  # above the maximum: clamped
    description: str | None = None
    run_in_background: bool | None = None

    def timeout_ms(self, max_timeout_ms: int) -> int:
        """The effective timeout: the default when unset, never above the session's cap
        (a larger ``timeout`` is clamped, as Claude Code 2.1.332 does, not refused)."""
        return min(self.timeout or DEFAULT_TIMEOUT_MS, max_timeout_ms, MAX_TIMEOUT_MS)


async def bash(p: BashInput, ctx: ToolContext, *, recovering: bool = False) -> ToolOutcome:
    """Guard, then run in the sandbox and report (``recovering``: see ``run_movable``)."""
    decision = await asyncio.to_thread(check_bash, p.command)  # CPU-bound: off the loop
    if isinstance(decision, Deny):
        return tool_error(decision.reason)
    if p.run_in_background:
        command = in_directory(p.command, ctx.cwd, record=False)
        return await start_in_background(ctx, command, p.description, label=p.command)
    timeout_ms = p.timeout_ms(ctx.bash_max_timeout_ms)
    moves = _MAY_CHANGE_DIRECTORY.search(p.command) is not None
    command = in_directory(p.command, ctx.cwd, record=moves)
    if can_move(p.command, p.timeout, ctx, min(ctx.bash_max_timeout_ms, MAX_TIMEOUT_MS)):
        ran = await run_movable(
            ctx, command, p.command, p.description, timeout_ms, recovering=recovering
        )
        if isinstance(ran, ToolOutcome):  # moved to the background at its timeout
            return await _after(ran, ctx, False)
        return await _after(report(ran, timeout_ms), ctx, moves)
    result = await ctx.workspace.exec(ctx.tool_use_id, command, timeout_s=timeout_ms / 1000)
    return await _after(report(result, timeout_ms), ctx, moves)


async def _after(outcome: ToolOutcome, ctx: ToolContext, moved: bool) -> ToolOutcome:
    """The outcome with the directory the call left and the files it changed."""
    cwd = await _ended_in(ctx) if moved else None
    checking = f"{ctx.tool_use_id}.changes"
    notices, updates = await sandbox_changes(ctx.workspace, ctx.read_state, checking)
    content = f"{outcome.content}\n\n{notices}" if notices else outcome.content
    return replace(outcome, content=content, read_updates=updates, cwd=cwd)


async def _ended_in(ctx: ToolContext) -> str | None:
    try:
        ended = (await ctx.workspace.read_file(CWD_FILE)).decode(errors="replace").strip()
    except (WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused):
        return None
    return ended if ended.startswith("/") and ended != ctx.cwd else None


async def recover_bash(p: BashInput, ctx: ToolContext) -> ToolOutcome | None:
    """After a crash: the sandbox's own record of the process, or None when it has none."""
    decision = await asyncio.to_thread(check_bash, p.command)  # CPU-bound: off the loop
    if isinstance(decision, Deny):
        return tool_error(decision.reason)
    if p.run_in_background:  # get-or-start by name: redoing it starts nothing new
        command = in_directory(p.command, ctx.cwd, record=False)
        return await start_in_background(ctx, command, p.description, label=p.command)
    timeout_ms = p.timeout_ms(ctx.bash_max_timeout_ms)
    if can_move(p.command, p.timeout, ctx, min(ctx.bash_max_timeout_ms, MAX_TIMEOUT_MS)):
        return await bash(p, ctx, recovering=True)  # every sandbox call is named: safe
    result = await ctx.workspace.lookup(ctx.tool_use_id, timeout_s=timeout_ms / 1000)
    moves = _MAY_CHANGE_DIRECTORY.search(p.command) is not None
    return None if result is None else await _after(report(result, timeout_ms), ctx, moves)


def report(result: CommandResult, timeout_ms: int) -> ToolOutcome:
    """The tool result for a finished command (timed by the sandbox's record of it).

    >>> report(CommandResult(2, "", "no such file\\n"), 120000).content
    'Exit code 2\\nno such file'
    """
    output = "\n".join(s.rstrip("\n") for s in (result.stdout, result.stderr) if s)
    if result.timed_out:
        outcome = ToolOutcome(killed_text(output, timeout_ms), is_error=True)
    elif result.exit_code != 0:
        code = "unknown" if result.exit_code is None else str(result.exit_code)
        outcome = ToolOutcome(f"Exit code {code}\n{output}".rstrip("\n"), is_error=True)
    else:
        outcome = ToolOutcome(output or NO_OUTPUT)
    return replace(outcome, started_at=result.started_at, ended_at=result.ended_at)


BASH = ModelTool(
    name="Bash",
    description=(
        "Run a bash command in this session's sandbox (a Linux container; working directory "
        "/workspace) and return its stdout and stderr, and the exit code when it is not 0. "
        "Each call starts a fresh shell in the working directory: files and the directory a "
        "`cd` moved to persist between calls, variables do not, and anything the command "
        "starts with `cmd &` or `nohup cmd &` is stopped when the call ends. For long work "
        "(a rollout, a log tail, a slow query) "
        "set run_in_background: the call returns at once with a task ID and an output file "
        "you can Read, you may keep working or end your turn, and you are notified when the "
        "command ends; TaskStop ends it early. timeout is in milliseconds (default 120000, "
        "max 600000; not for background commands); a command that runs past a timeout you "
        "gave is moved to the background (you get its task ID and output file, as above), "
        "one past the default or the max is killed. "
        "Output over 30000 characters is saved to a file in the sandbox: you get its first "
        "part and the file's path, which you can Read or Grep. "
        "/memory, /skills and /incident are not on the sandbox's filesystem: use Read, "
        "Write, Edit, Glob and Grep for them. Prefer Grep, Glob and "
        "Read over grep, find and cat. Prefer read-only commands; never change production "
        "systems unless an engineer in the thread explicitly asked for it."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run."},
            "timeout": {
                "type": "number",
                "minimum": 1,
                "description": (
                    "Timeout in milliseconds (default 120000, max 600000; larger values are "
                    "lowered to the max)."
                ),
            },
            "description": {
                "type": "string",
                "description": "What the command does, in 5-10 words (shown to the team).",
            },
            "run_in_background": {
                "type": "boolean",
                "description": (
                    "Run the command in the background and return at once; you are notified "
                    "when it ends. Its output goes to a file you can Read meanwhile."
                ),
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    params=BashInput,
    runner=bash,
    recoverer=recover_bash,
)
