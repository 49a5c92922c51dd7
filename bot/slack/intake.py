"""The intake: what a Slack message or a Stop press does to its thread's session.

``receive`` runs before the listener's ack and does the database part: look up the
thread's session, decide (``routing.route``), record the input (``open_or_join``/
``add_input``), cancel on ``stop``. It returns a ``FollowUp``, the Slack and queue
part that ``follow_up`` does next: enqueue the wake-up, fetch a thread's earlier
messages, reply with usage, kill the stopped step's process and say so.

A reply in a thread with no session is remembered for ``dedupe_ttl_s`` (a sighting
keyed ``early_reply_key``): a mention that opens a session there later reads the
thread (``conversations.replies``) and gives the session those replies before its
first step (issue #32: Slack may deliver a reply before the mention it answers, e.g.
the mention's retry after an outage). The reply's side records the sighting and then
looks for the session again, the mention's side opens the session and then looks for
the sighting, so of a reply and a mention racing at least one sees the other; one
seen by both is recorded once (inputs are keyed by the reply's ``ts``).

Duplicates (Slack's ``event_id`` retries, the ``app_mention``/``message`` twins of one
@mention, the ``message_changed``/``app_mention`` twins of one edit) are dropped by the
write that acts, so nothing is marked seen unless it was also done: an input is recorded
once per ``(session, source_ts)`` (a repeat gives no token, so no second wake-up), a
cancel happens once, and the stop notice is posted once per message ``ts`` through the
outbox. Only the usage reply, which writes nothing else, is gated by a sighting of
``"<org>:<channel>:<ts>"``. So when a record fails (the database busy past the ack
budget), no dedupe key is left behind and Slack's retry of the event is recorded.

Another app's top-level post (``InboundMessage.alert``) in a watched channel is recorded as
an alert (``bot.slack.watch.Watch``) before the ack, the message being its thread's root;
the follow-up wakes the alert taker, which opens the session there (issue #27). Anywhere
else, bots' posts are ignored as before.

A wake-up lost between record and enqueue (a crash) is not lost work: the session is
recorded runnable and the store's sweeper re-enqueues it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import SlackCallFailed, slack_call
from bot.slack.agent_surface import AgentStatus, AgentSurface
from bot.slack.approval_messages import render_approval
from bot.slack.files import file_contents
from bot.slack.inbound import InboundMessage, MessageKind
from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import Progress, notice, render_status, render_stopped
from bot.slack.routing import Ignore, Remember, Start, Steer, Stop, Usage, route
from bot.slack.thread_context import thread_so_far
from bot.slack.watch import Watch
from harness import (
    APPROVAL_KIND,
    ApprovalDecision,
    ApprovalStatus,
    Checkpoint,
    InvalidMessage,
    PendingApproval,
    Requester,
    decision_key,
)
from memory_store import Cancelled, DatabaseUnavailable, InboundDedupe, SessionKey, SessionStore

logger = logging.getLogger(__name__)

Enqueue = Callable[[str, str], Awaitable[None]]
CancelRunning = Callable[[Cancelled], Awaitable[None]]

DEDUPE_TTL_S = 3600.0  # Slack retries for ~5 min; keep ≥ 10 min (docs/architecture.md §9)
RETRY_DELAYS_S = (0.2, 1.0, 3.0)  # a store call that found the database busy or away

T = TypeVar("T")


def usage_text(bot_user_id: str) -> str:
    """The reply to a bare mention (mrkdwn)."""
    me = f"<@{bot_user_id}>"
    return (
        f"Mention me with what to look at, for example: {me} checkout-api returns 500s "
        "since 14:02, check the pods and the last deploy.\n"
        "I answer in the thread. Reply there to steer me, or write `stop` to stop me. "
        "Playbooks: `/agent skills list`."
    )


@dataclass(frozen=True)
class Wake:
    """Enqueue ``advance(session_id, token)`` (None: a step is already pending).

    ``files``: the message's file objects; the contents of small text ones are added as
    an input keyed ``<source_ts>/files`` before the wake-up.
    """

    session_id: str
    token: str | None
    files: tuple[Mapping[str, Any], ...] = ()
    source_ts: str = ""
    user_id: str = ""


@dataclass(frozen=True)
class WakeWithContext:
    """Give the new session its thread so far (the messages older than ``before_ts``,
    the mention's, as context; people's replies after it, each as an input), then
    wake it. ``files``: the mention's file objects, as ``Wake``'s."""

    session_id: str
    token: str
    channel_id: str
    thread_ts: str
    before_ts: str
    files: tuple[Mapping[str, Any], ...] = ()
    user_id: str = ""


@dataclass(frozen=True)
class ReplyUsage:
    """Answer a bare mention with the usage, in its thread."""

    channel_id: str
    thread_ts: str


@dataclass(frozen=True)
class Stopped:
    """``stop`` was asked: kill the cancelled step (``cancelled`` None: nothing ran) and say so.

    ``request_ts`` (the message or button press) keys the reply, so it is posted once.
    ``approval``: the approval the session waited for, settled as stopped (its message is
    updated to say so; the model gets the rejection when the session next runs).
    """

    cancelled: Cancelled | None
    thread: Thread
    user_id: str
    request_ts: str
    approval: PendingApproval | None = None
    requester_id: str = ""


@dataclass(frozen=True)
class AlertRecorded:
    """A watched channel's alert was recorded: wake the alert taker (``bot.slack.watch``)."""


FollowUp = Wake | WakeWithContext | ReplyUsage | Stopped | AlertRecorded


@dataclass(frozen=True)
class Intake:
    """The plain core behind the Slack listeners (see the module docstring).

    Attributes:
        strict_channels: channel ids where only @mentions steer a session.
        dedupe_ttl_s: how long a seen ``event_id`` or message ``ts`` is remembered.
        external_may_start: Slack Connect users of other orgs may start sessions.
        watch: the watched channels (None: no channel is watched).
    """

    sessions: SessionStore
    dedupe: InboundDedupe
    client: AsyncWebClient
    poster: SlackPoster
    bot_user_id: str
    enqueue: Enqueue
    cancel_running: CancelRunning
    strict_channels: frozenset[str] = frozenset()
    dedupe_ttl_s: float = DEDUPE_TTL_S
    external_may_start: bool = False
    surface: AgentSurface | None = None
    watch: Watch | None = None

    async def receive(self, message: InboundMessage) -> FollowUp | None:
        """Decide, dedupe and record; returns the Slack and queue work to do next.

        Store calls are retried while the database is unavailable (``RETRY_DELAYS_S``).

        Raises:
            DatabaseUnavailable: still unreachable after the retries (the input is lost).
        """
        if message.alert is not None:
            return await self._alert(message)
        if not _worth_a_look(message):
            return None
        key = SessionKey(message.org_id, message.channel_id, message.thread_root)
        session = (
            await _retrying(lambda: self.sessions.find(key)) if _needs_session(message) else None
        )
        decision = route(
            message,
            session,
            strict=message.channel_id in self.strict_channels,
            external_may_start=self.external_may_start,
        )
        if isinstance(decision, Ignore):
            return None
        if isinstance(decision, Remember):
            return await self._remember(message, key)
        if isinstance(decision, Usage) and not await self._first_sighting(message):
            return None
        return await self._act(message, key, decision)

    async def press_stop(
        self, session_id: str, *, org_id: str, user_id: str, action_ts: str
    ) -> Stopped | None:
        """The Stop button (``warroom_stop``, value = session id) was pressed: cancel.

        A session of another org, or none, is ignored (None).

        Raises:
            DatabaseUnavailable: the store could not be reached.
        """
        session = await _retrying(lambda: self.sessions.get(session_id))
        if session is None or session.key.org_id != org_id:
            return None
        return await self._stop(session_id, session.key, user_id, action_ts)

    async def native_stop(
        self,
        *,
        org_id: str,
        channel_id: str,
        thread_ts: str,
        user_id: str,
        event_id: str,
        event_ts: str,
    ) -> Stopped | None:
        """Slack's native Stop (the ``agent_session_stopped`` event) is the ``stop`` reply:
        the same cancellation, whoever clicks (anyone who may reply in the thread may
        stop it), done once per event (Slack retries an event it saw no ack for). A
        thread without a session is ignored (None).

        Raises:
            DatabaseUnavailable: the store could not be reached.
        """
        keys = [f"event:{org_id}:{event_id}"] if event_id else [f"stop:{channel_id}:{event_ts}"]
        sight = functools.partial(self.dedupe.first_sightings, keys, ttl_s=self.dedupe_ttl_s)
        if not await _retrying(sight):
            return None
        key = SessionKey(org_id, channel_id, thread_ts)
        session = await _retrying(lambda: self.sessions.find(key))
        if session is None:
            return None
        return await self._stop(session.id, key, user_id, event_ts)

    async def follow_up(self, work: FollowUp) -> None:
        """Do ``work``: enqueue, reply, kill. Slack failures are logged, not raised."""
        if isinstance(work, Wake):
            await self._add_files(work)
            if work.token is not None:
                await self.enqueue(work.session_id, work.token)
        elif isinstance(work, WakeWithContext):
            await self._add_context(work)
            files = Wake(work.session_id, None, work.files, work.before_ts, work.user_id)
            await self._add_files(files)
            await self.enqueue(work.session_id, work.token)
        elif isinstance(work, ReplyUsage):
            await self._reply_usage(work)
        elif isinstance(work, AlertRecorded):
            if self.watch is not None:
                self.watch.wake()
        else:
            await self._finish_stop(work)

    # ----- the database part ---------------------------------------------------------

    async def _alert(self, message: InboundMessage) -> FollowUp | None:
        """An app's top-level post: an alert when its channel is watched (``Watch``). An
        app of another org (a Slack Connect channel) starts nothing, as that org's people
        start nothing, unless ``external_may_start``."""
        watch, alert, sender = self.watch, message.alert, message.sender
        if watch is None or alert is None or sender is None:
            return None
        if message.external and not self.external_may_start:
            return None
        recorded = await _retrying(
            lambda: watch.take(
                alert, sender, org_id=message.org_id, channel_id=message.channel_id, ts=message.ts
            )
        )
        return AlertRecorded() if recorded else None

    async def _act(
        self, message: InboundMessage, key: SessionKey, decision: Usage | Start | Steer | Stop
    ) -> FollowUp | None:
        if isinstance(decision, Usage):
            return ReplyUsage(message.channel_id, message.thread_root)
        if isinstance(decision, Stop):
            return await self._stop(decision.session_id, key, message.user_id, message.ts)
        if isinstance(decision, Steer):
            steer = decision
            token = await _retrying(
                lambda: self.sessions.add_input(
                    steer.session_id,
                    user_id=message.user_id,
                    text=steer.text,
                    source_ts=message.source_ts,
                )
            )
            if not token and not message.files:
                return None
            return Wake(steer.session_id, token, message.files, message.source_ts, message.user_id)
        return await self._start(message, key, decision)

    async def _remember(self, message: InboundMessage, key: SessionKey) -> FollowUp | None:
        """Note that ``key``'s thread has a reply, then act on the reply if a mention
        opened the thread's session meanwhile (the module docstring says why both)."""
        note = functools.partial(
            self.dedupe.first_sightings, [early_reply_key(key)], ttl_s=self.dedupe_ttl_s
        )
        await _retrying(note)
        session = await _retrying(lambda: self.sessions.find(key))
        if session is None:
            return None
        decision = route(
            message,
            session,
            strict=message.channel_id in self.strict_channels,
            external_may_start=self.external_may_start,
        )
        if isinstance(decision, Ignore | Remember | Usage):
            return None
        return await self._act(message, key, decision)

    async def _first_sighting(self, message: InboundMessage) -> bool:
        """Both sightings (``event_id`` and ``<channel>:<ts>``) in one database call."""
        keys = [f"ts:{message.sighting_key}"]
        if message.event_id:
            keys.insert(0, f"event:{message.org_id}:{message.event_id}")
        sight = functools.partial(self.dedupe.first_sightings, keys, ttl_s=self.dedupe_ttl_s)
        return await _retrying(sight)

    async def _start(
        self, message: InboundMessage, key: SessionKey, start: Start
    ) -> FollowUp | None:
        session_id = uuid.uuid4().hex
        checkpoint = Checkpoint.initial_json(
            session_id, message.org_id, message.channel_id, Requester(message.user_id)
        )
        opened = await _retrying(
            lambda: self.sessions.open_or_join(
                key,
                requester_id=message.user_id,
                initial_checkpoint=checkpoint,
                text=message.text,
                source_ts=message.ts,
                session_id=session_id,
            )
        )
        if opened.token is None:
            return None
        if opened.created and (start.with_context or await self._had_replies(key)):
            return WakeWithContext(
                opened.session_id,
                opened.token,
                message.channel_id,
                key.thread_ts,
                message.ts,
                message.files,
                message.user_id,
            )
        return Wake(opened.session_id, opened.token, message.files, message.ts, message.user_id)

    async def _had_replies(self, key: SessionKey) -> bool:
        """Whether a reply came to ``key``'s thread before it had a session."""
        return await _retrying(lambda: self.dedupe.seen(early_reply_key(key)))

    async def _stop(self, session_id: str, key: SessionKey, user_id: str, ts: str) -> Stopped:
        stopped = await self._stop_approval(session_id, user_id)
        cancelled = await _retrying(lambda: self.sessions.cancel(session_id, actor=user_id))
        thread = Thread(session_id, key.channel_id, key.thread_ts)
        approval, requester_id = stopped or (None, "")
        return Stopped(cancelled, thread, user_id, ts, approval, requester_id)

    async def _stop_approval(
        self, session_id: str, user_id: str
    ) -> tuple[PendingApproval, str] | None:
        """``stop`` settles a pending approval as stopped (recorded once, like a Deny click,
        before the cancel); returns it settled, and who asked the session."""
        session = await _retrying(lambda: self.sessions.get(session_id))
        try:
            approval = Checkpoint.from_json(session.checkpoint).approval if session else None
        except InvalidMessage:
            approval = None
        if session is None or approval is None or not approval.pending:
            return None
        now = datetime.now(UTC)
        decision = ApprovalDecision(
            False, approval.tool_use_id, approval.input_sha256, user_id, now, stopped=True
        )
        recorded = decision.to_text()
        await _retrying(
            lambda: self.sessions.notify(
                session_id,
                kind=APPROVAL_KIND,
                text=recorded,
                source_key=decision_key(approval.tool_use_id),
            )
        )
        return approval.decided(ApprovalStatus.STOPPED, user_id, now), session.requester_id

    # ----- the Slack and queue part --------------------------------------------------

    async def _add_context(self, work: WakeWithContext) -> None:
        given = frozenset(item.source_ts for item in await self.sessions.inbox(work.session_id))
        try:
            thread = await thread_so_far(
                self.client,
                channel_id=work.channel_id,
                thread_ts=work.thread_ts,
                mention_ts=work.before_ts,
                bot_user_id=self.bot_user_id,
                skip_ts=given,
            )
        except SlackCallFailed as exc:
            logger.warning(
                "session %s starts without its thread's history: %s", work.session_id, exc
            )
            return
        if thread.context is not None:
            context = thread.context
            await _retrying(
                lambda: self.sessions.add_input(
                    work.session_id,
                    user_id=self.bot_user_id,
                    text=context,
                    source_ts=f"{work.before_ts}/context",
                )
            )
        for reply in thread.later:
            await _retrying(
                functools.partial(
                    self.sessions.add_input,
                    work.session_id,
                    user_id=reply.user_id,
                    text=reply.text,  # as typed: the harness reads a postmortem request itself
                    source_ts=reply.ts,
                )
            )

    async def _add_files(self, work: Wake) -> None:
        """The contents of the message's small text files, as an input of their own."""
        if not work.files or self.client.token is None:
            return
        contents = await file_contents(self.client.token, work.files)
        if contents is not None:
            await _retrying(
                lambda: self.sessions.add_input(
                    work.session_id,
                    user_id=work.user_id or self.bot_user_id,
                    text=contents,
                    source_ts=f"{work.source_ts}/files",
                )
            )

    async def _reply_usage(self, work: ReplyUsage) -> None:
        try:
            await slack_call(
                "chat.postMessage",
                self.client.chat_postMessage(
                    channel=work.channel_id,
                    thread_ts=work.thread_ts,
                    text=usage_text(self.bot_user_id),
                ),
            )
        except SlackCallFailed as exc:
            logger.warning("usage reply in %s failed: %s", work.channel_id, exc)

    async def _finish_stop(self, work: Stopped) -> None:
        if work.approval is not None and work.approval.message_ts:
            message = render_approval(
                work.approval, session_id=work.thread.session_id, requester_id=work.requester_id
            )
            try:
                await self.poster.update_status(
                    work.thread.channel_id, work.approval.message_ts, message, final=True
                )
            except SlackCallFailed as exc:
                logger.warning("approval message of %s not updated: %s", work.thread, exc)
        if work.cancelled is not None:
            await self.cancel_running(work.cancelled)
            message = render_stopped(user_id=work.user_id)
            await self._close_status(work.thread)
        else:
            message = notice("Nothing is running in this thread.")
        if self.surface is not None:  # away from processing: Slack leaves that to the app
            await self.surface.end(work.thread, AgentStatus.CLOSED)
        key = f"{work.thread.session_id}:stop:{work.request_ts}"
        try:
            await self.poster.post(work.thread, key, message, kind="notice")
        except SlackCallFailed as exc:
            logger.warning("stop reply for %s failed: %s", work.thread.session_id, exc)

    async def _close_status(self, thread: Thread) -> None:
        """The stopped turn's status message gets its final view: stopped, with no live
        Stop button (the cancelled step posts no final view of its own)."""
        try:
            session = await _retrying(lambda: self.sessions.get(thread.session_id))
        except DatabaseUnavailable as exc:
            logger.warning("status of %s not closed: %s", thread.session_id, exc)
            return
        if session is None:
            return
        turn = Checkpoint.from_json(session.checkpoint).turns
        ts = await self.poster.recorded_ts(f"{thread.session_id}:status:{turn}")
        if ts is None:  # nothing shown for this turn (or Slack's agent surface shows it)
            return
        stopped = Progress(thread.session_id, "Stopped", finished=True)  # the reply says who
        try:
            await self.poster.update_status(
                thread.channel_id, ts, render_status(stopped), final=True
            )
        except SlackCallFailed as exc:
            logger.warning("status of %s not closed: %s", thread.session_id, exc)


async def _retrying(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, again after each of ``RETRY_DELAYS_S`` while the database is unavailable.

    Each call is one store statement or transaction, so a failed one wrote nothing (a
    busy SQLite writer, a PostgreSQL failover) and trying again is safe.

    Raises:
        DatabaseUnavailable: still unavailable after the last retry.
    """
    for delay_s in RETRY_DELAYS_S:
        try:
            return await call()
        except DatabaseUnavailable as exc:
            logger.warning("database unavailable (%s); retrying in %.1f s", exc, delay_s)
            await asyncio.sleep(delay_s)
    return await call()


def early_reply_key(key: SessionKey) -> str:
    """The sighting that says ``key``'s thread had a reply before it had a session."""
    return f"early-reply:{key.org_id}:{key.channel_id}:{key.thread_ts}"


def _worth_a_look(message: InboundMessage) -> bool:
    """Cheap filters that need no database: bots, deletions, top-level chatter."""
    if message.from_bot or message.kind in (MessageKind.DELETED, MessageKind.OTHER):
        return False
    return message.mentions_bot or message.in_thread or message.kind is MessageKind.EDITED


def _needs_session(message: InboundMessage) -> bool:
    """A new top-level mention cannot have a session yet (``open_or_join`` joins if it does)."""
    return message.in_thread or message.kind is MessageKind.EDITED or not message.mentions_bot
