"""``warroom chat``: one incident thread in the terminal, against the real harness and store.

Each message typed is a message in one session (org ``local``, channel ``chat``, a
thread ts made at start; on a terminal a message is edited with no length limit and a
paste is part of it, from a pipe each line is one: ``chat_input``): the first opens it,
later ones join its inbox,
so a line typed while the agent works steers it at the next step boundary, and a
line typed after an answer starts the next turn. Steps run on an in-process Dramatiq
worker over the in-memory broker (whatever ``REDIS_URL`` says), with the same
database, sandboxes and model settings as ``serve``; a ``TerminalReporter`` prints
progress and answers instead of posting to Slack. At end of input the chat waits
for the session to stop running, destroys the sandbox it used (a jail outlives its
creator otherwise), then exits. SIGTERM and SIGINT (Ctrl-C) take the same clean-up
path: a turn in progress is cancelled (so no later worker finishes it), the worker
stops and the sandbox is destroyed; the exit code is 143 or 130. When the session
ended failed, the chat prints why: the last error a step raised (logged by the
worker; the terminal gets no traceback unless ``warroom chat --verbose``), else the
last ``notice`` event.

``approve`` or ``deny`` decides a pending approval; with none waiting the chat says so
and sends nothing. Input that ends (Ctrl-D) while an approval waits settles it as
stopped and stops the session, saying so: the call never runs. At start the chat says
which configured MCP servers are down (``chat_mcp``), and when the model API cannot be
reached (``model_reach``).

Needs ``ANTHROPIC_API_KEY`` (``ANTHROPIC_BASE_URL`` may point at a gateway, or at
``warroom fake-anthropic``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TextIO

from bot.cli.chat_input import stdin_lines, typed_input
from bot.cli.chat_mcp import report_mcp_down
from bot.cli.credentials import missing_for_chat
from bot.cli.model_reach import report_model_unreachable
from bot.cli.signals import run_interruptible
from bot.cli.terminal import TerminalReporter
from bot.durable.actors import EmbeddedWorker, setup
from bot.durable.setup_failure import SETUP_FAILED
from bot.durable.wiring import make_provider
from bot.settings import Settings
from harness import (
    APPROVAL_KIND,
    ApprovalDecision,
    Checkpoint,
    PendingApproval,
    Requester,
    decision_key,
)
from memory_store import (
    Database,
    EventKind,
    SessionKey,
    SessionOrigin,
    SessionStatus,
    SessionStore,
)
from sandbox_client import SandboxError, SandboxHandle, SandboxProvider

__all__ = [
    "CHAT_CHANNEL",
    "CHAT_LOG_FILE",
    "CHAT_ORG",
    "CHAT_USER",
    "Conversation",
    "run_chat",
    "stdin_lines",
]

CHAT_ORG = "local"
CHAT_CHANNEL = "chat"
CHAT_USER = "local-user"
CHAT_LOG_FILE = "chat.log"
IDLE_POLL_S = 0.1
FAILURE_POLL_S = 1.0  # how soon a failed session is reported while the user may type
WORKER_STOP_TIMEOUT_MS = 10_000
DECISIONS = ("approve", "deny")
"""Lines that decide a pending approval instead of steering."""
NOTHING_WAITING = "Nothing is waiting for approval (that line was not sent to the agent)."
ABANDONED = (
    "Leaving with an approval unanswered: `{action}` was not run; the approval is settled as "
    "stopped and the session stopped."
)
BANNER = (
    "Warroom chat: type a message and press Enter. Type again at any time to steer; "
    "end with Ctrl-D.\n"
)

Enqueue = Callable[[str, str], Awaitable[None]]


@dataclass
class Conversation:
    """The chat's one session: opened by the first message, joined by the others.

    The session is of origin ``chat`` and its id is added to ``owned``, the only
    session this chat's worker runs and sweeps: no other process's session is adopted,
    and no other process adopts this one.
    """

    sessions: SessionStore
    enqueue: Enqueue
    thread_ts: str = field(default_factory=lambda: f"{time.time():.6f}")
    session_id: str | None = None
    owned: set[str] = field(default_factory=set)
    _said: int = field(default=0, init=False)

    async def say(self, text: str) -> str | None:
        """Record ``text`` in the session's inbox and wake a worker if none is on it; while
        the session waits for an approval, ``approve`` or ``deny`` decides it (§13).

        Returns what to tell the person instead when the line is not a message:
        ``approve`` or ``deny`` with no approval waiting (``NOTHING_WAITING``); else None.
        """
        self._said += 1
        source_ts = f"{self.thread_ts}/{self._said}"
        if text.lower() in DECISIONS:
            decided = await self._decide(text.lower() == "approve")
            return None if decided else NOTHING_WAITING
        if self.session_id is None:
            token = await self._open(text, source_ts)
        else:
            token = await self.sessions.add_input(
                self.session_id, user_id=CHAT_USER, text=text, source_ts=source_ts
            )
        if token is not None and self.session_id is not None:
            await self.enqueue(self.session_id, token)
        return None

    async def _decide(self, approve: bool, *, stopped: bool = False) -> bool:
        """Record the person's decision on the pending approval; False when none waits."""
        approval = await self.pending_approval()
        if approval is None or self.session_id is None:
            return False
        decision = ApprovalDecision(
            approve,
            approval.tool_use_id,
            approval.input_sha256,
            CHAT_USER,
            datetime.now(UTC),
            stopped=stopped,
        )
        token = await self.sessions.notify(
            self.session_id,
            kind=APPROVAL_KIND,
            text=decision.to_text(),
            source_key=decision_key(approval.tool_use_id),
        )
        if token is not None and not stopped:  # a stop cancels the session next: no step
            await self.enqueue(self.session_id, token)
        return True

    async def pending_approval(self) -> PendingApproval | None:
        """The approval the session waits for, or None."""
        if self.session_id is None:
            return None
        session = await self.sessions.get(self.session_id)
        approval = Checkpoint.from_json(session.checkpoint).approval if session else None
        return approval if approval is not None and approval.pending else None

    async def abandon_approval(self) -> PendingApproval | None:
        """At end of input, stop the session if it waits for an approval: the approval is
        settled as stopped (its call never runs) and the session cancelled, as ``stop``
        does in Slack. Returns the approval, or None when none waited."""
        approval = await self.pending_approval()
        if approval is None or self.session_id is None:
            return None
        await self._decide(False, stopped=True)
        await self.sessions.cancel(self.session_id, actor=CHAT_USER)
        return approval

    async def stop_running(self) -> bool:
        """Cancel the session if a step is pending or running (the chat is going away,
        and no other process may finish its turn). Returns whether it was running."""
        if self.session_id is None:
            return False
        session = await self.sessions.get(self.session_id)
        if session is None or session.status is not SessionStatus.RUNNING:
            return False
        return await self.sessions.cancel(self.session_id, actor=CHAT_USER) is not None

    async def wait_idle(self, *, poll_s: float = IDLE_POLL_S) -> SessionStatus | None:
        """Wait until the session no longer runs; returns its status (None: never opened)."""
        if self.session_id is None:
            return None
        while True:
            session = await self.sessions.get(self.session_id)
            if session is None or session.status is not SessionStatus.RUNNING:
                return None if session is None else session.status
            await asyncio.sleep(poll_s)

    async def _open(self, text: str, source_ts: str) -> str | None:
        session_id = uuid.uuid4().hex
        checkpoint = Checkpoint(session_id, CHAT_ORG, CHAT_CHANNEL, Requester(CHAT_USER, "you"))
        opened = await self.sessions.open_or_join(
            SessionKey(CHAT_ORG, CHAT_CHANNEL, self.thread_ts),
            requester_id=CHAT_USER,
            initial_checkpoint=checkpoint.to_json(),
            text=text,
            source_ts=source_ts,
            session_id=session_id,
            origin=SessionOrigin.CHAT,
        )
        self.session_id = opened.session_id
        self.owned.add(opened.session_id)
        return opened.token


def run_chat(settings: Settings, *, stdin: TextIO, out: TextIO) -> SessionStatus | None:
    """Run the chat until end of input and the session is idle; returns its last status.

    Raises:
        MissingSetting: ``ANTHROPIC_API_KEY`` (or a Blaxel credential) is not set.
        DatabaseUnavailable: the database could not be reached.
    """
    if missing := missing_for_chat(settings):
        raise missing[0]
    return run_interruptible(_converse(settings.model_copy(update={"redis_url": None}), stdin, out))


class _LastError(logging.Handler):
    """Remembers the exception of the last ERROR record (a failed step's cause)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.text: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            self.text = f"{type(error).__name__}: {error}"


async def _converse(settings: Settings, stdin: TextIO, out: TextIO) -> SessionStatus | None:
    db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
    worker: EmbeddedWorker | None = None
    conversation: Conversation | None = None
    last_error = _LastError()
    logging.getLogger().addHandler(last_error)
    try:
        await db.migrate()  # before the worker's runtime migrates too: one writer at a time
        owned: set[str] = set()
        reporter = TerminalReporter(out)
        broker, actors, holder = setup(
            settings, reporter=reporter, origin=SessionOrigin.CHAT, owned=owned
        )
        worker = EmbeddedWorker(broker, threads=max(1, min(settings.worker_threads, 4)))
        worker.start()
        conversation = Conversation(SessionStore(db), actors.enqueue, owned=owned)
        with typed_input(stdin, out) as typed:
            reporter.out = shown = typed.out
            shown.write(BANNER)
            shown.flush()
            reported: set[datetime] = set()
            watchers = [
                asyncio.create_task(_report_failures(conversation, shown, last_error, reported)),
                asyncio.create_task(report_mcp_down(holder, shown)),
                asyncio.create_task(report_model_unreachable(settings, shown)),
            ]
            try:
                async for text in typed.messages:
                    if text.strip() and (note := await conversation.say(text.strip())):
                        shown.write(f"  {note}\n")
                        shown.flush()
                abandoned = await conversation.abandon_approval()
                if abandoned is not None:
                    shown.write(ABANDONED.format(action=abandoned.action) + "\n")
                    shown.flush()
                    return SessionStatus.CANCELLED
                status = await conversation.wait_idle()
            finally:
                for watcher in watchers:
                    await _stop(watcher)
                reporter.out = out  # the prompt's proxy goes with the prompt
            await _report_failure(conversation, shown, last_error, reported)
            return status
    finally:
        if conversation is not None and await conversation.stop_running():
            out.write("\nStopped: the turn in progress was cancelled.\n")
            out.flush()
        if worker is not None:
            await asyncio.to_thread(worker.stop, timeout_ms=WORKER_STOP_TIMEOUT_MS)
        logging.getLogger().removeHandler(last_error)
        if conversation is not None:
            await _destroy_sandbox(settings, conversation)
        await db.dispose()


async def _report_failure(
    conversation: Conversation, out: TextIO, last_error: _LastError, reported: set[datetime]
) -> None:
    """Say once why the session ended failed or cancelled (keyed by its ``updated_at``)."""
    if conversation.session_id is None:
        return
    session = await conversation.sessions.get(conversation.session_id)
    ended = (SessionStatus.FAILED, SessionStatus.CANCELLED)
    if session is None or session.status not in ended or session.updated_at in reported:
        return
    reported.add(session.updated_at)
    reason = await _last_notice(conversation, only=SETUP_FAILED)
    reason = reason or last_error.text or await _last_notice(conversation)
    out.write(f"The session ended as {session.status}" + (f": {reason}\n" if reason else ".\n"))
    out.write("Type again to retry, or press Ctrl-D to quit.\n")
    out.flush()


async def _report_failures(
    conversation: Conversation, out: TextIO, last_error: _LastError, reported: set[datetime]
) -> None:
    """While the user may still type: report a failed session as soon as it fails."""
    while True:
        await asyncio.sleep(FAILURE_POLL_S)
        await _report_failure(conversation, out, last_error, reported)


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _last_notice(conversation: Conversation, *, only: str | None = None) -> str | None:
    """The payload of the session's last ``notice`` event, as text (None: none logged);
    with ``only``, of that notice if it is the last one."""
    if conversation.session_id is None:
        return None
    events = await conversation.sessions.events(conversation.session_id)
    notices = [e.payload_json for e in events if e.kind == EventKind.NOTICE.value]
    if not notices:
        return None
    payload = json.loads(notices[-1])
    if only is not None and not (isinstance(payload, dict) and payload.get("notice") == only):
        return None
    if isinstance(payload, dict) and payload.get("notice") == "crash_loop":
        return f"its step failed {payload.get('max_crashes')} times in a row"
    return str(payload.get("text", payload) if isinstance(payload, dict) else payload)


async def _destroy_sandbox(settings: Settings, conversation: Conversation) -> None:
    """Destroy the sandbox recorded in the session row or checkpoint (a jail outlives us)."""
    if conversation.session_id is None:
        return
    session = await conversation.sessions.get(conversation.session_id)
    if session is None:
        return
    recorded = {session.sandbox, Checkpoint.from_json(session.checkpoint).sandbox} - {None}
    if not recorded:
        return
    provider = make_provider(settings, makes_jails=False)
    try:
        for handle in recorded:
            await _destroy_one(provider, str(handle))
    finally:
        await provider.aclose()


async def _destroy_one(provider: SandboxProvider, handle_json: str) -> None:
    try:
        await provider.destroy(SandboxHandle.from_json(handle_json))
    except (SandboxError, OSError, ValueError) as exc:
        logging.getLogger(__name__).warning("could not destroy the chat's sandbox: %s", exc)
