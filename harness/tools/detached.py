"""A foreground Bash command that reaches its ``timeout``: moved to the background.

Claude Code 2.1.332 and 2.1.336 (docs/tools.md, Bash; their captured results in
``tests/harness/tools/conformance/captures/``): a command still running when its
``timeout`` passes is not killed; the call returns the output so far, then ``Command did
not complete within its Ns timeout and was moved to the background (ID: ID). …``, and the
command goes on as a background task (its output in ``PATH``, a ``<task-notification>``
when it ends, ``TaskStop`` ends it). Warroom does so for a call that gives a ``timeout``
below the session's cap, in a sandbox that runs background tasks: the command's output
goes to its task file from the start, it runs streamed like any call
(``exec_or_detach``: no polling, so it is as fast as ``exec``), and at the deadline it is
left running and registered (``register_task``) with a deadline ``BACKGROUND_LIMIT_MS``
later. Finished in time, its file is read back and removed in one more call. A call
without ``timeout`` (or at the cap) is killed at its deadline, as before.

Crash safety: every sandbox call is named after the ``tool_use`` id (get-or-start), and
the row is registered at most once (by task id); a redone call whose row exists answers
the same moved result without waiting again.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from shlex import quote

from harness.sandbox.workspace import BackgroundWorkspace, CommandResult
from harness.tools.background import (
    command_path,
    output_path,
    register_task,
    task_id_for,
)
from harness.tools.contract import ToolContext, ToolOutcome

BACKGROUND_LIMIT_MS = 600_000
"""How long a moved command may go on in the background before it is stopped (Claude
Code's "If it is still running after 10m in the background, it will be stopped")."""
READ_TIMEOUT_S = 30.0
"""The deadline of the ``cat`` that reads a task file back."""
MIN_WAIT_S = 1.0
"""The shortest wait before a command is moved: the sandbox protocol's ``timeout`` is in
whole seconds, and a shorter one may pass before the sandbox has started the command (it
would then be neither running nor known)."""


def can_move(timeout: int | None, ctx: ToolContext, max_timeout_ms: int) -> bool:
    """Whether a call with ``timeout`` (ms, as given) is moved, not killed, at it: an
    explicit ``timeout`` below the cap, in a session that runs background tasks."""
    return (
        timeout is not None
        and timeout < max_timeout_ms
        and ctx.tasks is not None
        and isinstance(ctx.workspace, BackgroundWorkspace)
    )


def duration(ms: int) -> str:
    """A timeout as Claude Code names it in the moved text: whole seconds, rounded half
    up (its 1500 ms is "2s"), whole minutes as ``Nm``.

    >>> duration(1500), duration(1000), duration(90_000), duration(120_000)
    ('2s', '1s', '90s', '2m')
    """
    seconds = max(1, (ms + 500) // 1000)
    return f"{seconds // 60}m" if seconds >= 60 and seconds % 60 == 0 else f"{seconds}s"


def moved_text(output: str, timeout_ms: int, task_id: str, path: str) -> str:
    """The tool result of a command moved to the background (Claude Code 2.1.336's words),
    after its output so far."""
    limit = duration(BACKGROUND_LIMIT_MS)
    text = (
        f"Command did not complete within its {duration(timeout_ms)} timeout and was moved "
        f"to the background (ID: {task_id}). Output is being written to: {path}. You will "
        f"be notified when it completes. If it is still running after {limit} in the "
        "background, it will be stopped and you will be notified. It is running now: do not "
        "start a second copy while it runs. If it is no longer needed, stop it with "
        "TaskStop. To check interim output, use Read on that file path."
    )
    output = output.rstrip("\n")
    return f"{output}\n{text}" if output else text


async def run_movable(
    ctx: ToolContext,
    command: str,
    label: str,
    description: str | None,
    timeout_ms: int,
    *,
    recovering: bool = False,
) -> CommandResult | ToolOutcome:
    """Run ``command`` (past the guard, in its directory) until ``timeout_ms``: its result
    when it finished (standard output and error together, in the order written), or the
    moved result (with the task) when it was left running. ``label``: the command as the
    model wrote it (TaskStop names it). ``recovering``: redone after a crash (a task
    already registered was moved: its result is given again).

    Raises:
        WorkspaceUnavailable, memory_store.DatabaseUnavailable: retry the step.
    """
    workspace = ctx.workspace
    assert ctx.tasks is not None
    assert isinstance(workspace, BackgroundWorkspace)
    task_id = task_id_for(ctx.tool_use_id)
    path = output_path(task_id)
    known = await ctx.tasks.get(ctx.session_id, task_id) if recovering else None
    if known is not None:  # it was moved before the crash
        return await _moved(ctx, known.description, timeout_ms, known.sandbox_id)
    full = f"{_preamble(path, label)} && exec >>{path} 2>&1 || exit 1\n{command}"
    result, sandbox_id = await workspace.exec_or_detach(
        ctx.tool_use_id, full, timeout_s=max(timeout_ms / 1000, MIN_WAIT_S)
    )
    if result.running:
        return await _moved(ctx, description or label, timeout_ms, sandbox_id)
    read = f"cat {path}; rm -f {path} {command_path(path)}"
    output = await ctx.workspace.exec(f"{ctx.tool_use_id}.output", read, timeout_s=READ_TIMEOUT_S)
    return CommandResult(result.exit_code, output.stdout, result.stderr)


def _preamble(path: str, label: str) -> str:
    """``prepared``'s work (the output file, the command beside it for TaskStop), with the
    directory made only the first time: one process less per call.

    >>> print(_preamble("/w/t/b1.output", "sleep 30"))
    { [ -d /w/t ] || mkdir -p /w/t; } && : >>/w/t/b1.output && printf %s 'sleep 30' >/w/t/b1.command
    """
    directory = path.rsplit("/", 1)[0]
    made = f"{{ [ -d {directory} ] || mkdir -p {directory}; }}"
    return f"{made} && : >>{path} && printf %s {quote(label)} >{command_path(path)}"


async def _moved(
    ctx: ToolContext, description: str, timeout_ms: int, sandbox_id: str
) -> ToolOutcome:
    """Register the task (once: a redo registers nothing new) and give the moved result,
    with the output written so far (the same on a redo: the read is named)."""
    task_id = task_id_for(ctx.tool_use_id)
    path = output_path(task_id)
    so_far = await ctx.workspace.exec(
        f"{ctx.tool_use_id}.so-far", f"cat {path}", timeout_s=READ_TIMEOUT_S
    )
    deadline = datetime.now(UTC) + timedelta(milliseconds=BACKGROUND_LIMIT_MS)
    task = await register_task(ctx, sandbox_id, description, deadline_at=deadline)
    text = moved_text(so_far.stdout, timeout_ms, task_id, path)
    return ToolOutcome(text, task=task)
