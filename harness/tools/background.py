"""Background work: Bash ``run_in_background``, ``TaskStop`` (alias ``KillShell``), and the
``<task-notification>`` a session gets when a background process ends.

Claude Code 2.1.332's surface (docs/tools.md, "Background commands"): a background call
returns at once with ``Command running in background with ID: ID. Output is being
written to: PATH. You will be notified when it completes.``; the process runs in the
session's sandbox under the call's ``tool_use`` id, its output going to ``PATH``
(``/workspace/.warroom/tasks/ID.output``, read with Read); when it ends the session is
woken with a ``<task-notification>`` (built by ``task_notification``). ``TaskStop``
ends one, and a stopped task sends no notification. The watcher that sees processes end
is the durable layer's; the rows it watches (``memory_store.BackgroundTasks``) are
registered here, after the process started: a step that dies in between is recovered by
running the same call again, which starts nothing new (get-or-start by name) and
registers the row.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from shlex import quote

from pydantic import BaseModel, ConfigDict, Field

from harness.guard.check import Deny, check_bash
from harness.loop.checkpoint import TaskRecord
from harness.sandbox.workspace import (
    BackgroundWorkspace,
    StepWorkspace,
    WorkspaceFileNotFound,
    WorkspaceIsADirectory,
    WorkspaceRefused,
)
from harness.tools.contract import ModelTool, ToolContext, ToolOutcome, schema_error, tool_error
from memory_store import BackgroundTask, BackgroundTasks

TASKS_DIR = "/workspace/.warroom/tasks"
NOTIFICATION_KIND = "notification"
"""The ``Inbound.kind`` of a ``<task-notification>`` (``SessionStore.notify``)."""
TAIL_CHARS = 2000
"""How much of the end of a task's output its notification carries."""
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def task_id_for(tool_use_id: str) -> str:
    """The short id the model sees for the task a call starts (``b`` + 8 base-36
    characters, Claude Code's shape), the same every time for one ``tool_use`` id.

    >>> task_id_for("toolu_01abc")
    'bfcq5qptr'
    """
    number = int.from_bytes(hashlib.sha256(tool_use_id.encode()).digest()[:8], "big")
    chars = []
    for _ in range(8):
        number, digit = divmod(number, 36)
        chars.append(_ALPHABET[digit])
    return "b" + "".join(chars)


def output_path(task_id: str) -> str:
    """The sandbox file a task's output goes to."""
    return f"{TASKS_DIR}/{task_id}.output"


def wrapped(command: str, path: str) -> str:
    """``command`` with its standard output and error appended to ``path`` (the shell's
    own ``exec`` redirection, so the command's text is run as written).

    >>> print(wrapped("echo hi", "/w/t/b1.output"))
    mkdir -p /w/t && exec >>/w/t/b1.output 2>&1
    echo hi
    """
    directory = path.rsplit("/", 1)[0]
    return f"mkdir -p {directory} && exec >>{path} 2>&1\n{command}"


def prepared(path: str, label: str) -> str:
    """The command that makes a task's output file (empty, never truncated) and keeps
    ``label`` (the command as the model wrote it) beside it for TaskStop, before the task
    starts: a Read or TaskStop right after the start finds both.

    >>> print(prepared("/w/t/b1.output", "sleep 30"))
    mkdir -p /w/t && : >>/w/t/b1.output && printf %s 'sleep 30' >/w/t/b1.command
    """
    directory = path.rsplit("/", 1)[0]
    return f"mkdir -p {directory} && : >>{path} && printf %s {quote(label)} >{command_path(path)}"


def command_path(output: str) -> str:
    """Where the command of the task writing to ``output`` is kept."""
    return output.removesuffix(".output") + ".command"


def started_text(task_id: str, path: str) -> str:
    """The tool result of a background call (Claude Code 2.1.332's words)."""
    return (
        f"Command running in background with ID: {task_id}. Output is being written to: "
        f"{path}. You will be notified when it completes. To check interim output, use Read "
        "on that file path."
    )


async def start_in_background(
    ctx: ToolContext,
    command: str,
    description: str | None,
    *,
    kind: str = "bash",
    deadline_at: datetime | None = None,
    started: Callable[[str, str], str] = started_text,
    label: str | None = None,
) -> ToolOutcome:
    """Start ``command`` (already past the guard) as a background task of the session;
    ``started(task_id, output_path)`` is the tool result. ``label``: the command as the
    model wrote it, when ``command`` wraps it (TaskStop names it).

    Raises:
        WorkspaceUnavailable, memory_store.DatabaseUnavailable: retry the step.
    """
    workspace = ctx.workspace
    if ctx.tasks is None or not isinstance(workspace, BackgroundWorkspace):
        return tool_error("Background commands are not available in this session.")
    task_id = task_id_for(ctx.tool_use_id)
    path = output_path(task_id)
    setup = await ctx.workspace.exec(
        f"{ctx.tool_use_id}.setup", prepared(path, label or command), timeout_s=30
    )
    if setup.exit_code != 0:
        return tool_error(f"Could not prepare the task's output file: {setup.stderr.strip()}")
    sandbox_id = await workspace.start(ctx.tool_use_id, wrapped(command, path))
    task = await register_task(ctx, sandbox_id, description or command, kind, deadline_at)
    return ToolOutcome(started(task_id, path), task=task)


async def register_task(
    ctx: ToolContext,
    sandbox_id: str,
    description: str,
    kind: str = "bash",
    deadline_at: datetime | None = None,
) -> TaskRecord:
    """Record the process named after ``ctx.tool_use_id`` (running in ``sandbox_id``,
    writing to ``output_path(task_id_for(ctx.tool_use_id))``) as a background task the
    watcher follows. Idempotent: a redone call records nothing twice.

    Raises:
        memory_store.DatabaseUnavailable: retry the step.
    """
    workspace = ctx.workspace
    assert ctx.tasks is not None
    assert isinstance(workspace, BackgroundWorkspace)
    handle = workspace.handle_json()
    assert handle is not None  # the process runs in the sandbox: it was ensured
    task_id = task_id_for(ctx.tool_use_id)
    label = " ".join(description.split())[:200]
    await ctx.tasks.register(
        BackgroundTask(
            session_id=ctx.session_id,
            task_id=task_id,
            tool_use_id=ctx.tool_use_id,
            kind=kind,
            sandbox_id=sandbox_id,
            handle=handle,
            description=label,
            output_path=output_path(task_id),
            deadline_at=deadline_at,
        )
    )
    return TaskRecord(task_id, ctx.tool_use_id, kind, label, time.time())


async def end_session_tasks(
    tasks: BackgroundTasks, workspace: StepWorkspace, session_id: str
) -> tuple[str, ...]:
    """End every running background task of a session that is over (a subagent that
    answered): their rows first (no notification follows), then their process groups in
    ``workspace``. Returns the task ids ended.

    Raises:
        WorkspaceUnavailable, memory_store.DatabaseUnavailable: retry the step.
    """
    ended = await tasks.kill_all(session_id)
    if ended and isinstance(workspace, BackgroundWorkspace):
        for task in ended:
            await workspace.kill(task.tool_use_id)
    return tuple(t.task_id for t in ended)


def task_notification(task: BackgroundTask, tail: str = "") -> str:
    """What the session is told when ``task`` ended (Claude Code's ``<task-notification>``),
    with the last ``TAIL_CHARS`` of its output after it.

    >>> t = BackgroundTask("s", "b1", "toolu_1", "bash", "x", "{}", "sleep 1", "/w/b1.output",
    ...                    state="completed", exit_code=0)
    >>> print(task_notification(t))
    <task-notification>
    <task-id>b1</task-id>
    <tool-use-id>toolu_1</tool-use-id>
    <output-file>/w/b1.output</output-file>
    <status>completed</status>
    <summary>Background command "sleep 1" completed (exit code 0)</summary>
    </task-notification>
    Read the output file to retrieve the result: /w/b1.output
    """
    label = html.escape(task.description, quote=False)
    if task.kind == "monitor":
        return monitor_ended(task, tail)
    if task.state == "completed":
        status, summary = "completed", f'Background command "{label}" completed (exit code 0)'
    elif task.state == "lost":
        status = "failed"
        summary = (
            f'Background command "{label}" was lost: its sandbox stopped before the command ended '
            "(the files it wrote may be gone too)"
        )
    elif task.state == "killed":
        status, summary = "killed", f'Background command "{label}" was stopped'
    else:
        code = "unknown" if task.exit_code is None else str(task.exit_code)
        status, summary = "failed", f'Background command "{label}" failed with exit code {code}'
    lines = _notification(task, status, summary)
    if task.state != "lost":
        lines.append(f"Read the output file to retrieve the result: {task.output_path}")
    tail = tail[-TAIL_CHARS:].strip("\n")
    if tail:
        lines += ["Last lines of its output:", tail]
    return "\n".join(lines)


def monitor_ended(task: BackgroundTask, last_lines: str = "") -> str:
    """What the session is told when a monitor ended (Claude Code 2.1.336's words,
    captured): its stream ended (with the lines not delivered yet as its last event), its
    command failed (with the exit code), it was stopped or lost, or its timeout passed
    (an event: ``expired_text``, its lifetime from the task's start and deadline).

    >>> t = BackgroundTask("s", "b1", "toolu_1", "monitor", "x", "{}", "short", "/w/b1.output",
    ...                    state="completed", exit_code=0)
    >>> print(monitor_ended(t, "one\\ntwo"))
    <task-notification>
    <task-id>b1</task-id>
    <tool-use-id>toolu_1</tool-use-id>
    <output-file>/w/b1.output</output-file>
    <status>completed</status>
    <summary>Monitor "short" stream ended</summary>
    <event>one
    two</event>
    </task-notification>
    """
    label = html.escape(task.description, quote=False)
    if task.state == "expired":
        timeout_ms = MONITOR_DEFAULT_TIMEOUT_MS
        if task.deadline_at is not None and task.started_at is not None:
            timeout_ms = round((task.deadline_at - task.started_at).total_seconds()) * 1000
        return monitor_event(task, expired_text(timeout_ms, task.delivered_bytes > 0))
    if task.state == "completed":
        status, summary = "completed", f'Monitor "{label}" stream ended'
    elif task.state == "lost":
        status = "failed"
        summary = f'Monitor "{label}" was lost: its sandbox stopped before the command ended'
    elif task.state == "killed":
        status, summary = "killed", f'Monitor "{label}" was stopped'
    else:
        code = "unknown" if task.exit_code is None else str(task.exit_code)
        status, summary = "failed", f'Monitor "{label}" script failed (exit {code})'
    last = last_lines.strip("\n") if task.state in ("completed", "failed") else ""
    return "\n".join(_notification(task, status, summary, event=last))


def _notification(task: BackgroundTask, status: str, summary: str, event: str = "") -> list[str]:
    """The lines of a ``<task-notification>`` that says ``task`` ended (with its last
    ``event`` when given: a monitor's lines not delivered yet)."""
    lines = [
        "<task-notification>",
        f"<task-id>{task.task_id}</task-id>",
        f"<tool-use-id>{task.tool_use_id}</tool-use-id>",
        f"<output-file>{task.output_path}</output-file>",
        f"<status>{status}</status>",
        f"<summary>{summary}</summary>",
    ]
    return [*lines, *([f"<event>{event}</event>"] if event else []), "</task-notification>"]


def notified_task_id(text: str) -> str | None:
    """The ``<task-id>`` of a ``task_notification`` text, or None.

    >>> notified_task_id("<task-notification>\\n<task-id>b1</task-id>\\n")
    'b1'
    """
    start = text.find("<task-id>")
    end = text.find("</task-id>", start)
    if not text.startswith("<task-notification>") or start < 0 or end < 0:
        return None
    return text[start + len("<task-id>") : end]


def notified_status(text: str) -> str | None:
    """The state a ``task_notification`` reports (``completed``, ``failed``, …;
    ``expired`` for a monitor that timed out), or None for a monitor's event (the task
    goes on)."""
    if MONITOR_EXPIRED in text:
        return "expired"
    start = text.find("<status>")
    end = text.find("</status>", start)
    if start < 0 or end < 0:
        return None
    return text[start + len("<status>") : end]


# ----- Monitor -------------------------------------------------------------------------

MONITOR_DEFAULT_TIMEOUT_MS = 300_000
MONITOR_MIN_TIMEOUT_MS = 1_000
MONITOR_MAX_TIMEOUT_MS = 3_600_000
"""Claude Code 2.1.336's Monitor ``timeout_ms``: default 5 minutes, 1 s to 1 h (its schema)."""
MONITOR_EXPIRED = "[Monitor expired after "
"""How a monitor's expiry event begins (``expired_text``)."""
MAX_EVENT_LINES = 100
MAX_EVENT_CHARS = 8_000
MAX_EVENT_LINE_CHARS = 2_000
"""A longer line is cut (ending ``…``), so one huge line cannot hide the lines after it."""


def monitor_duration(ms: int) -> str:
    """A monitor's lifetime as Claude Code writes it ("expires in 5m", "after 1s"): whole
    minutes as ``Nm``, otherwise whole seconds, rounded down.

    >>> monitor_duration(300_000), monitor_duration(1_500), monitor_duration(90_000)
    ('5m', '1s', '90s')
    """
    seconds = max(1, ms // 1000)
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


def expired_text(timeout_ms: int, delivered: bool) -> str:
    """The event a monitor gets when its timeout passes (Claude Code 2.1.336's words when
    it delivered nothing; with events delivered, the same without the filter advice).

    >>> expired_text(1500, delivered=False)  # doctest: +ELLIPSIS
    '[Monitor expired after 1s with no events delivered. Re-arm it if you still need ...]'
    """
    after = f"{MONITOR_EXPIRED}{monitor_duration(timeout_ms)}"
    if delivered:
        return f"{after}. Re-arm it if you still need the watch.]"
    return (
        f"{after} with no events delivered. Re-arm it if you still need the watch \u2014 and "
        "widen the filter if silence was unexpected.]"
    )


def monitor_event(task: BackgroundTask, lines: str) -> str:
    """One delivery of a monitor's new output lines (Claude Code's monitor event).

    >>> t = BackgroundTask("s", "b1", "toolu_1", "monitor", "x", "{}", "errors", "/w/b1.output")
    >>> print(monitor_event(t, "ERROR 1\\nERROR 2"))
    <task-notification>
    <task-id>b1</task-id>
    <summary>Monitor event: "errors"</summary>
    <event>ERROR 1
    ERROR 2</event>
    </task-notification>
    """
    label = html.escape(task.description, quote=False)
    return "\n".join(
        (
            "<task-notification>",
            f"<task-id>{task.task_id}</task-id>",
            f'<summary>Monitor event: "{label}"</summary>',
            f"<event>{lines}</event>",
            "</task-notification>",
        )
    )


def event_lines(data: bytes, path: str) -> str:
    """The complete lines of a batch of monitor output, bounded (the rest is counted and
    left in the output file).

    >>> event_lines(b"a\\nb\\n", "/w/x.output")
    'a\\nb'
    >>> event_lines(b"x" * 5000 + b"\\nok\\n", "/w/x.output").endswith("…\\nok")
    True
    """
    lines = data.decode("utf-8", "replace").splitlines()
    kept, size = [], 0
    for whole in lines[:MAX_EVENT_LINES]:
        line = whole if len(whole) <= MAX_EVENT_LINE_CHARS else whole[:MAX_EVENT_LINE_CHARS] + "…"
        if size + len(line) > MAX_EVENT_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(lines):
        kept.append(f"[… {len(lines) - len(kept)} more lines in {path}]")
    return "\n".join(kept)


class WebSocketSource(BaseModel):
    """Monitor's ``ws`` (Claude Code's schema; Warroom's sandbox has no WebSocket watch)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str
    protocols: list[str] | None = None


class MonitorInput(BaseModel):
    """Monitor's parameters (Claude Code 2.1.336's: ``description``, ``timeout_ms``,
    exactly one of ``command`` and ``ws``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str
    timeout_ms: float | None = None
    command: str | None = Field(default=None, min_length=1)
    ws: WebSocketSource | None = None

    def timeout_ms_or_default(self) -> int:
        """The monitor's lifetime in milliseconds (default 5 minutes)."""
        return int(self.timeout_ms or MONITOR_DEFAULT_TIMEOUT_MS)


def monitor_input_error(p: MonitorInput) -> ToolOutcome | None:
    """Claude Code's errors for a Monitor input its schema refuses, or None.

    >>> print(monitor_input_error(MonitorInput(description="d", timeout_ms=10, command="x"))
    ...       .content)  # doctest: +ELLIPSIS
    <tool_use_error>InputValidationError: [
      {
        "origin": "number",
        "code": "too_small",
        "minimum": 1000,
    ...
    """
    if (p.command is None) == (p.ws is None):
        issue: dict[str, object] = {
            "code": "custom",
            "path": [],
            "message": "exactly one of command or ws",
        }
        return schema_error(issue)
    if p.timeout_ms is not None and p.timeout_ms < MONITOR_MIN_TIMEOUT_MS:
        issue = {"origin": "number", "code": "too_small", "minimum": MONITOR_MIN_TIMEOUT_MS}
        issue |= {"inclusive": True, "path": ["timeout_ms"]}
        issue["message"] = f"Too small: expected number to be >={MONITOR_MIN_TIMEOUT_MS}"
        return schema_error(issue)
    if p.timeout_ms is not None and p.timeout_ms > MONITOR_MAX_TIMEOUT_MS:
        issue = {"origin": "number", "code": "too_big", "maximum": MONITOR_MAX_TIMEOUT_MS}
        issue |= {"inclusive": True, "path": ["timeout_ms"]}
        issue["message"] = f"Too big: expected number to be <={MONITOR_MAX_TIMEOUT_MS}"
        return schema_error(issue)
    return None


def monitor_started_text(task_id: str, timeout_ms: int) -> str:
    """Monitor's result (Claude Code 2.1.336's words, captured)."""
    return (
        f"Monitor started (task {task_id}, expires in {monitor_duration(timeout_ms)} unless "
        "the source ends first; you get one notice at expiry \u2014 re-arm if you still need "
        "the watch). You will be notified on each event. Keep working \u2014 do not poll or "
        "sleep. Events may arrive while you are waiting for the user \u2014 an event is not "
        "their reply."
    )


async def monitor(p: MonitorInput, ctx: ToolContext) -> ToolOutcome:
    """Guard, then start the command as a monitor: its new output lines reach the session
    as notifications, batched, until it ends, its timeout passes or TaskStop ends it."""
    refused = monitor_input_error(p)
    if refused is not None:
        return refused
    if p.command is None:
        return tool_error(
            "Watching a WebSocket (ws) is not available in Warroom's sandbox: give a "
            "command whose output lines to watch instead (for example a curl or websocat "
            "loop printing one line per message)."
        )
    decision = await asyncio.to_thread(check_bash, p.command)  # CPU-bound: off the loop
    if isinstance(decision, Deny):
        return tool_error(decision.reason)
    timeout_ms = p.timeout_ms_or_default()
    deadline = datetime.now(UTC) + timedelta(milliseconds=timeout_ms)

    def started(task_id: str, path: str) -> str:
        return monitor_started_text(task_id, timeout_ms)

    return await start_in_background(
        ctx, p.command, p.description, kind="monitor", deadline_at=deadline, started=started
    )


MONITOR = ModelTool(
    name="Monitor",
    description=(
        "Watch a command's output without waiting for it: the command (a log tail, a "
        "polling loop printing one line per check) runs in the background in this "
        "session's sandbox, and its new output lines are delivered to you as notifications, "
        "a few seconds' worth at a time, until it exits, its timeout passes, or TaskStop "
        "ends it. Between notifications you may keep working or end your turn. timeout_ms "
        "defaults to 300000 (5 minutes; 1000 to 3600000). Print only lines worth reading "
        "(filter with grep --line-buffered). ws (a WebSocket to watch) is not available in "
        "Warroom's sandbox: watch it with a command instead."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "description": {
                "type": "string",
                "description": "What is watched, in a few words (shown to the team).",
            },
            "timeout_ms": {
                "default": MONITOR_DEFAULT_TIMEOUT_MS,
                "type": "number",
                "minimum": MONITOR_MIN_TIMEOUT_MS,
                "maximum": MONITOR_MAX_TIMEOUT_MS,
                "description": "How long to watch, in milliseconds.",
            },
            "command": {"type": "string", "description": "The command whose output to watch."},
            "ws": {
                "type": "object",
                "properties": {
                    "url": {"type": "string"},
                    "protocols": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["url"],
                "additionalProperties": False,
                "description": "Not available in Warroom (use command).",
            },
        },
        "required": ["description"],  # timeout_ms has its default (Claude Code's too)
        "additionalProperties": False,
    },
    params=MonitorInput,
    runner=monitor,
    recoverer=monitor,  # get-or-start by name: redoing it starts nothing new
)


class TaskStopInput(BaseModel):
    """TaskStop's parameters (``shell_id`` is the older name, still accepted)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    task_id: str | None = Field(default=None, min_length=1)
    shell_id: str | None = Field(default=None, min_length=1)


async def task_stop(p: TaskStopInput, ctx: ToolContext) -> ToolOutcome:
    """End a running background task of this session: its row first (so the watcher
    sends no notification), then its process group."""
    task_id = p.task_id or p.shell_id
    if task_id is None:
        return tool_error("Missing required parameter: task_id")
    if ctx.tasks is None:
        return tool_error(f"No task found with ID: {task_id}")
    task = await ctx.tasks.get(ctx.session_id, task_id)
    if task is None:
        return tool_error(f"No task found with ID: {task_id}")
    stopped = await ctx.tasks.finish(ctx.session_id, task_id, state="killed")
    if stopped is None:
        return tool_error(f"Task {task_id} is not running (status: {task.state})")
    if isinstance(ctx.workspace, BackgroundWorkspace):
        await ctx.workspace.kill(task.tool_use_id)
    return _stopped(stopped, await _command_of(ctx, stopped))


async def recover_task_stop(p: TaskStopInput, ctx: ToolContext) -> ToolOutcome:
    """After a crash mid-call: a task already ended as ``killed`` was this call's doing
    (its process is killed again, harmlessly); otherwise the call is run."""
    task_id = p.task_id or p.shell_id
    task = None
    if task_id is not None and ctx.tasks is not None:
        task = await ctx.tasks.get(ctx.session_id, task_id)
    if task is None or task.state != "killed":
        return await task_stop(p, ctx)
    if isinstance(ctx.workspace, BackgroundWorkspace):
        await ctx.workspace.kill(task.tool_use_id)
    return _stopped(task, await _command_of(ctx, task))


async def _command_of(ctx: ToolContext, task: BackgroundTask) -> str:
    """The task's command as the model wrote it (its description when not kept)."""
    try:
        data = await ctx.workspace.read_file(command_path(task.output_path))
    except (WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused):
        return task.description
    return data.decode(errors="replace")


def _stopped(task: BackgroundTask, command: str) -> ToolOutcome:
    """TaskStop's result: Claude Code 2.1.336's JSON, compact, naming the command."""
    message = {
        "message": f"Successfully stopped task: {task.task_id} ({command})",
        "task_id": task.task_id,
        "task_type": "local_bash",  # a monitor's too (Claude Code 2.1.336, captured)
        "command": command,
    }
    record = TaskRecord(task.task_id, task.tool_use_id, task.kind, task.description, 0.0, "killed")
    return ToolOutcome(json.dumps(message, separators=(",", ":")), task=record)


_TASK_STOP_SCHEMA = {
    "type": "object",
    "properties": {
        "task_id": {"type": "string", "description": "The ID of the background task to stop."},
        "shell_id": {"type": "string", "description": "Deprecated: use task_id."},
    },
    "required": [],
    "additionalProperties": False,
}

TASK_STOP = ModelTool(
    name="TaskStop",
    description=(
        "Stop a background task this session started (a Bash command run with "
        "run_in_background), by the ID its start returned. Its process and everything it "
        "started are killed; no completion notification follows. Output written so far "
        "stays in its output file."
    ),
    input_schema=_TASK_STOP_SCHEMA,
    params=TaskStopInput,
    runner=task_stop,
    recoverer=recover_task_stop,
)

KILL_SHELL = ModelTool(
    name="KillShell",
    description="Older name of TaskStop: stop a background task by its ID (shell_id).",
    input_schema=_TASK_STOP_SCHEMA,
    params=TaskStopInput,
    runner=task_stop,
    recoverer=recover_task_stop,
)
