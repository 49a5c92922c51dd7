"""Typed values of durable sessions: keys, claims, outcomes, events, inbox and outbox items.

All are frozen dataclasses. Times are aware UTC ``datetime``s. Checkpoints and event or
post payloads are opaque JSON strings: the harness and the bot own their formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class SessionStatus(StrEnum):
    """Where a session is (docs/architecture.md §5): only ``running`` has a pending step."""

    RUNNING = "running"  # a step is pending or in progress (pending_token is set)
    WAITING = "waiting"  # answered; holds nothing until a reply or ``wait_until``
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class SessionOrigin(StrEnum):
    """Where a session's people talk to it, hence which workers may run its steps."""

    SLACK = "slack"  # a Slack thread: its answers are posted to Slack
    CHAT = "chat"  # ``warroom chat``: its answers are printed by the chat that owns it


class EventKind(StrEnum):
    """Well-known event kinds. ``NewEvent.kind`` accepts any short string; these are the
    ones ``memory_store`` itself writes or that the issue names."""

    USER_MESSAGE = "user_message"
    MODEL_RESPONSE = "model_response"
    TOOL_INTENT = "tool_intent"
    TOOL_RESULT = "tool_result"
    TOOL_UNKNOWN = "tool_unknown"
    POST_INTENT = "post_intent"
    POST_DONE = "post_done"
    NOTICE = "notice"


MAX_KIND_CHARS = 32


@dataclass(frozen=True)
class SessionKey:
    """A session's Slack coordinates: one session per thread.

    ``org_id`` is ``enterprise_id or team_id``; ``thread_ts`` is the thread's root ``ts``.

    Raises:
        ValueError: an empty field.
    """

    org_id: str
    channel_id: str
    thread_ts: str

    def __post_init__(self) -> None:
        if not (self.org_id and self.channel_id and self.thread_ts):
            raise ValueError("org_id, channel_id and thread_ts must not be empty")


@dataclass(frozen=True)
class TokenUsage:
    """Model token counts (Anthropic ``usage``: input, output, cache read, cache write)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class Opened:
    """Outcome of ``open_or_join``: ``token`` is the wake-up to enqueue, or None when a
    step is already pending (it takes the new input at its next boundary) or the
    message was a duplicate."""

    session_id: str
    created: bool
    token: str | None


@dataclass(frozen=True)
class InboxItem:
    """An input waiting for the model; ``position`` counts from 1 per session.

    ``kind`` is ``user`` for a person's message (``user_id`` says who); anything else
    (``wake``, ``notification``, ``approval``…) was recorded by the system, with an empty
    ``user_id`` and ``source_ts`` holding its de-duplication key.
    """

    position: int
    user_id: str
    text: str
    source_ts: str
    created_at: datetime
    kind: str = "user"


@dataclass(frozen=True)
class Claim:
    """The right to run one step, held by ``worker_id`` until ``lease_until``.

    ``epoch`` fences every write made with this claim. ``inbox`` holds the unconsumed
    inbox items, oldest first; ``inbox_upto`` is the last inbox position at claim time
    (the most ``commit`` may mark consumed). ``crash_count`` is how many earlier claims of this same
    token ended without a commit (0 on a first attempt). ``last_seq`` is the seq of
    the last event already in the log. ``checkpoint`` is the small mutable state; the
    transcript is apart: generation ``transcript_generation`` of ``transcript_length``
    messages, of which ``transcript`` holds the rows from position ``transcript_from``
    on (0: all of them; more when the claimer's cached mark let it skip the rest).
    """

    session_id: str
    key: SessionKey
    requester_id: str
    epoch: int
    token: str
    worker_id: str
    lease_until: datetime
    checkpoint: str
    inbox: tuple[InboxItem, ...]
    inbox_upto: int
    crash_count: int
    last_seq: int
    sandbox: str | None
    transcript_generation: int = 0
    transcript_length: int = 0
    transcript: tuple[str, ...] = ()
    transcript_from: int = 0

    def transcript_mark(self) -> TranscriptMark:
        """Where the stored transcript stands at claim time (a delta's base)."""
        return TranscriptMark(self.epoch, self.transcript_generation, self.transcript_length)


@dataclass(frozen=True)
class TranscriptMark:
    """Where a session's stored transcript stood when its holder last saw it.

    ``generation`` counts compactions' rewrites; ``length`` is how many messages
    (rows) that generation holds; ``epoch`` is the claim epoch that saw it. A worker
    that cached a session's decoded transcript passes its mark to ``claim``, which
    then returns only the rows the cache lacks.
    """

    epoch: int
    generation: int
    length: int


@dataclass(frozen=True)
class TranscriptDelta:
    """Messages to store with a ``save`` or ``commit``: opaque JSON strings, one per row.

    ``base`` is the transcript the writer holds (from its claim, moved on by its own
    earlier writes). With ``generation == base.generation`` the ``messages`` are
    appended at positions ``base.length …``; with a later generation (compaction
    rewrote the transcript) they are the whole new transcript, from position 0, and
    the older generations' rows are deleted.

    Raises:
        ValueError: ``generation`` is below the base's.
    """

    base: TranscriptMark
    generation: int
    messages: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.generation < self.base.generation:
            raise ValueError(f"generation {self.generation} < base {self.base.generation}")

    @property
    def start(self) -> int:
        """The position of the first of ``messages``."""
        return self.base.length if self.generation == self.base.generation else 0

    def after(self, epoch: int) -> TranscriptMark:
        """The mark once this delta is stored (by a claim of ``epoch``)."""
        return TranscriptMark(epoch, self.generation, self.start + len(self.messages))


@dataclass
class IoCounters:
    """Payload bytes (UTF-8) a ``SessionStore`` wrote and read: checkpoints, transcript
    rows, event payloads and inbox texts. Ever-growing counters; diff two readings."""

    written_bytes: int = 0
    read_bytes: int = 0


@dataclass(frozen=True)
class NewEvent:
    """An event to append: ``kind`` (≤ 32 chars, see ``EventKind``) and a JSON payload.

    Raises:
        ValueError: empty or over-long ``kind``.
    """

    kind: str
    payload_json: str = "{}"

    def __post_init__(self) -> None:
        if not 0 < len(self.kind) <= MAX_KIND_CHARS:
            raise ValueError(f"event kind must be 1..{MAX_KIND_CHARS} chars: {self.kind!r}")


@dataclass(frozen=True)
class Event:
    """One row of the append-only log; ``epoch`` is the claim epoch that wrote it
    (the epoch after the bump for rows written by ``cancel`` and the sweeper)."""

    session_id: str
    seq: int
    kind: str
    payload_json: str
    epoch: int
    created_at: datetime


@dataclass(frozen=True)
class Continue:
    """Outcome: run another step (``commit`` returns the next token)."""


@dataclass(frozen=True)
class Wait:
    """Outcome: wait for a reply, until ``until`` (None: no deadline); holds nothing.

    ``wake_at``: the sweeper wakes the session then (see ``SessionStore.sweep``) with
    ``wake_note`` as an inbox item of kind ``wake``; None: no timed wake. A wake-up never
    ends the session; ``until`` does.

    Raises:
        ValueError: ``wake_at`` without ``wake_note``, or a note without a time.
    """

    until: datetime | None = None
    wake_at: datetime | None = None
    wake_note: str | None = None

    def __post_init__(self) -> None:
        if (self.wake_at is None) != (self.wake_note is None):
            raise ValueError("a timed wake-up needs both wake_at and wake_note")


@dataclass(frozen=True)
class Finish:
    """Outcome: end the session as ``done``, ``failed`` or ``cancelled``.

    Raises:
        ValueError: ``status`` is ``running`` or ``waiting``.
    """

    status: SessionStatus = SessionStatus.DONE

    def __post_init__(self) -> None:
        if self.status in (SessionStatus.RUNNING, SessionStatus.WAITING):
            raise ValueError(f"Finish needs an end status, not {self.status}")


Outcome = Continue | Wait | Finish


@dataclass(frozen=True)
class Session:
    """A session row as stored (``get``/``find``)."""

    id: str
    key: SessionKey
    requester_id: str
    status: SessionStatus
    epoch: int
    lease_owner: str | None
    lease_until: datetime | None
    pending_token: str | None
    crash_count: int
    wait_until: datetime | None
    checkpoint: str
    sandbox: str | None
    last_seq: int
    inbox_seq: int
    inbox_consumed: int
    usage: TokenUsage
    created_at: datetime
    updated_at: datetime
    transcript_generation: int = 0
    transcript_length: int = 0
    origin: SessionOrigin = SessionOrigin.SLACK


@dataclass(frozen=True)
class Cancelled:
    """Outcome of ``cancel``: what the bot needs to stop the running step.

    ``epoch`` is the new (fencing) epoch; ``checkpoint`` tells the bot the ``in_flight``
    tool call and ``sandbox`` the handle, so it can kill the sandbox process;
    ``was_status`` is the status before the cancel.
    """

    session_id: str
    epoch: int
    was_status: SessionStatus
    checkpoint: str
    sandbox: str | None


@dataclass(frozen=True)
class Wakeup:
    """A wake-up to enqueue: ``advance(session_id, token)``."""

    session_id: str
    token: str


@dataclass(frozen=True)
class SweepResult:
    """What one ``sweep`` did: sessions to re-enqueue (with their existing token),
    sessions failed for crash loops, waits ended past their deadline, and waiting
    sessions woken at their ``wake_at`` (each with a new token to enqueue)."""

    requeue: tuple[Wakeup, ...] = ()
    failed: tuple[str, ...] = ()
    expired_waits: tuple[str, ...] = ()
    woken: tuple[Wakeup, ...] = ()


@dataclass(frozen=True)
class OutboxItem:
    """A Slack post intent; ``ts`` is set once the post is known to exist.

    ``key`` names what the post is (``"<session>:<kind>:<which>"``; also sent as the
    post's message metadata); ``payload_json`` is what the bot posts (its format is the
    bot's). ``created`` (``Outbox.post_intent`` only): this call recorded the intent;
    False when it was there already (an earlier attempt's, or another worker's a moment
    ago).
    """

    key: str
    session_id: str
    channel_id: str
    thread_ts: str
    kind: str
    payload_json: str
    ts: str | None
    created_at: datetime
    posted_at: datetime | None
    created: bool = field(default=False, compare=False)  # about the call, not the row
