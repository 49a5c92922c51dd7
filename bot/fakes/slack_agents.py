"""The fake Slack's agent surface: agent sessions and streamed messages, as strict as Slack.

Methods (docs.slack.dev method reference; argument names as slack_sdk 3.48's
``WebClient`` sends them, JSON bodies):

- ``agents.sessions.setStatus`` (Tier 3, ``chat:write``): ``status`` one of ``active``,
  ``processing``, ``suspended``, ``closed`` (else ``invalid_status``); ``thread_ts``
  required for a thread session in a channel or DM (``thread_ts_required``); ``channel_id``
  required (``channel_not_found``); ``title`` at most 200 characters and, like
  ``initiator_user_id``, only used when the session is created. Answers ``status`` (the
  session's), ``agent_status`` (this app's), ``title``, and the warning
  ``missing_agent_session_stopped_event_subscription`` (in ``warning`` and
  ``response_metadata.warnings``) while the app does not subscribe to
  ``agent_session_stopped``. Slack documents no forbidden transition: any status may
  follow any other.
- ``chat.startStream`` (Tier 2): ``channel`` and ``thread_ts``; ``recipient_user_id`` and
  ``recipient_team_id`` required in a channel (``missing_recipient_user_id``,
  ``missing_recipient_team_id``); ``task_display_mode`` ``timeline`` or ``plan``; either
  ``markdown_text`` (≤ 12,000 chars) or ``chunks``, never both
  (``cannot_provide_both_markdown_text_and_chunks``). The stream is locked to the shape it
  was opened with (``streaming_mode_mismatch``).
- ``chat.appendStream`` (Tier 4): ``markdown_text`` or ``chunks``
  (``markdown_text_or_chunks_required``); a stream Slack ended answers
  ``message_not_in_streaming_state``, one a user stopped ``stopped_by_user``.
- ``chat.stopStream`` (Tier 2): optional final ``markdown_text``/``chunks``, ``blocks``
  (≤ 50, rendered below), ``metadata`` and ``session_status`` (default ``active``),
  which sets the thread's session; a stream already over answers
  ``message_not_in_streaming_state``.
- ``chat.update`` of a message still streaming answers ``streaming_state_conflict``.

Chunks: ``markdown_text`` {text}, ``task_update`` {id, title, status ∈ pending /
in_progress / complete / error, details?, output?, sources?}, ``plan_update`` {title},
``blocks`` {blocks}; any other shape or key → ``invalid_chunks``. A task title over 256
characters is refused too, and a stream lives ``stream_lifetime_s`` (300 s) from its start,
then Slack ends it: both measured by other Slack apps' authors, not documented by Slack.

A workspace that does not allow these methods (the app not an agent, a missing scope, an
Enterprise Grid policy) answers each of them with the error ``refuse`` sets
(``feature_disabled``, ``missing_scope`` with ``needed``/``provided``, …).

``click_stop`` is a person clicking the native Stop of a ``processing`` session: Slack
stops the app's streams in the thread and sends ``agent_session_stopped`` with their
``streaming_message_ts``; the session stays ``processing`` until the app moves it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AGENT_METHODS",
    "CHUNK_TYPES",
    "MAX_SESSION_TITLE_CHARS",
    "MAX_STREAM_MARKDOWN_CHARS",
    "MAX_TASK_TITLE_CHARS",
    "SESSION_STATUSES",
    "STOP_SUBSCRIPTION_WARNING",
    "STREAM_LIFETIME_S",
    "TASK_STATUSES",
    "AgentSession",
    "AgentSurfaceState",
    "Change",
    "Stream",
]

SESSION_STATUSES = ("active", "processing", "suspended", "closed")
TASK_STATUSES = ("pending", "in_progress", "complete", "error")
TASK_DISPLAY_MODES = ("timeline", "plan")
CHUNK_TYPES = ("markdown_text", "task_update", "plan_update", "blocks")
_CHUNK_KEYS = {
    "markdown_text": ({"text"}, set()),
    "task_update": ({"id", "title", "status"}, {"details", "output", "sources"}),
    "plan_update": ({"title"}, set()),
    "blocks": ({"blocks"}, set()),
}
MAX_SESSION_TITLE_CHARS = 200
MAX_STREAM_MARKDOWN_CHARS = 12_000
MAX_TASK_TITLE_CHARS = 256
STREAM_LIFETIME_S = 300.0
STOP_SUBSCRIPTION_WARNING = "missing_agent_session_stopped_event_subscription"
AGENT_METHODS = (
    "agents.sessions.setStatus",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
)

JsonDict = dict[str, Any]


class AgentFailure(Exception):
    """A handler's refusal: ``{"ok": false, "error": error, …extra}`` (the fake maps it)."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass
class AgentSession:
    """One thread's agent session: its title and each status it was given, in order."""

    channel: str
    thread_ts: str
    title: str
    initiator_user_id: str | None
    statuses: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The session's current status."""
        return self.statuses[-1]


@dataclass(frozen=True)
class Change:
    """One thing a person sees change in a thread, in the order Slack made them: a
    session's ``status`` (``what``: the status), a stream's ``chunk``, or its ``end``
    (``what``: the stream's state then)."""

    channel: str
    thread_ts: str
    kind: str  # "status", "chunk" or "end"
    what: str = ""
    stream_ts: str = ""
    chunk: JsonDict = field(default_factory=dict)


@dataclass
class Stream:
    """One streamed message: its chunks in order, how it was opened, whether it still streams.

    ``state``: ``streaming``, ``stopped`` (by the app), ``stopped_by_user``, ``expired``.
    """

    channel: str
    thread_ts: str
    ts: str
    mode: str  # "chunks" or "markdown_text": the shape every later call must keep
    display_mode: str
    started_at: float
    chunks: list[JsonDict] = field(default_factory=list)
    state: str = "streaming"
    blocks: list[JsonDict] = field(default_factory=list)
    metadata: JsonDict | None = None
    message: JsonDict = field(default_factory=dict)  # as conversations.replies serves it

    def tasks(self) -> dict[str, JsonDict]:
        """Each task as shown now: its latest ``task_update`` (title/status replace)."""
        shown: dict[str, JsonDict] = {}
        for chunk in self.chunks:
            if chunk.get("type") == "task_update":
                shown[str(chunk["id"])] = {**shown.get(str(chunk["id"]), {}), **chunk}
        return shown

    def markdown(self) -> str:
        """The markdown streamed so far, joined."""
        return "".join(str(c["text"]) for c in self.chunks if c.get("type") == "markdown_text")


@dataclass
class AgentSurfaceState:
    """The agent surface of one fake workspace (see the module docstring).

    Args:
        new_ts: makes a message ts (the fake's clock).
        store_message: keeps a streamed message in the channel (for conversations.replies);
            returns it.
        bot_in: raises the fake's refusal when the bot may not write in a channel.
        check_blocks: raises ``invalid_blocks`` for blocks Slack would refuse.
        check_metadata: returns the metadata as Slack keeps it, or raises.
        failure: builds the fake's refusal from an error code and extras.
    """

    new_ts: Callable[[], str]
    store_message: Callable[[JsonDict], JsonDict]
    bot_in: Callable[[str], None]
    check_blocks: Callable[[list[JsonDict]], None]
    check_metadata: Callable[[Any], JsonDict]
    failure: Callable[..., Exception]
    clock: Callable[[], float] = time.monotonic
    subscribed_to_stop: bool = True
    stream_lifetime_s: float = STREAM_LIFETIME_S
    refused: JsonDict | None = None
    sessions: dict[tuple[str, str], AgentSession] = field(default_factory=dict)
    streams: dict[str, Stream] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    """Every status, chunk and stream end, in order (what ``warroom fake-slack`` prints)."""

    def handlers(self) -> dict[str, Callable[[JsonDict], JsonDict]]:
        """The Web API methods this state serves, by name."""
        return {
            "agents.sessions.setStatus": self._set_status,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
        }

    # ----- what tests (and ``warroom fake-slack``) do ----------------------------------

    def refuse(self, error: str = "feature_disabled", **extra: Any) -> None:
        """Refuse every agent-surface method from now on with ``error`` (e.g.
        ``missing_scope`` with ``needed="chat:write"``)."""
        self.refused = {"error": error, **extra}

    def session(self, channel: str, thread_ts: str) -> AgentSession | None:
        """The thread's agent session, or None."""
        return self.sessions.get((channel, thread_ts))

    def streams_in(self, channel: str, thread_ts: str) -> list[Stream]:
        """The thread's streamed messages, oldest first."""
        return [
            s for s in self.streams.values() if (s.channel, s.thread_ts) == (channel, thread_ts)
        ]

    def click_stop(self, channel: str, thread_ts: str, user: str) -> JsonDict:
        """A person clicks the native Stop: returns the ``agent_session_stopped`` event.

        Raises:
            ValueError: no Stop is shown (no session, not ``processing``, or the app is
                not subscribed to the event: Slack shows a plain loading indicator).
        """
        session = self.session(channel, thread_ts)
        if session is None or session.status != "processing":
            raise ValueError("no Stop is shown: the session is not processing")
        if not self.subscribed_to_stop:
            raise ValueError("no Stop is shown: the app does not subscribe to the event")
        stopped = []
        for stream in self.streams_in(channel, thread_ts):
            self._expire(stream)
            if stream.state == "streaming":
                stream.state = "stopped_by_user"
                stopped.append(stream.ts)
                self._ended(stream)
        return {
            "type": "agent_session_stopped",
            "channel": channel,
            "thread_ts": thread_ts,
            "user": user,
            "streaming_message_ts": stopped,
            "event_ts": self.new_ts(),
        }

    def refuses_update(self, channel: str, ts: str) -> None:
        """Raise ``streaming_state_conflict`` for a ``chat.update`` of a streaming message."""
        stream = self.streams.get(ts)
        if stream is not None and stream.channel == channel:
            self._expire(stream)
            if stream.state == "streaming":
                raise self.failure("streaming_state_conflict")

    # ----- methods ------------------------------------------------------------------

    def _check_allowed(self) -> None:
        if self.refused is not None:
            extra = {k: v for k, v in self.refused.items() if k != "error"}
            raise self.failure(str(self.refused["error"]), **extra)

    def _set_status(self, args: JsonDict) -> JsonDict:
        self._check_allowed()
        status = args.get("status")
        if status not in SESSION_STATUSES:
            raise self.failure("invalid_status")
        channel = str(args.get("channel_id") or "")
        if not channel:
            raise self.failure("channel_not_found")
        thread_ts = str(args.get("thread_ts") or "")
        if not thread_ts:
            raise self.failure("thread_ts_required")
        if not channel.startswith("D"):
            try:
                self.bot_in(channel)
            except Exception:
                raise self.failure("not_authorized") from None
        title = args.get("title")
        if title is not None and (
            not isinstance(title, str) or len(title) > MAX_SESSION_TITLE_CHARS
        ):
            raise self.failure("invalid_arguments")
        session = self.sessions.get((channel, thread_ts))
        if session is None:
            initiator = args.get("initiator_user_id")
            session = AgentSession(channel, thread_ts, str(title or ""), initiator)
            self.sessions[(channel, thread_ts)] = session
        session.statuses.append(str(status))
        self.changes.append(Change(channel, thread_ts, "status", str(status)))
        answer: JsonDict = {
            "status": session.status,
            "agent_status": status,
            "title": session.title,
        }
        if not self.subscribed_to_stop:
            answer["warning"] = STOP_SUBSCRIPTION_WARNING
            answer["response_metadata"] = {"warnings": [STOP_SUBSCRIPTION_WARNING]}
        return answer

    def _start_stream(self, args: JsonDict) -> JsonDict:
        self._check_allowed()
        channel = str(args.get("channel") or "")
        thread_ts = str(args.get("thread_ts") or "")
        if not channel:
            raise self.failure("channel_not_found")
        if not thread_ts:
            raise self.failure("invalid_arguments")
        self.bot_in(channel)
        if not channel.startswith("D"):
            if not args.get("recipient_user_id"):
                raise self.failure("missing_recipient_user_id")
            if not args.get("recipient_team_id"):
                raise self.failure("missing_recipient_team_id")
        display_mode = args.get("task_display_mode", "timeline")
        if display_mode not in TASK_DISPLAY_MODES:
            raise self.failure("invalid_arguments")
        mode, chunks = _content(args, self.failure, required=False)
        message = self.store_message(
            {"channel": channel, "thread_ts": thread_ts, "text": _text_of(chunks)}
        )
        ts = str(message["ts"])
        stream = Stream(channel, thread_ts, ts, mode or "chunks", display_mode, self.clock())
        stream.message = message
        self.streams[ts] = stream
        self._add_chunks(stream, chunks)
        return {"channel": channel, "ts": ts}

    def _append_stream(self, args: JsonDict) -> JsonDict:
        self._check_allowed()
        stream = self._open_stream(args)
        mode, chunks = _content(args, self.failure, required=True)
        if mode != stream.mode:
            raise self.failure("streaming_mode_mismatch")
        self._add_chunks(stream, chunks)
        stream.message["text"] = stream.markdown()
        return {"channel": stream.channel, "ts": stream.ts}

    def _stop_stream(self, args: JsonDict) -> JsonDict:
        self._check_allowed()
        stream = self._open_stream(args, stopping=True)
        mode, chunks = _content(args, self.failure, required=False)
        if mode is not None and mode != stream.mode:
            raise self.failure("streaming_mode_mismatch")
        blocks = args.get("blocks") or []
        if not isinstance(blocks, list):
            raise self.failure("invalid_blocks")
        self.check_blocks(blocks)
        metadata = self.check_metadata(args["metadata"]) if args.get("metadata") else None
        session_status = args.get("session_status", "active")
        if session_status not in SESSION_STATUSES:
            raise self.failure("invalid_arguments")
        self._add_chunks(stream, chunks)
        stream.blocks, stream.metadata, stream.state = list(blocks), metadata, "stopped"
        self._ended(stream)
        session = self.sessions.get((stream.channel, stream.thread_ts))
        if session is not None:
            session.statuses.append(str(session_status))
            change = Change(stream.channel, stream.thread_ts, "status", str(session_status))
            self.changes.append(change)
        stream.message["text"] = stream.markdown()
        if blocks:
            stream.message["blocks"] = list(blocks)
        if metadata is not None:
            stream.message["metadata"] = metadata
        return {"channel": stream.channel, "ts": stream.ts, "message": dict(stream.message)}

    def _open_stream(self, args: JsonDict, *, stopping: bool = False) -> Stream:
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        if not channel:
            raise self.failure("channel_not_found")
        stream = self.streams.get(ts)
        if stream is None or stream.channel != channel:
            raise self.failure("message_not_found")
        self._expire(stream)
        if stream.state == "stopped_by_user" and not stopping:
            raise self.failure("stopped_by_user")
        if stream.state != "streaming":
            raise self.failure("message_not_in_streaming_state")
        return stream

    def _expire(self, stream: Stream) -> None:
        if (
            stream.state == "streaming"
            and self.clock() - stream.started_at > self.stream_lifetime_s
        ):
            stream.state = "expired"
            self._ended(stream)

    def _add_chunks(self, stream: Stream, chunks: list[JsonDict]) -> None:
        stream.chunks.extend(chunks)
        for chunk in chunks:
            change = Change(stream.channel, stream.thread_ts, "chunk", "", stream.ts, chunk)
            self.changes.append(change)

    def _ended(self, stream: Stream) -> None:
        change = Change(stream.channel, stream.thread_ts, "end", stream.state, stream.ts)
        self.changes.append(change)


def _content(
    args: JsonDict, failure: Callable[..., Exception], *, required: bool
) -> tuple[str | None, list[JsonDict]]:
    """The call's content: ("markdown_text" | "chunks" | None, as chunks)."""
    text, chunks = args.get("markdown_text"), args.get("chunks")
    if text is not None and chunks is not None:
        raise failure("cannot_provide_both_markdown_text_and_chunks")
    if text is not None:
        if not isinstance(text, str) or len(text) > MAX_STREAM_MARKDOWN_CHARS:
            raise failure("msg_too_long")
        return "markdown_text", [{"type": "markdown_text", "text": text}]
    if chunks is None:
        if required:
            raise failure("markdown_text_or_chunks_required")
        return None, []
    if not isinstance(chunks, list) or not chunks:
        raise failure("invalid_chunks")
    for chunk in chunks:
        _check_chunk(chunk, failure)
    return "chunks", [dict(c) for c in chunks]


def _check_chunk(chunk: Any, failure: Callable[..., Exception]) -> None:
    if not isinstance(chunk, dict) or chunk.get("type") not in CHUNK_TYPES:
        raise failure("invalid_chunks")
    needed, optional = _CHUNK_KEYS[chunk["type"]]
    keys = set(chunk) - {"type"}
    if not needed <= keys or keys - needed - optional:
        raise failure("invalid_chunks")
    if chunk["type"] == "markdown_text":
        if not isinstance(chunk["text"], str) or len(chunk["text"]) > MAX_STREAM_MARKDOWN_CHARS:
            raise failure("msg_too_long")
    elif chunk["type"] == "task_update":
        title_ok = (
            isinstance(chunk["title"], str) and 0 < len(chunk["title"]) <= MAX_TASK_TITLE_CHARS
        )
        texts_ok = all(isinstance(chunk.get(k, ""), str) for k in ("details", "output"))
        if not (title_ok and texts_ok and isinstance(chunk["id"], str) and chunk["id"]):
            raise failure("invalid_chunks")
        if chunk["status"] not in TASK_STATUSES:
            raise failure("invalid_chunks")
    elif chunk["type"] == "plan_update":
        if not isinstance(chunk["title"], str) or not chunk["title"]:
            raise failure("invalid_chunks")
    elif not isinstance(chunk["blocks"], list) or not chunk["blocks"]:
        raise failure("invalid_chunks")


def _text_of(chunks: Iterable[JsonDict]) -> str:
    return "".join(str(c["text"]) for c in chunks if c.get("type") == "markdown_text")
