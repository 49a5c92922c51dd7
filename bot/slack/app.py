"""The Slack app: a slack-bolt ``AsyncApp`` whose listeners record, ack, then do the rest.

One set of handlers serves Socket Mode and HTTP mode (``slack_runtime``). Bolt verifies
HTTP requests (``X-Slack-Signature``: ``v0=`` HMAC-SHA256 of ``v0:{timestamp}:{body}``
with the signing secret; a timestamp more than 5 minutes off → 401) and acks the
bot's own events itself. Listeners:

- ``app_mention`` and a catch-all ``message`` (every subtype, so no event goes
  unacked and retried): ``Intake.receive`` (dedupe, record), ack, then
  ``Intake.follow_up`` (enqueue, replies);
- ``/agent``: ack, then ``skills …`` (``SkillsCommands``), ``memory …``, ``egress …``
  or ``watch …`` (``WatchCommand``),
  each replying through the command's ``response_url``; anything else gets the usage in
  the ack itself;
- ``view_submission`` of the skills editor: acked with the save's result (≤ 3 s);
- the ``warroom_stop`` button and Slack's native Stop (``agent_session_stopped``): ack,
  then cancel and reply, as the ``stop`` reply does;
- the ``warroom_approve`` / ``warroom_deny`` buttons of an approval message: ack, then
  record the decision once and wake the session, or tell the clicker why not (§13).

Record, then ack (docs/architecture.md §3): a message event is deduped and recorded in
the inbox before the ack, so an acked input is never lost; what is slow (the enqueue,
Slack replies, fetching a thread's history) runs after the ack in ``Background`` tasks
of this long-running process (not for FaaS, where such tasks would be frozen). Recording
is bounded and has a deadline (``recording.Recorder``): when the database cannot record
an input within ``RECORD_BUDGET_S`` of its arrival the event is not acked and Slack
retries it (up to 3 times: at once, after ~1 min, after ~5 min). Measured with
``bench/slack_ack.py`` against bare bolt plus raw asyncpg doing the same writes.
A recorded input whose wake-up is lost is not lost either: the sweeper re-enqueues it.
``process_before_response=True`` sends each response when its listener returns.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.logs import log_context
from bot.slack.agent_surface import AgentSurface
from bot.slack.approval_messages import APPROVE_ACTION_ID, DENY_ACTION_ID
from bot.slack.approvals import ApprovalButtons, Approvers
from bot.slack.background import Background
from bot.slack.egress import USAGE as EGRESS_USAGE
from bot.slack.egress import EgressCommands
from bot.slack.inbound import org_id_of, parse_message_event
from bot.slack.installation import Installation
from bot.slack.intake import DEDUPE_TTL_S, FollowUp, Intake
from bot.slack.memory import USAGE as MEMORY_USAGE
from bot.slack.memory import MemoryCommands
from bot.slack.poster import SlackPoster
from bot.slack.postmortem import PostmortemCommand
from bot.slack.recording import (
    MAX_CONCURRENT_INPUTS,
    Recorder,
)
from bot.slack.related import USAGE as RELATED_USAGE
from bot.slack.related import PrivateChannels, RelatedCommand
from bot.slack.render import STOP_ACTION_ID
from bot.slack.signatures import SignedRequests
from bot.slack.skills.command import USAGE as SKILLS_USAGE
from bot.slack.skills.command import SkillsCommand, SkillsCommands
from bot.slack.skills.editor import Submission
from bot.slack.timeline import USAGE as RECORD_USAGE
from bot.slack.timeline import TimelineCommand
from bot.slack.usage import USAGE as SPEND_USAGE
from bot.slack.usage import UsageCommand
from bot.slack.watch import Watch
from bot.slack.watch_command import USAGE as WATCH_USAGE
from bot.slack.watch_command import WatchCommand
from harness import IncidentRecord
from memory_store import (
    Cancelled,
    EgressLog,
    FileStore,
    InboundDedupe,
    ModelCallLog,
    RecallStore,
    SessionStore,
)

logger = logging.getLogger(__name__)

AGENT_USAGE = (
    "`/agent` has the commands `skills`, `memory`, `egress`, `usage`, `timeline`, "
    "`postmortem`, `watch` and `related`.\n"
    + "\n".join(
        (
            SKILLS_USAGE,
            MEMORY_USAGE,
            EGRESS_USAGE,
            SPEND_USAGE,
            RECORD_USAGE,
            WATCH_USAGE,
            RELATED_USAGE,
        )
    )
)
RECORD_COMMANDS = ("usage", "timeline", "postmortem")  # the incident record's commands (§14, §15)
AGENT_COMMANDS = ("skills", "memory", "egress", "watch", *RECORD_COMMANDS, "related")
SKILL_VIEWS = re.compile("^warroom_skill_")
AGENT_STOP_EVENT = "agent_session_stopped"
"""Slack's native Stop of an agent session (docs.slack.dev, "agent_session_stopped")."""


@dataclass(frozen=True)
class SlackDeps:
    """Everything the Slack app needs, built by the composition root.

    Attributes:
        sessions: durable sessions (records inputs, cancels).
        dedupe: inbound ``event_id`` / ``"<channel>:<ts>"`` sightings.
        files: the org file store (not read by these listeners yet).
        client: the bot's Web API client (bot token; ``base_url`` points tests at a fake).
        signing_secret: verifies HTTP-mode requests (unused in Socket Mode).
        bot_user_id: the bot's user id, from ``auth.test`` at start.
        enqueue: ``(session_id, token)`` → wake a worker; must not block the loop.
        cancel_running: kills the sandbox process of a cancelled step.
        skills: the ``/agent skills`` handlers.
        poster: idempotent thread posts.
        strict_channels: channel ids where only @mentions steer.
        installation: the installing workspace and Grid org (``auth.test``); maps a
            modal's ``view.app_installed_team_id`` to the org.
        external_may_start: Slack Connect users of other orgs may start sessions
            (``WARROOM_EXTERNAL_USERS_START``; default: only the installing org's).
        dedupe_ttl_s: how long a seen event is remembered (Slack: ≥ 10 min).
        ledger: the model-call ledger ``/agent usage`` reads (None: the command is off).
        record: the incident record ``/agent timeline`` posts (None: the command is off).
        egress: the egress gateway's audit log, for ``/agent egress`` (None: not offered).
        approvers: who may decide approvals (``WARROOM_APPROVERS``; default: any member
            of the installing org).
        surface: Slack's agent surface (agent sessions): ``stop`` closes the session.
        bot_id: the bot's ``bot_id`` (``auth.test``): its own posts are never alerts.
        watch: the watched (alert) channels (None: none is watched; ``/agent watch``
            says so).
        recall: past incidents' rows, for ``/agent related`` and for remembering which
            channels are private (None: neither).
    """

    sessions: SessionStore
    dedupe: InboundDedupe
    files: FileStore
    client: AsyncWebClient
    signing_secret: str
    bot_user_id: str
    enqueue: Callable[[str, str], Awaitable[None]]
    cancel_running: Callable[[Cancelled], Awaitable[None]]
    skills: SkillsCommands
    poster: SlackPoster
    strict_channels: frozenset[str] = frozenset()
    dedupe_ttl_s: float = DEDUPE_TTL_S
    external_may_start: bool = False
    installation: Installation | None = None
    ledger: ModelCallLog | None = None
    record: IncidentRecord | None = None
    egress: EgressLog | None = None
    approvers: Approvers = field(default_factory=Approvers)
    surface: AgentSurface | None = None
    bot_id: str = ""
    watch: Watch | None = None
    recall: RecallStore | None = None

    def intake(self) -> Intake:
        """The intake over these dependencies."""
        return Intake(
            sessions=self.sessions,
            dedupe=self.dedupe,
            client=self.client,
            poster=self.poster,
            bot_user_id=self.bot_user_id,
            enqueue=self.enqueue,
            cancel_running=self.cancel_running,
            strict_channels=self.strict_channels,
            dedupe_ttl_s=self.dedupe_ttl_s,
            external_may_start=self.external_may_start,
            surface=self.surface,
            watch=self.watch,
        )


def build_app(*, deps: SlackDeps, background: Background | None = None) -> AsyncApp:
    """The bolt app with Warroom's listeners; after-ack work runs in ``background``
    (default: a new one; pass one to ``drain`` it at shutdown or in tests)."""
    app = AsyncApp(
        client=deps.client,
        signing_secret=deps.signing_secret,
        request_verification_enabled=False,  # bolt's logs each refused body: ours does not
        before_authorize=SignedRequests(deps.signing_secret),
        process_before_response=True,
        name="warroom",
    )
    listeners = _Listeners(deps, deps.intake(), background or Background())
    app.event("app_mention")(listeners.on_message)
    app.event("message")(listeners.on_message)
    app.event(AGENT_STOP_EVENT)(listeners.on_agent_stop)
    app.command("/agent")(listeners.on_agent)
    app.view(SKILL_VIEWS)(listeners.on_skill_view)
    app.action(STOP_ACTION_ID)(listeners.on_stop)
    app.action(APPROVE_ACTION_ID)(listeners.on_approve)
    app.action(DENY_ACTION_ID)(listeners.on_deny)
    return app


class _Listeners:
    """The bolt listeners: thin; messages are recorded then acked, the rest runs after."""

    def __init__(self, deps: SlackDeps, intake: Intake, background: Background) -> None:
        self._deps = deps
        self._intake = intake
        self._background = background
        self._input_slots = asyncio.Semaphore(MAX_CONCURRENT_INPUTS)
        self._recorder = Recorder(intake, background)
        self._private = PrivateChannels(deps.recall) if deps.recall is not None else None
        self._approvals = ApprovalButtons(
            sessions=deps.sessions,
            client=deps.client,
            enqueue=deps.enqueue,
            approvers=deps.approvers,
            installation=deps.installation,
        )

    async def on_message(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        message = parse_message_event(body, bot_user_id=self._deps.bot_user_id)
        with log_context(org_id=message.org_id, channel_id=message.channel_id):
            # Unrecorded in time: InputNotRecorded, no ack; bolt answers 500 (HTTP) or sends
            # no ack (Socket Mode), and Slack retries.
            work = await self._recorder.record(message, event_id=str(body.get("event_id")))
            await ack()
            if work is not None:  # the task inherits the log context
                self._background.spawn(self._follow(work), name=f"event {body.get('event_id')}")
            private = self._private and self._private.private_channel_of(body, message.org_id)
            if self._private is not None and private:
                self._background.spawn(self._private.remember(*private), name="private channel")

    async def on_agent_stop(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Slack's native Stop (``agent_session_stopped``): ack, then the ``stop`` reply's
        cancellation (``Intake.native_stop``)."""
        await ack()
        self._background.spawn(self._agent_stop(body), name="native stop")

    async def _agent_stop(self, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        async with self._input_slots:
            stopped = await self._intake.native_stop(
                org_id=org_id_of(body),
                channel_id=str(event.get("channel") or ""),
                thread_ts=str(event.get("thread_ts") or ""),
                user_id=str(event.get("user") or ""),
                event_id=str(body.get("event_id") or ""),
                event_ts=str(event.get("event_ts") or ""),
            )
        await self._follow(stopped)

    async def on_stop(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        self._background.spawn(self._stop(body), name="stop button")

    async def on_approve(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        self._background.spawn(self._decide(body, approve=True), name="approve button")

    async def on_deny(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        self._background.spawn(self._decide(body, approve=False), name="deny button")

    async def _decide(self, body: dict[str, Any], *, approve: bool) -> None:
        async with self._input_slots:
            await self._approvals.press(body, approve=approve, org_id=_interaction_org(body))

    async def on_agent(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        words = str(body.get("text", "")).split()
        if not words or words[0].lower() not in AGENT_COMMANDS:  # the usage goes in the
            await ack(text=AGENT_USAGE)  # ack: it shows in DMs and channels without the bot too
            return
        await ack()
        self._background.spawn(self._agent(body), name="/agent")

    async def on_skill_view(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        submission = Submission.from_body(body, installation=self._deps.installation)
        response = await self._deps.skills.handle_submission(submission)
        await ack(**(response or {}))

    async def _stop(self, body: dict[str, Any]) -> None:
        action = body["actions"][0]
        async with self._input_slots:
            pressed = await self._intake.press_stop(
                str(action.get("value") or ""),
                org_id=_interaction_org(body),
                user_id=str(body["user"]["id"]),
                action_ts=str(action.get("action_ts") or ""),
            )
        await self._follow(pressed)

    async def _follow(self, work: FollowUp | None) -> None:
        if work is not None:
            await self._intake.follow_up(work)

    async def _agent(self, body: dict[str, Any]) -> None:
        command = SkillsCommand.from_body(body)
        verb = str(body.get("text", "")).split()[0].lower()
        if verb == "memory":
            await MemoryCommands(self._deps.skills).handle(command)
            return
        if verb == "watch":
            await WatchCommand(self._deps.watch, self._deps.skills).handle(command)
            return
        if verb in RECORD_COMMANDS:
            await self._record_command(verb, command)
            return
        if verb == "related":
            await self._related(command)
            return
        if verb == "egress" and self._deps.egress is not None:
            commands = EgressCommands(self._deps.skills, self._deps.sessions, self._deps.egress)
            await commands.handle(command)
        elif verb == "egress":
            await self._deps.skills.tell(command, "The egress log is not available here.")
        else:
            await self._deps.skills.handle_command(command)

    async def _record_command(self, verb: str, command: SkillsCommand) -> None:
        """``/agent usage``, ``timeline`` and ``postmortem`` (the incident record's commands)."""
        deps = self._deps
        command = replace(command, words=(verb, *command.words[1:]))
        if verb == "usage" and deps.ledger is not None:
            await UsageCommand(deps.ledger, deps.skills).handle(command)
        elif verb == "timeline" and deps.record is not None:
            await TimelineCommand(deps.record, deps.client, deps.skills).handle(command)
        elif verb == "postmortem":
            starter = PostmortemCommand(deps.sessions, deps.client, deps.enqueue, deps.skills)
            await starter.handle(command)
        else:
            await deps.skills.tell(command, f"`/agent {verb}` is not set up here.")

    async def _related(self, command: SkillsCommand) -> None:
        """``/agent related`` (``bot.slack.related``)."""
        deps = self._deps
        if deps.recall is None:
            await deps.skills.tell(command, "`/agent related` is not set up here.")
            return
        url = deps.record.workspace_url if deps.record is not None else None
        await RelatedCommand(deps.recall, deps.skills, url).handle(command)


def _interaction_org(body: dict[str, Any]) -> str:
    """``enterprise.id or team.enterprise_id or team.id`` of an interaction payload."""
    enterprise = body.get("enterprise") or {}
    team = body.get("team") or {}
    return str(
        enterprise.get("id") or team.get("enterprise_id") or team.get("id") or org_id_of(body)
    )
