"""A session's checkpoint: everything the next step needs, as one JSON-able value.

The durable layer stores it with every committed step; the harness keeps no state
anywhere else. ``to_json``/``from_json`` round-trip exactly. The transcript
(``messages``) grows with the session while the rest stays small, so the durable
layer stores them apart: ``state_json`` is everything but the messages, and
``from_json(state, messages=…)`` puts them back (each message through
``Message.to_json``/``from_json``, the one serialisation point).

>>> cp = Checkpoint("s1", "T1", "C1", Requester("U1"))
>>> Checkpoint.from_json(cp.to_json()) == cp
True
>>> Checkpoint.from_json(cp.state_json(), messages=cp.messages) == cp
True
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from harness.approvals.pending import PendingApproval
from harness.errors import InvalidMessage
from harness.model.messages import (
    Message,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    block_from_dict,
    block_to_dict,
    dumps,
)
from harness.model.transcript import Transcript


class TodoStatus(StrEnum):
    """Claude Code's TodoWrite statuses."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


@dataclass(frozen=True)
class Todo:
    """One TodoWrite item: ``content`` (imperative), ``active_form`` (present continuous)."""

    content: str
    status: TodoStatus
    active_form: str


@dataclass(frozen=True)
class ReadRecord:
    """What this session has seen of one file.

    ``version`` is the store version last fully read or written by this session
    (0 = the file did not exist; for a sandbox file, a fingerprint of its content);
    ``full`` is False after a partial read (offset/limit) and after compaction;
    ``notified_version`` is the latest version a change notice already told the model
    about (each change is told once).
    """

    version: int
    full: bool
    notified_version: int = 0


@dataclass(frozen=True)
class TaskRecord:
    """A background process this session started (Bash ``run_in_background``).

    ``task_id`` is the short id the model uses; ``tool_use_id`` the call that started it
    (the sandbox's process name); ``started_at`` seconds since the epoch; ``status``
    ``running`` until the session hears how it ended (``completed``, ``failed``,
    ``killed``, ``lost``). The database's ``background_tasks`` row is the watcher's
    truth; this record is what the session knows and shows.
    """

    task_id: str
    tool_use_id: str
    kind: str
    description: str
    started_at: float
    status: str = "running"

    @property
    def running(self) -> bool:
        """Whether the session has not yet heard that it ended."""
        return self.status == "running"


@dataclass(frozen=True)
class AgentRecord:
    """A subagent this session started (``Agent``): a child session of its own.

    ``tool_use_id`` is the ``Agent`` call (its ``tool_result`` is the child's answer,
    unless ``background``: then the call returned at once and the answer comes as a
    notification); ``session_id`` the child's; ``status`` ``running`` until the answer
    (or the child's failure) reached this session.
    """

    tool_use_id: str
    session_id: str
    description: str
    background: bool
    started_at: float
    status: str = "running"

    @property
    def running(self) -> bool:
        """Whether its answer has not reached this session yet."""
        return self.status == "running"


@dataclass(frozen=True)
class ParentLink:
    """What makes a session a subagent: the parent session and the ``Agent`` call that
    started it (``background``: the parent does not wait for it; ``description``: the
    call's few words)."""

    session_id: str
    tool_use_id: str
    background: bool = False
    description: str = ""


@dataclass(frozen=True)
class ScheduledWakeup:
    """A ``ScheduleWakeup`` the session waits for: at ``due_at`` (seconds since the
    epoch) the session is resumed with ``prompt``; ``reason`` is shown to the team."""

    due_at: float
    reason: str
    prompt: str


@dataclass(frozen=True)
class Requester:
    """Who started the session (shown to the model in the frozen first message)."""

    user_id: str
    display_name: str = ""


@dataclass(frozen=True)
class Inbound:
    """An input waiting to be given to the model: a user's message (the request, or
    steering; ``kind`` ``user``) or one the system recorded (``wake``, ``notification``,
    ``approval``…: ``memory_store.SessionStore.notify`` and timed wake-ups), which reaches
    the model as its bare text."""

    user_id: str
    text: str
    display_name: str = ""
    kind: str = "user"

    @property
    def from_user(self) -> bool:
        """Whether a person wrote it (else the system recorded it)."""
        return self.kind == "user"

    def user_label(self) -> str:
        """How the model sees the author: the display name, else a Slack mention."""
        return self.display_name or f"<@{self.user_id}>"


@dataclass(frozen=True)
class Checkpoint:
    """The session's state between steps.

    Attributes:
        session_id: stable id of the session (also the store's ``Origin.session_id``).
        org_id: ``enterprise_id or team_id`` (Slack) — the tenant.
        channel_id: Slack channel id: the incident for ``/incident/``.
        requester: who started it.
        messages: the transcript sent to the model, oldest first; only appended to,
            except by compaction. A tuple, or a ``Transcript`` (read from the store,
            decoded where read): add to it with ``transcript.appended``.
        pending_input: user messages not yet given to the model.
        pending_results: ``tool_result`` blocks gathered for the last assistant
            message's ``tool_use`` blocks, in call order.
        in_flight: the ``tool_use`` id whose intent is committed and result is not:
            non-None after a crash mid-tool.
        read_state: path as the model sees it (``/memory/x.md``, ``/workspace/a``) →
            ReadRecord.
        known_files: virtual path → version of every shared file the model was told
            exists (first-message indexes, later "new file" notices).
        notices: texts to tell the model at the next model step (sandbox replaced, …).
        todos: the TodoWrite list.
        sandbox: the sandbox handle as sandbox_client serialises it, or None.
        steps: steps taken (model + tool); usage: summed model usage.
        tool_time_s: wall time spent running tools, in seconds, summed.
        last_input_tokens: prompt size of the last model call (for compaction).
        compactions: how many times the transcript was compacted.
        last_call: (tool name, canonical input JSON, repeats in a row) for loop detection.
        answer: the final answer of the turn, set when the model ends its turn and
            cleared by the durable layer once it is posted.
        best_effort: the answer was forced by a step or token limit.
        answers: how many answers were posted (``answer_posted``): with the message count,
            what keys an answer's post (``answer_key``).
        turns: how many times user input was handed to the model (the thread's
            status message is one per turn).
        turn_base: (steps, tokens, tool seconds) when the current turn began: limits
            apply per turn, so a reply after a best-effort answer gets a fresh budget.
        mcp_servers: the MCP servers whose tools the last model call offered, sorted;
            None before the first model call (``mcp_reminder``).
        approval: the approval of the next tool call: pending while the session waits for
            a human (docs/architecture.md §13), then how it was settled; None: none asked.
        tasks: the background processes this session started, oldest first.
        wakeup: the pending ``ScheduleWakeup`` (one at a time: a new one replaces it),
            or None.
        agents: the subagents this session started, oldest first.
        parent: set when this session is a subagent (its answer goes to the parent,
            not to Slack; it may not start subagents of its own).
        cwd: the sandbox working directory Bash calls start in, and relative paths are
            taken from (a ``cd`` persists between calls, as in Claude Code).
        follow_ups: text blocks to give after the pending results (``ToolOutcome.follow_up``).
        title: the incident's name for people, when its first input is not it (an alert's
            title: the alert's first input is the prompt built around it); "": the first
            user message names it.
    """

    session_id: str
    org_id: str
    channel_id: str
    requester: Requester
    messages: Sequence[Message] = ()
    pending_input: tuple[Inbound, ...] = ()
    pending_results: tuple[ToolResultBlock, ...] = ()
    in_flight: str | None = None
    read_state: Mapping[str, ReadRecord] = field(default_factory=dict)
    known_files: Mapping[str, int] = field(default_factory=dict)
    notices: tuple[str, ...] = ()
    todos: tuple[Todo, ...] = ()
    sandbox: str | None = None
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    tool_time_s: float = 0.0
    last_input_tokens: int = 0
    compactions: int = 0
    last_call: tuple[str, str, int] | None = None
    answer: str | None = None
    best_effort: bool = False
    answers: int = 0
    turns: int = 0
    turn_base: tuple[int, int, float] = (0, 0, 0.0)
    mcp_servers: tuple[str, ...] | None = None
    approval: PendingApproval | None = None
    tasks: tuple[TaskRecord, ...] = ()
    wakeup: ScheduledWakeup | None = None
    agents: tuple[AgentRecord, ...] = ()
    parent: ParentLink | None = None
    cwd: str = "/workspace"
    follow_ups: tuple[str, ...] = ()
    title: str = ""

    def awaited_calls(self) -> frozenset[str]:
        """The ``Agent`` calls whose answer this session waits for (no result yet)."""
        return frozenset(a.tool_use_id for a in self.agents if a.running and not a.background)

    def running_tasks(self) -> tuple[TaskRecord, ...]:
        """The background processes not yet known to have ended."""
        return tuple(t for t in self.tasks if t.running)

    def with_task(self, task: TaskRecord) -> Checkpoint:
        """A copy with ``task`` recorded (replacing the record of the same ``task_id``)."""
        others = tuple(t for t in self.tasks if t.task_id != task.task_id)
        if len(others) == len(self.tasks):
            return replace(self, tasks=(*self.tasks, task))
        return replace(
            self, tasks=tuple(task if t.task_id == task.task_id else t for t in self.tasks)
        )

    def unanswered_calls(self) -> tuple[ToolUseBlock, ...]:
        """The last assistant message's ``tool_use`` blocks without a pending result, in
        call order (empty when the last message is not the assistant's)."""
        if not self.messages or self.messages[-1].role != "assistant":
            return ()
        done = {r.tool_use_id for r in self.pending_results}
        return tuple(
            b for b in self.messages[-1].content if isinstance(b, ToolUseBlock) and b.id not in done
        )

    def runnable_calls(self) -> tuple[ToolUseBlock, ...]:
        """``unanswered_calls`` less those waiting for a subagent's answer."""
        awaited = self.awaited_calls()
        return tuple(b for b in self.unanswered_calls() if b.id not in awaited)

    def next_call(self) -> ToolUseBlock | None:
        """The tool call the next tool step runs, if any (the one place that decides it).

        >>> Checkpoint("s1", "T1", "C1", Requester("U1")).next_call() is None
        True
        """
        calls = self.runnable_calls()
        return calls[0] if calls else None

    def with_read(self, path: str, record: ReadRecord) -> Checkpoint:
        """A copy with ``read_state[path]`` set."""
        return replace(self, read_state={**self.read_state, path: record})

    def to_json(self) -> str:
        """Serialise (compact JSON, fixed key order), messages included."""
        return dumps(_encode(self))

    @staticmethod
    def initial_json(session_id: str, org_id: str, channel_id: str, requester: Requester) -> str:
        """``Checkpoint(session_id, org_id, channel_id, requester).to_json()``, the state of
        a new session, without building the checkpoint: the fields after the requester
        are all defaults, so their JSON is encoded once and kept (a new Slack thread is
        opened before the ack, ``bench/slack_ack.py``).

        >>> new = Checkpoint("s1", "T1", "C1", Requester("U1", "Ada"))
        >>> Checkpoint.initial_json("s1", "T1", "C1", Requester("U1", "Ada")) == new.to_json()
        True
        """
        head = dumps(
            {
                "v": 1,
                "session_id": session_id,
                "org_id": org_id,
                "channel_id": channel_id,
                "requester": [requester.user_id, requester.display_name],
                "messages": [],
            }
        )
        return f"{head[:-1]},{_initial_tail()}"

    def state_json(self) -> str:
        """Serialise all but ``messages`` (stored apart, see the module docstring).

        Also holds ``in_flight_tool``, the name of the ``in_flight`` call (see
        ``in_flight_tool``), for readers that have the state but not the transcript.
        """
        state = _encode(self, with_messages=False)
        state["in_flight_tool"] = _in_flight_name(self)
        return dumps(state)

    @classmethod
    def from_json(cls, text: str, *, messages: Sequence[Message] = ()) -> Checkpoint:
        """Inverse of ``to_json``, and of ``state_json`` given the ``messages``.

        A JSON that holds messages (``to_json``'s) keeps its own: ``messages`` is then
        ignored. A ``Transcript`` is kept as it is (nothing decoded), any other sequence
        becomes a tuple.

        Raises:
            InvalidMessage: malformed JSON or fields.
        """
        try:
            data = json.loads(text)
            return _decode(data, messages if isinstance(messages, Transcript) else tuple(messages))
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidMessage(f"malformed checkpoint: {exc}") from exc


def holds_messages(text: str) -> bool:
    """Whether a checkpoint JSON carries its transcript (``to_json``, not ``state_json``).

    Raises:
        InvalidMessage: not a JSON object.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidMessage(f"malformed checkpoint: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidMessage("a checkpoint must be a JSON object")
    return "messages" in data


def in_flight_tool(text: str) -> str | None:
    """The tool name of the call in flight in a ``state_json`` or ``to_json`` checkpoint.

    Raises:
        InvalidMessage: malformed JSON or fields.
    """
    cp = Checkpoint.from_json(text)
    if cp.messages:
        return _in_flight_name(cp)
    name = json.loads(text).get("in_flight_tool")
    return name if isinstance(name, str) else None


def _in_flight_name(cp: Checkpoint) -> str | None:
    last = cp.messages[-1].content if cp.messages and cp.in_flight else ()
    return next(
        (b.name for b in last if isinstance(b, ToolUseBlock) and b.id == cp.in_flight), None
    )


@functools.cache
def _initial_tail() -> str:
    """The JSON of a new checkpoint's fields after ``messages``, without the opening
    brace (``Checkpoint.initial_json``)."""
    encoded = _encode(Checkpoint("", "", "", Requester("")))
    head = ("v", "session_id", "org_id", "channel_id", "requester", "messages")
    return dumps({key: value for key, value in encoded.items() if key not in head})[1:]


def _encode(cp: Checkpoint, *, with_messages: bool = True) -> dict[str, Any]:
    head: dict[str, Any] = {
        "v": 1 if with_messages else 2,
        "session_id": cp.session_id,
        "org_id": cp.org_id,
        "channel_id": cp.channel_id,
        "requester": [cp.requester.user_id, cp.requester.display_name],
    }
    if with_messages:
        head["messages"] = [m.to_dict() for m in cp.messages]
    return head | {
        "pending_input": [_inbound(i) for i in cp.pending_input],
        "pending_results": [block_to_dict(b) for b in cp.pending_results],
        "in_flight": cp.in_flight,
        "read_state": {
            p: [r.version, r.full, r.notified_version] for p, r in sorted(cp.read_state.items())
        },
        "known_files": dict(sorted(cp.known_files.items())),
        "notices": list(cp.notices),
        "todos": [[t.content, t.status.value, t.active_form] for t in cp.todos],
        "sandbox": cp.sandbox,
        "steps": cp.steps,
        "usage": cp.usage.to_dict(),
        "tool_time_s": cp.tool_time_s,
        "last_input_tokens": cp.last_input_tokens,
        "compactions": cp.compactions,
        "last_call": list(cp.last_call) if cp.last_call else None,
        "answer": cp.answer,
        "best_effort": cp.best_effort,
        "answers": cp.answers,
        "turns": cp.turns,
        "turn_base": list(cp.turn_base),
        "mcp_servers": None if cp.mcp_servers is None else list(cp.mcp_servers),
        "approval": None if cp.approval is None else cp.approval.to_dict(),
        "tasks": [
            [t.task_id, t.tool_use_id, t.kind, t.description, t.started_at, t.status]
            for t in cp.tasks
        ],
        "wakeup": None
        if cp.wakeup is None
        else [cp.wakeup.due_at, cp.wakeup.reason, cp.wakeup.prompt],
        "agents": [
            [a.tool_use_id, a.session_id, a.description, a.background, a.started_at, a.status]
            for a in cp.agents
        ],
        "parent": None
        if cp.parent is None
        else [
            cp.parent.session_id,
            cp.parent.tool_use_id,
            cp.parent.background,
            cp.parent.description,
        ],
        "cwd": cp.cwd,
        "follow_ups": list(cp.follow_ups),
        "title": cp.title,
    }


def _inbound(item: Inbound) -> list[str]:
    fields = [item.user_id, item.text, item.display_name]
    return fields if item.from_user else [*fields, item.kind]


def _decode(d: dict[str, Any], messages: Sequence[Message]) -> Checkpoint:
    results = tuple(block_from_dict(b) for b in d["pending_results"])
    if not all(isinstance(b, ToolResultBlock) for b in results):
        raise ValueError("pending_results must hold tool_result blocks")
    last = d["last_call"]
    return Checkpoint(
        session_id=d["session_id"],
        org_id=d["org_id"],
        channel_id=d["channel_id"],
        requester=Requester(*d["requester"]),
        messages=tuple(Message.from_dict(m) for m in d["messages"])
        if "messages" in d
        else messages,
        pending_input=tuple(Inbound(*i) for i in d["pending_input"]),
        pending_results=results,  # type: ignore[arg-type]
        in_flight=d["in_flight"],
        read_state={p: ReadRecord(*r) for p, r in d["read_state"].items()},
        known_files={p: int(v) for p, v in d["known_files"].items()},
        notices=tuple(d["notices"]),
        todos=tuple(Todo(c, TodoStatus(s), a) for c, s, a in d["todos"]),
        sandbox=d["sandbox"],
        steps=int(d["steps"]),
        usage=Usage.from_dict(d["usage"]),
        tool_time_s=float(d.get("tool_time_s", 0.0)),
        last_input_tokens=int(d["last_input_tokens"]),
        compactions=int(d["compactions"]),
        last_call=(str(last[0]), str(last[1]), int(last[2])) if last else None,
        answer=d["answer"],
        best_effort=bool(d["best_effort"]),
        answers=int(d.get("answers", 0)),
        turns=int(d["turns"]),
        turn_base=_turn_base(d.get("turn_base")),
        mcp_servers=_names(d.get("mcp_servers")),
        approval=PendingApproval.from_dict(d["approval"]) if d.get("approval") else None,
        tasks=tuple(
            TaskRecord(str(i), str(u), str(k), str(desc), float(at), str(st))
            for i, u, k, desc, at, st in d.get("tasks", ())
        ),
        wakeup=_wakeup(d.get("wakeup")),
        agents=tuple(
            AgentRecord(str(t), str(c), str(desc), bool(bg), float(at), str(st))
            for t, c, desc, bg, at, st in d.get("agents", ())
        ),
        parent=None if d.get("parent") is None else ParentLink(*d["parent"]),
        cwd=str(d.get("cwd", "/workspace")),
        follow_ups=tuple(str(t) for t in d.get("follow_ups", ())),
        title=str(d.get("title", "")),
    )


def _wakeup(raw: Any) -> ScheduledWakeup | None:
    if raw is None:
        return None
    due_at, reason, prompt = raw
    return ScheduledWakeup(float(due_at), str(reason), str(prompt))


def _names(raw: Any) -> tuple[str, ...] | None:
    return None if raw is None else tuple(str(name) for name in raw)


def _turn_base(raw: Any) -> tuple[int, int, float]:
    if not raw:
        return (0, 0, 0.0)
    steps, tokens, tool_s = raw
    return (int(steps), int(tokens), float(tool_s))
