"""What a step did, as typed events for the session's append-only log.

The durable layer stores ``kind`` and ``payload()`` (JSON); the bot renders
progress from them. Events describe; the checkpoint is the state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, ClassVar

from harness.model.messages import Usage


@dataclass(frozen=True)
class Event:
    """Base class: ``kind`` names the event in the log."""

    kind: ClassVar[str] = "event"

    def payload(self) -> dict[str, Any]:
        """The event's fields as a JSON-able dict."""
        return asdict(self)

    def to_json(self) -> str:
        """``payload()`` as compact JSON with sorted keys."""
        return json.dumps(self.payload(), sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class InputGiven(Event):
    """User texts (the request, steering replies) handed to the model."""

    kind: ClassVar[str] = "user_message"
    texts: tuple[str, ...]


@dataclass(frozen=True)
class ModelResponded(Event):
    """A committed model response; ``thinking`` is its thinking summary (shown as progress)."""

    kind: ClassVar[str] = "model_response"
    stop_reason: str
    text: str
    tool_calls: tuple[str, ...]
    usage: Usage
    attempts: int
    thinking: str = ""


@dataclass(frozen=True)
class ToolIntent(Event):
    """A tool call is about to run (committed before the side effect); ``detail`` is what
    it acts on, as in ``ToolFinished`` (what a stop cut short is named by it)."""

    kind: ClassVar[str] = "tool_intent"
    tool_use_id: str
    name: str
    summary: str
    detail: str = ""


@dataclass(frozen=True)
class ToolFinished(Event):
    """A tool call's result, recorded after it ran; ``detail`` is what the call acted on
    (a Bash command, a file path, an MCP call's arguments: ``toolbox.call_detail``);
    ``elapsed_ms`` how long the call ran (0 when not measured: logs of older versions);
    ``ended_at`` (ISO 8601, UTC) when it really ended, set when that is not when it was
    recorded: an outcome recovered after its worker died, found in the sandbox's record
    (then ``elapsed_ms`` is the command's own time, from that record, too)."""

    kind: ClassVar[str] = "tool_result"
    tool_use_id: str
    name: str
    summary: str
    is_error: bool
    output_chars: int
    output_head: str
    detail: str = ""
    elapsed_ms: int = 0
    ended_at: str = ""


@dataclass(frozen=True)
class ToolUnknown(Event):
    """A tool call whose outcome could not be recovered after a crash."""

    kind: ClassVar[str] = "tool_unknown"
    tool_use_id: str
    name: str
    summary: str
    detail: str = ""


@dataclass(frozen=True)
class TodosChanged(Event):
    """The TodoWrite list changed: ``todos`` is (status, content, active_form) triples."""

    kind: ClassVar[str] = "todos"
    todos: tuple[tuple[str, str, str], ...]


class NoticeTopic(StrEnum):
    """What a ``Notice`` is about (its ``topic`` in the log and in metrics)."""

    SANDBOX_REPLACED = "sandbox_replaced"  # the sandbox died and a new one took its place
    FILES = "files"  # shared files changed or appeared since the model last saw them
    INPUT = "input"  # a user message was cut to fit
    COMPACTION = "compaction"  # the transcript was summarised
    REFUSAL = "refusal"  # stop_reason ``refusal``: the turn is withheld
    CONTEXT_WINDOW_EXCEEDED = "model_context_window_exceeded"  # stop_reason of that name
    MAX_TOKENS = "max_tokens"  # the reply was cut at max_tokens
    LIMIT = "limit"  # a step, token or tool-time limit was reached
    MODEL_REJECTED = "model_rejected"  # the API refused the request for good
    MCP = "mcp"  # an MCP server came back or went away


@dataclass(frozen=True)
class Notice(Event):
    """Something the model (and the thread) is told: sandbox replaced, limit, …"""

    kind: ClassVar[str] = "notice"
    topic: NoticeTopic
    text: str


@dataclass(frozen=True)
class Answered(Event):
    """The model ended its turn: ``text`` is the Markdown answer to post."""

    kind: ClassVar[str] = "answer"
    text: str
    best_effort: bool = False


@dataclass(frozen=True)
class ApprovalRequested(Event):
    """A tool call needs a human's approval before it runs (docs/architecture.md §13):
    ``action`` is exactly what would run, ``reason`` the policy's, ``expires_at`` ISO UTC."""

    kind: ClassVar[str] = "approval_requested"
    tool_use_id: str
    name: str
    action: str
    reason: str
    input_sha256: str
    expires_at: str


@dataclass(frozen=True)
class ApprovalDecided(Event):
    """An approval was settled: ``status`` approved, denied, expired or stopped, by the
    Slack user ``decided_by`` ("" for an expiry) at ``decided_at`` (ISO UTC)."""

    kind: ClassVar[str] = "approval_decided"
    tool_use_id: str
    name: str
    action: str
    status: str
    decided_by: str
    decided_at: str


@dataclass(frozen=True)
class ToolBlocked(Event):
    """A tool call the approval policy blocks: it did not run (``reason`` says why)."""

    kind: ClassVar[str] = "tool_blocked"
    tool_use_id: str
    name: str
    detail: str
    reason: str


def shown_events(events: Sequence[Event]) -> list[Event]:
    """``events`` to show a person, without a notice the step's answer already says: a
    refusal, a rejected request or a withheld turn ends with that text as its answer, so it
    is shown once (the chat, Slack's streamed steps).

    >>> said = "The model API refused this request."
    >>> shown_events([Notice(NoticeTopic.MODEL_REJECTED, said), Answered(said)])
    [Answered(text='The model API refused this request.', best_effort=False)]
    """
    answers = [e.text for e in events if isinstance(e, Answered)]
    return [e for e in events if not (isinstance(e, Notice) and _said_in(e.text, answers))]


def _said_in(text: str, answers: Sequence[str]) -> bool:
    said = text.strip()
    return bool(said) and any(said in answer for answer in answers)
