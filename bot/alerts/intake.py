"""The alert intake: what one alert does to its problem's thread (issue #27).

Both ways in use it: the webhook (``POST /alerts/<source>``, ``bot.alerts.webhook``)
records each delivery (``record``) before it answers and takes the recorded alerts
off the request path (``take_pending``); a watched channel's alerting-app message,
whose thread root already exists, calls ``take_alert`` with ``posted_thread``.

Each alert is recorded once per ``(org, source, delivery_id)`` (a webhook retry is a
no-op), then decided in ONE database transaction that also accounts for it
(``memory_store.AlertStore.decide``: the delivery row names the thread it went to):

- **start**: no open thread for ``(org, dedupe_key)`` and fewer than
  ``max_open_per_org`` open alert threads: the bot posts the alert as a thread root
  (webhook) or uses the posted one (watched channel), opens the thread's durable
  session with the alert as its first input (``SessionStore.open_or_join``, as a
  mention does: same sandbox, gateway, approvals, caps, record), posts "on it" with a
  Stop button and enqueues the first step. A thread that already has a session (a
  person mentioned the bot there) is joined, not started twice;
- **repeat**: the thread exists: a reply "still firing, 3rd time since 14:02" and an
  input to its session; repeats within ``burst_window_s`` of the last input are
  counted (the next reply says how many) but are not a new input each;
- **resolved**: "resolved at 14:31" in the thread and to the session, which is asked
  whether its hypothesis agrees; the thread closes (a later firing opens a new one);
- **folded**: over the cap (or the org is over its daily cost cap): the alert goes
  to the storm summary thread of its channel (or of ``summary_channel_id``), listed
  there; nothing is dropped silently. A resolved thread keeps its place under the cap
  while its session runs (it was asked about the resolve).

A session that was stopped (``stop``, the Stop button) stops listening: later alerts
of its problem are noted in the thread but do not wake it; a person's reply does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts.model import Alert, for_model
from bot.alerts.render import (
    note_message,
    on_it_message,
    repeat_note,
    resolved_note,
    root_message,
)
from bot.alerts.summary import StormSummaries
from bot.errors import ContentTooLong, SlackCallFailed, SlackRefused, slack_call
from bot.slack.intake import early_reply_key
from bot.slack.poster import SlackPoster, Thread
from bot.slack.thread_context import thread_so_far
from harness import Checkpoint, Requester
from memory_store import (
    AlertDecision,
    AlertStore,
    AlertThread,
    DatabaseUnavailable,
    InboundDedupe,
    NewAlert,
    SessionKey,
    SessionStatus,
    SessionStore,
)

logger = logging.getLogger(__name__)

Enqueue = Callable[[str, str], Awaitable[None]]
BudgetLeft = Callable[[str], Awaitable[bool]]
"""``org_id`` → whether the org may start another session today (its daily cost cap)."""

ALERT_KIND = "alert"
"""The inbox kind of an alert's later inputs (repeats, the resolve): data for the model."""
DEFAULT_MAX_OPEN = 5
RESUME_AFTER_S = 30.0
"""A thread decided but not in Slack this long after is taken to be a crash's leftover."""

DEFAULT_BURST_WINDOW_S = 60.0


@dataclass(frozen=True)
class AlertPolicy:
    """Storm control and grouping (settings ``WARROOM_ALERT_*``).

    Attributes:
        max_open_per_org: most alert sessions per org at once (open threads whose session
            was not stopped, and resolved ones whose session still runs).
        burst_window_s: repeats closer than this to the last input are one input.
        summary_channel_id: where the storm summary thread goes (None: each channel
            has its own, listing only the alerts routed or posted there).
    """

    max_open_per_org: int = DEFAULT_MAX_OPEN
    burst_window_s: float = DEFAULT_BURST_WINDOW_S
    summary_channel_id: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What ``take_alert`` did with one alert.

    ``kind``: ``started`` (a new session), ``joined`` (the thread's existing session,
    e.g. a person had mentioned the bot there), ``repeat``, ``burst`` (counted, no new
    input), ``resolved``, ``folded`` (in the storm summary thread), ``noted`` (in its
    thread, the session stopped listening), ``duplicate`` (a delivery seen before).
    ``channel_id``/``thread_ts``: where the alert is now (None for ``duplicate``).
    """

    kind: str
    session_id: str | None = None
    channel_id: str | None = None
    thread_ts: str | None = None


@dataclass
class AlertIntake:
    """The core both halves call (see the module docstring).

    Attributes:
        store: the alert registry (deliveries and threads).
        sessions: durable sessions (the same store the Slack intake uses).
        client: the bot's Web API client (posts the alert's thread root).
        poster: idempotent thread posts (the outbox).
        enqueue: ``(session_id, token)`` → wake a worker.
        bot_user_id: who the alert sessions are "requested by" (the bot itself).
        policy: storm control and grouping.
        budget_left: the org's daily cost cap check (None: no cap).
        dedupe: the Slack intake's sightings: a watched channel's alert thread that had
            people's replies before its session gets them (None: not looked for).
        clock: aware UTC now.
    """

    store: AlertStore
    sessions: SessionStore
    client: AsyncWebClient
    poster: SlackPoster
    enqueue: Enqueue
    bot_user_id: str
    policy: AlertPolicy = field(default_factory=AlertPolicy)
    budget_left: BudgetLeft | None = None
    dedupe: InboundDedupe | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    _summaries: StormSummaries = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._summaries = StormSummaries(
            self.store, self.client, self.poster, self.policy.max_open_per_org
        )

    async def record(self, routed: Sequence[tuple[Alert, str | None]], *, org_id: str) -> list[int]:
        """Record one delivery's alerts, each with the channel a new thread of it goes
        to, in one transaction; returns the new rows' ids (a retried delivery's alerts
        are already there: not returned).

        Raises:
            DatabaseUnavailable: nothing was recorded.
        """
        rows = [_new(alert, org_id=org_id, channel_id=channel) for alert, channel in routed]
        return await self.store.record(rows)

    async def record_groups(
        self, deliveries: Sequence[Sequence[tuple[Alert, str | None]]], *, org_id: str
    ) -> list[list[int]]:
        """``record`` for several deliveries in one transaction (the webhook's group
        commit); per delivery, the new rows' ids.

        Raises:
            DatabaseUnavailable: nothing was recorded.
        """
        groups = [
            [_new(alert, org_id=org_id, channel_id=channel) for alert, channel in routed]
            for routed in deliveries
        ]
        return await self.store.record_groups(groups)

    async def take_pending(
        self, *, limit: int = 100, before_each: Callable[[], Awaitable[None]] | None = None
    ) -> int:
        """Take every recorded, not yet taken alert (oldest first); returns how many.

        Call it from one task per process (decisions are then in arrival order); the
        store serialises decisions across processes. ``before_each`` is awaited before each
        alert (the taker lets requests being recorded go first). An alert that fails for
        any other reason than Slack or the database (unreadable, a bug) is logged and kept
        on record as failed (``AlertStore.fail``): it never holds up the ones after it.

        Raises:
            DatabaseUnavailable: the database went away (what was taken stays taken).
        """
        taken = 0
        while True:
            batch = await self.store.pending(limit=limit)
            if not batch:
                return taken
            for row in batch:
                if before_each is not None:
                    await before_each()
                posted = (
                    (row.channel_id, row.posted_ts) if row.channel_id and row.posted_ts else None
                )
                try:
                    alert = Alert.from_json(row.alert_json)
                    await self._take(row.id, alert, row.org_id, row.channel_id, posted)
                except SlackCallFailed as exc:  # decided and accounted; Slack is told later
                    logger.warning("alert %s: a post failed: %s", row.id, exc)
                except DatabaseUnavailable:
                    raise
                except Exception:  # this one alert: never every later one behind it
                    logger.exception("alert %s cannot be taken; on record as failed", row.id)
                    await self.store.fail(row.id)
            taken += len(batch)

    async def take_alert(
        self,
        alert: Alert,
        *,
        org_id: str,
        route: str | None = None,
        posted_thread: tuple[str, str] | None = None,
    ) -> Outcome:
        """Record and take one alert now (the watched channels' entry point).

        Args:
            alert: the alert (its ``delivery_id``: e.g. the Slack message's ts, so a
                redelivered event is taken once).
            org_id: the org (``enterprise_id or team_id``).
            route: the channel a new thread goes to (webhook alerts; None with
                ``posted_thread``).
            posted_thread: ``(channel_id, ts)`` of the message that is the alert, when
                it is already in Slack (a watched channel): the thread is opened on it.

        Raises:
            ValueError: neither ``route`` nor ``posted_thread``.
            DatabaseUnavailable: the database could not be reached (nothing recorded).
            SlackCallFailed: a post failed (the alert is recorded and accounted for;
                ``take_pending`` does not retry it, the thread row says where it is).
        """
        if route is None and posted_thread is None:
            raise ValueError("an alert needs a route channel or the thread it was posted in")
        channel = posted_thread[0] if posted_thread else route
        row = _new(alert, org_id=org_id, channel_id=channel, posted_thread=posted_thread)
        ids = await self.store.record([row])
        if not ids:
            return Outcome("duplicate")
        return await self._take(ids[0], alert, org_id, channel, posted_thread)

    async def resume_openings(self, *, older_than_s: float = RESUME_AFTER_S) -> int:
        """Open the threads that were decided but never reached Slack (a crash or a
        passing Slack failure in between); returns how many were tried.

        Raises:
            DatabaseUnavailable: the database could not be reached.
        """
        stale = await self.store.stale_openings(older_than_s=older_than_s)
        for thread, delivery_row, alert_json in stale:
            decision = AlertDecision("start", delivery_row, thread, created_thread=True)
            try:
                alert = Alert.from_json(alert_json)
                if thread.kind == "summary":
                    await self._fold(decision, thread)
                else:
                    await self._start(decision, thread, alert, thread.org_id)
            except SlackCallFailed as exc:
                logger.warning("alert thread %s still not opened: %s", thread.id, exc)
            except DatabaseUnavailable:
                raise
            except Exception:  # never tried for ever in front of the others
                logger.exception("alert thread %s cannot be opened; closed as failed", thread.id)
                await self.store.abandon(thread.id, delivery_row)
        return len(stale)

    # ----- one alert -------------------------------------------------------------------

    async def _take(
        self,
        delivery_row: int,
        alert: Alert,
        org_id: str,
        channel_id: str | None,
        posted_thread: tuple[str, str] | None,
    ) -> Outcome:
        may_start = True
        if alert.firing and self.budget_left is not None:
            may_start = await self.budget_left(org_id)
        decision = await self.store.decide(
            delivery_row,
            max_open=self.policy.max_open_per_org if may_start else 0,
            burst_window_s=self.policy.burst_window_s,
            summary_channel_id=self.policy.summary_channel_id or channel_id,
        )
        thread = decision.thread
        if decision.kind == "taken":  # another process took it
            return Outcome("duplicate")
        if thread is None:  # a resolve with no open thread, already its own Slack message
            where = posted_thread or (channel_id, None)
            return Outcome(decision.kind, None, where[0], where[1])
        if decision.kind == "start":
            return await self._start(decision, thread, alert, org_id)
        if decision.kind == "folded":
            return await self._fold(decision, thread)
        return await self._follow(decision, thread, alert)

    async def _start(
        self, decision: AlertDecision, thread: AlertThread, alert: Alert, org_id: str
    ) -> Outcome:
        """Post the root (unless the alert is one), open the session, say "on it", wake it."""
        channel_id = thread.channel_id
        thread_ts = thread.thread_ts
        if thread_ts is None:
            message = root_message(alert)
            try:
                posted = await slack_call(
                    "chat.postMessage",
                    self.client.chat_postMessage(
                        channel=channel_id,
                        text=message.text,
                        blocks=list(message.blocks),
                        unfurl_links=False,
                        unfurl_media=False,
                    ),
                )
            except SlackCallFailed as exc:
                if not isinstance(exc, SlackRefused | ContentTooLong):
                    raise  # passing: the thread stays "opening", resume_openings tries again
                logger.error(
                    "alert %r not opened in %s: Slack refused (%s); fix the route or invite "
                    "the bot; it stays on record as failed",
                    alert.title,
                    channel_id,
                    exc,
                )
                await self.store.abandon(thread.id, decision.delivery_row)
                raise
            thread_ts = str(posted["ts"])
        session_id = uuid.uuid4().hex
        checkpoint = Checkpoint(
            session_id, org_id, channel_id, Requester(self.bot_user_id), title=alert.title
        )
        opened = await self.sessions.open_or_join(
            SessionKey(org_id, channel_id, thread_ts),
            requester_id=self.bot_user_id,
            initial_checkpoint=checkpoint.to_json(),
            text=for_model(alert),
            source_ts=f"alert:{decision.delivery_row}",
            session_id=session_id,
        )
        await self.store.opened(thread.id, thread_ts=thread_ts, session_id=opened.session_id)
        session_key = SessionKey(org_id, channel_id, thread_ts)
        if (
            opened.created
            and thread.thread_ts is not None  # the alert is a Slack message: people may reply
            and await self._had_replies(session_key)
        ):
            await self._add_replies(opened.session_id, session_key)
        if opened.created:
            where = Thread(opened.session_id, channel_id, thread_ts)
            key = f"{opened.session_id}:alert:on-it"
            await self.poster.post(where, key, on_it_message(opened.session_id), kind="notice")
        if opened.token is not None:
            await self.enqueue(opened.session_id, opened.token)
        kind = "started" if opened.created else "joined"
        return Outcome(kind, opened.session_id, channel_id, thread_ts)

    async def _had_replies(self, key: SessionKey) -> bool:
        """Whether a person replied in the alert's own thread before its session existed
        (the Slack intake remembers such a reply: ``early_reply_key``)."""
        return self.dedupe is not None and await self.dedupe.seen(early_reply_key(key))

    async def _add_replies(self, session_id: str, key: SessionKey) -> None:
        """Give the new session the people's replies already in the thread, each as an
        input (as a mention-started session gets them), before its first step."""
        given = frozenset(item.source_ts for item in await self.sessions.inbox(session_id))
        try:
            thread = await thread_so_far(
                self.client,
                channel_id=key.channel_id,
                thread_ts=key.thread_ts,
                mention_ts=key.thread_ts,
                bot_user_id=self.bot_user_id,
                skip_ts=given,
            )
        except SlackCallFailed as exc:
            logger.warning(
                "alert session %s starts without the thread's replies: %s", session_id, exc
            )
            return
        for reply in thread.later:
            await self.sessions.add_input(
                session_id, user_id=reply.user_id, text=reply.text, source_ts=reply.ts
            )

    async def _follow(self, decision: AlertDecision, thread: AlertThread, alert: Alert) -> Outcome:
        """A repeat, a burst or a resolve of an open thread."""
        outcome = Outcome(decision.kind, thread.session_id, thread.channel_id, thread.thread_ts)
        if decision.kind == "burst" or thread.session_id is None or thread.thread_ts is None:
            return outcome
        if decision.kind == "resolved":
            since = alert.starts_at or thread.first_at
            note = resolved_note(alert, now=self.clock(), first_at=since)
            ask = (
                f"{note} Say in one or two lines whether this agrees with your hypothesis "
                "of the cause, and what, if anything, is left to check."
            )
        else:
            since = alert.starts_at or thread.first_at
            note = repeat_note(count=thread.firing_count, first_at=since)
            ask = note
        where = Thread(thread.session_id, thread.channel_id, thread.thread_ts)
        key = f"{thread.session_id}:alert:{decision.delivery_row}"
        await self.poster.post(where, key, note_message(note), kind="notice")
        session = await self.sessions.get(thread.session_id)
        if session is None or session.status is SessionStatus.CANCELLED:
            return Outcome("noted", thread.session_id, thread.channel_id, thread.thread_ts)
        token = await self.sessions.notify(
            thread.session_id,
            kind=ALERT_KIND,
            text=for_model(alert, note=ask),
            source_key=f"alert:{decision.delivery_row}",
        )
        if token is not None:
            await self.enqueue(thread.session_id, token)
        return outcome

    async def _fold(self, decision: AlertDecision, summary: AlertThread) -> Outcome:
        """Into its channel's storm summary thread (``StormSummaries``)."""
        thread_ts = await self._summaries.fold(summary, opened_it=decision.created_thread)
        return Outcome("folded", None, summary.channel_id, thread_ts)

    async def flush(self) -> None:
        """Wait until every storm summary shows its last tally (tests; shutdown)."""
        await self._summaries.flush()


def _new(
    alert: Alert,
    *,
    org_id: str,
    channel_id: str | None,
    posted_thread: tuple[str, str] | None = None,
) -> NewAlert:
    delivery = alert.delivery_id or uuid.uuid4().hex
    return NewAlert(
        org_id=org_id,
        source=alert.source,
        delivery_id=delivery,
        dedupe_key=alert.dedupe_key,
        firing=alert.firing,
        title=alert.title,
        alert_json=alert.to_json(),
        channel_id=channel_id,
        posted_ts=posted_thread[1] if posted_thread else None,
    )
