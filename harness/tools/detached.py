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

import re
from datetime import UTC, datetime, timedelta
from shlex import quote

from harness.errors import WorkspaceUnavailable
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
KILLED_EXIT_CODE = 143
"""The exit code Claude Code reports for a command killed at its timeout (128 + SIGTERM)."""
_SLEEP_FIRST = re.compile(r"\A\s*sleep(\s|\Z)")
READ_TIMEOUT_S = 30.0
"""The deadline of the ``cat`` that reads a task file back."""
MIN_WAIT_S = 1.0
"""The shortest wait before a command is moved: the sandbox protocol's ``timeout`` is in
whole seconds, and a shorter one may pass before the sandbox has started the command (it
would then be neither running nor known)."""


def can_move(command: str, timeout: int | None, ctx: ToolContext, max_timeout_ms: int) -> bool:
    """Whether a call is moved to the background, not killed, at its timeout (given or the
    default), as Claude Code 2.1.336 does: in a session that runs background tasks, unless
    the timeout is the cap or the command starts with ``sleep`` (Claude Code kills those:
    a sleep moved to the background waits for nothing).

    Captured from Claude Code 2.1.336 with ``BASH_DEFAULT_TIMEOUT_MS=3000``: ``echo start;
    sleep 8`` and a ``python3`` sleep without ``timeout`` are moved; ``sleep 8; echo x``
    and ``sleep 8`` with ``timeout`` are killed ("Exit code 143 / Command timed out after
    3s").

    >>> bool(_SLEEP_FIRST.match("  sleep 8; echo x")), bool(_SLEEP_FIRST.match("sleepy"))
    (True, False)
    """
    return (
        (timeout is None or timeout < max_timeout_ms)
        and _SLEEP_FIRST.match(command) is None
        and ctx.tasks is not None
        and isinstance(ctx.workspace, BackgroundWorkspace)
    )


def killed_text(output: str, timeout_ms: int) -> str:
    """The tool result of a command killed at its timeout (Claude Code 2.1.336's words:
    its exit code, the output so far, then the timeout).

    >>> killed_text("", 3000)
    'Exit code 143\\nCommand timed out after 3s'
    """
    body = output.rstrip("\n")
    lines = [f"Exit code {KILLED_EXIT_CODE}", *([body] if body else [])]
    return "\n".join([*lines, f"Command timed out after {duration(timeout_ms)}"])


def duration(ms: int) -> str:
    """A timeout as Claude Code names it in the moved text: whole seconds, rounded half
    up (its 1500 ms is "2s"), whole minutes as ``Nm``.

    >>> duration(1500), duration(1000), duration(90_000), duration(120_000), duration(200)
    ('2s', '1s', '90s', '2m', '0.2s')
    """
    if ms < 1000:  # only tests and tight caps give less than a second: keep it true
        return f"{ms / 1000:g}s"
    seconds = max(1, (ms + 500) // 1000)
    return f"{seconds // 60}m" if seconds >= 60 and seconds % 60 == 0 else f"{seconds}s"


NO_OUTPUT_YET = (
    "No output had been read from it when it was moved. A program that buffers its output, "
    "or a pipe into one such as tail, can keep the output file empty until the command "
    "finishes. "
)
"""Claude Code 2.1.336's sentence in the moved text when nothing was written yet."""


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
        f"TaskStop. {'' if output.strip() else NO_OUTPUT_YET}To check interim output, use "
        "Read on that file path."
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

    One sandbox call when the command ends in time: the command's output goes to its task
    file, and the wrapper itself prints the file back and removes it, unless the harness
    claimed the file first to move the command (``claim_path``: whoever makes that
    directory first decides, so a command that ends at its deadline is either reported or
    moved, never both nor neither).

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
        waited_ms = max(timeout_ms, int(MIN_WAIT_S * 1000))
        moved = await _moved(ctx, known.description, waited_ms, known.sandbox_id, claim=False)
        assert moved is not None  # nothing is claimed
        return moved
    result, sandbox_id = await workspace.exec_or_detach(
        ctx.tool_use_id, movable(command, path, label), timeout_s=max(timeout_ms / 1000, MIN_WAIT_S)
    )
    if not result.running:
        return result
    waited_ms = max(timeout_ms, int(MIN_WAIT_S * 1000))
    moved = await _moved(ctx, description or label, waited_ms, sandbox_id)
    if moved is not None:
        return moved
    # It ended as it was being moved, and its wrapper printed its output: follow it.
    ended = await workspace.lookup(ctx.tool_use_id, timeout_s=READ_TIMEOUT_S)
    if ended is None:
        raise WorkspaceUnavailable("the sandbox forgot a command that had just ended")
    return ended


def claim_path(path: str) -> str:
    """The directory whose creation decides whether a command's output is reported (by
    its wrapper) or left for the background task (by the harness)."""
    return path.removesuffix(".output") + ".claim"


def movable(command: str, path: str, label: str) -> str:
    """``command`` with its output sent to ``path``, printed back at its end unless the
    harness moved it meanwhile, and its exit status kept.

    >>> movable("make", "/t/b.output", "make").splitlines()[1:]  # doctest: +NORMALIZE_WHITESPACE
    ['( exec >>/t/b.output 2>&1', 'make', ')', '_wr_rc=$?',
     'if mkdir /t/b.claim 2>/dev/null; then cat /t/b.output; rm -rf /t/b.output /t/b.command
      /t/b.claim; fi', 'exit $_wr_rc']
    """
    claim = claim_path(path)
    done = f"cat {path}; rm -rf {path} {command_path(path)} {claim}"
    return "\n".join(
        (
            f"{_preamble(path, label)} || exit 1",
            f"( exec >>{path} 2>&1",
            command,
            ")",
            "_wr_rc=$?",
            f"if mkdir {claim} 2>/dev/null; then {done}; fi",
            "exit $_wr_rc",
        )
    )


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
    ctx: ToolContext, description: str, timeout_ms: int, sandbox_id: str, *, claim: bool = True
) -> ToolOutcome | None:
    """Claim the command's output file, register the task (once: a redo registers nothing
    new) and give the moved result with the output written so far (the same on a redo:
    the read is named). None when the command's wrapper claimed the file first: it ended
    and its result is its own."""
    task_id = task_id_for(ctx.tool_use_id)
    path = output_path(task_id)
    claimed = claim_path(path)
    read = f"cat {path}"
    if claim:  # a claim made after the wrapper's clean-up finds no file: it ended
        taken = f"mkdir {claimed} 2>/dev/null || exit {_ENDED}"
        read = f"{taken}; [ -e {path} ] || {{ rmdir {claimed}; exit {_ENDED}; }}; {read}"
    so_far = await ctx.workspace.exec(f"{ctx.tool_use_id}.so-far", read, timeout_s=READ_TIMEOUT_S)
    if so_far.exit_code == _ENDED:
        return None
    deadline = datetime.now(UTC) + timedelta(milliseconds=BACKGROUND_LIMIT_MS)
    task = await register_task(ctx, sandbox_id, description, deadline_at=deadline)
    text = moved_text(so_far.stdout, timeout_ms, task_id, path)
    return ToolOutcome(text, task=task)


_ENDED = 75
"""The exit status of the claiming read when the command's wrapper claimed first."""
