"""What a committed step shows in the thread's streamed message: Slack stream chunks (pure).

Chunk shapes are slack_sdk 3.48's (``slack_sdk.models.messages.chunk``) and
docs.slack.dev's ("chat.startStream", "chat.appendStream"):

- each tool call is a ``task_update`` whose ``id`` is the ``tool_use`` id: ``in_progress``
  with what it runs, then ``complete`` (or ``error``) with its outcome and time — a later
  update of the same id replaces the card's title and status;
- the TodoWrite list is the plan: a ``plan_update`` titled with its progress, and one
  ``task_update`` per item (``todo-<n>``; ``completed`` is Slack's ``complete``);
- the model's text between tool calls and the harness's notices are ``markdown_text``.

The final answer is not a chunk: it is the stream's last call (``chat.stopStream``
with the answer's blocks), see ``agent_surface``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness import (
    ApprovalRequested,
    Event,
    ModelResponded,
    Notice,
    Todo,
    TodosChanged,
    ToolBlocked,
    ToolFinished,
    ToolIntent,
    ToolUseBlock,
    shown_events,
    summarize_call,
)

Chunk = dict[str, Any]

MAX_TASK_TITLE_CHARS = 250
"""Under the ~256 characters a task title is refused at (measured by other apps' authors)."""
MAX_TASK_TEXT_CHARS = 500
MAX_NOTE_CHARS = 1_500
_TODO_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "complete"}


def approval_chunk(tool_use_id: str, action: str, reason: str) -> Chunk:
    """The task of a call waiting for a person's approval (the request has the buttons)."""
    return _task(
        tool_use_id,
        _cut(f"Waiting for approval: {action}", MAX_TASK_TITLE_CHARS),
        "pending",
        details=reason,
    )


def step_chunks(
    events: Sequence[Event], todos: Sequence[Todo] = (), calls: Sequence[ToolUseBlock] = ()
) -> list[Chunk]:
    """The chunks a committed step's ``events`` add to its turn's stream, in order;
    ``todos`` (the checkpoint's list) is sent as the plan when the step changed it;
    ``calls`` (the tool calls a model step asked for, not yet run) are shown as tasks at
    once, the first running, so a long command is on screen while it runs.

    >>> from harness import ToolIntent
    >>> [chunk] = step_chunks([ToolIntent(tool_use_id="t1", name="Bash", summary="uptime")])
    >>> chunk["id"], chunk["title"], chunk["status"]
    ('t1', 'Running `uptime`', 'in_progress')
    """
    chunks: list[Chunk] = []
    for event in shown_events(events):
        if isinstance(event, ModelResponded) and event.tool_calls:
            said = event.text.strip()
            if said:
                chunks.append(_markdown(_cut(said, MAX_NOTE_CHARS) + "\n\n"))
            for i, call in enumerate(calls):
                status = "in_progress" if i == 0 else "pending"
                chunks.append(_task(call.id, _call_title(call), status))
        elif isinstance(event, ToolIntent):
            title = _doing(event.name, event.summary, event.detail)
            chunks.append(_task(event.tool_use_id, title, "in_progress"))
        elif isinstance(event, ToolFinished):
            chunks.append(_finished(event))
        elif isinstance(event, ToolBlocked):
            title = f"Blocked: {event.name}"
            chunks.append(_task(event.tool_use_id, title, "error", output=event.reason))
        elif isinstance(event, ApprovalRequested):
            chunks.append(approval_chunk(event.tool_use_id, event.action, event.reason))
        elif isinstance(event, Notice):
            chunks.append(_markdown(f"_{_cut(event.text, MAX_NOTE_CHARS)}_\n\n"))
        elif isinstance(event, TodosChanged):
            chunks.extend(plan_chunks(todos))
    return chunks


def plan_chunks(todos: Sequence[Todo]) -> list[Chunk]:
    """The TodoWrite list as the plan: its title (progress), then one task per item.

    >>> from harness import Todo, TodoStatus
    >>> [c["title"] for c in plan_chunks([Todo("Read logs", TodoStatus.COMPLETED, "Reading")])]
    ['Plan · 1/1 done', 'Read logs']
    """
    if not todos:
        return []
    done = sum(1 for t in todos if t.status.value == "completed")
    chunks: list[Chunk] = [{"type": "plan_update", "title": f"Plan · {done}/{len(todos)} done"}]
    for i, todo in enumerate(todos):
        status = _TODO_STATUS.get(todo.status.value, "pending")
        chunks.append(_task(f"todo-{i}", _cut(todo.content, MAX_TASK_TITLE_CHARS), status))
    return chunks


def _call_title(call: ToolUseBlock) -> str:
    """A call's task title from its input, as its intent and result will title it (one
    label from start to end: the harness's ``summarize_call``)."""
    command = call.input.get("command") if call.name == "Bash" else None
    detail = command if isinstance(command, str) else ""
    return _doing(call.name, summarize_call(call.name, call.input), detail)


def _doing(name: str, summary: str, command: str = "") -> str:
    """A task's title: a Bash call's description when it has one, else ``Running
    `<command>```; another call's summary. The harness's summaries start with the
    tool's name (``Bash: uptime``): it goes.

    >>> _doing("Bash", "Bash: List the pods", "kubectl get pods")
    'List the pods'
    >>> _doing("Bash", "Bash: kubectl get pods", "kubectl get pods")
    'Running `kubectl get pods`'
    """
    summary = summary.removeprefix(f"{name}: ")
    if name != "Bash":
        return _cut(summary or name, MAX_TASK_TITLE_CHARS)
    plain = summarize_call(name, {"command": command}).removeprefix(f"{name}: ")
    described = bool(command) and summary != plain
    return _cut(summary if described else f"Running `{summary}`", MAX_TASK_TITLE_CHARS)


def _finished(event: ToolFinished) -> Chunk:
    seconds = f"{event.elapsed_ms / 1000:.1f} s"
    head = event.output_head.strip()
    outcome = f"{'failed' if event.is_error else 'done'} in {seconds}"
    output = f"{outcome}\n{_cut(head, MAX_TASK_TEXT_CHARS)}" if head else outcome
    status = "error" if event.is_error else "complete"
    title = _doing(event.name, event.summary, event.detail)
    return _task(event.tool_use_id, title, status, output=output)


def _task(task_id: str, title: str, status: str, **texts: str) -> Chunk:
    chunk: Chunk = {
        "type": "task_update",
        "id": task_id,
        "title": title or "Step",
        "status": status,
    }
    chunk.update({k: _cut(v, MAX_TASK_TEXT_CHARS) for k, v in texts.items() if v})
    return chunk


def _markdown(text: str) -> Chunk:
    return {"type": "markdown_text", "text": text}


def _cut(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
