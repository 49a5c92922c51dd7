"""The real Slack app, running, for tests: HTTP on 127.0.0.1, a real store, the fake Slack API.

``running_edge`` builds what the composition root builds — a migrated database
(SQLite in a temporary directory, or PostgreSQL), the session store, dedupe, poster,
skills commands, the bolt ``AsyncApp`` — and serves it over HTTP on a free port.
``enqueue`` and ``cancel_running`` are recorders (the worker side is not under test
here). Requests are signed as Slack signs them (docs.slack.dev, "Verifying requests
from Slack"): ``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:{ts}:{body}">`` and
``X-Slack-Request-Timestamp``.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts.intake import AlertIntake, AlertPolicy
from bot.alerts.webhook import Taker
from bot.slack.agent_surface import AgentSurface
from bot.slack.app import SlackDeps, build_app
from bot.slack.approvals import Approvers
from bot.slack.background import Background
from bot.slack.installation import Installation
from bot.slack.modes import HttpMode, RunningSlack, start
from bot.slack.poster import SlackPoster
from bot.slack.skills.command import SkillsCommands
from bot.slack.skills.edit_policy import EditPolicy
from bot.slack.watch import Watch, WatchPolicy
from harness import IncidentRecord
from memory_store import (
    DEFAULT_LIMITS,
    AlertStore,
    Cancelled,
    Database,
    EgressLog,
    FileStore,
    InboundDedupe,
    IncidentLog,
    Limits,
    ModelCallLog,
    Outbox,
    RecallStore,
    Session,
    SessionKey,
    SessionStore,
    WatchedChannels,
)
from tests.bot.conftest import load_case
from tests.fakes.slack_api import BOT_ID, BOT_USER_ID, TEAM_ID, WORKSPACE_URL, FakeSlackApi

SIGNING_SECRET = "fake-signing-secret"
CHANNEL = "C0FAKEINC"
_event_ids = itertools.count(1000)


def sign(body: bytes, *, timestamp: int, secret: str = SIGNING_SECRET) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def event(case: str, **changes: Any) -> dict[str, Any]:
    """An Events API body from ``case`` with a fresh ``event_id`` and ``event`` fields changed.

    ``ts`` also sets ``event_ts``; a change to None removes the field.
    """
    body: dict[str, Any] = copy.deepcopy(load_case(case))
    body["event_id"] = f"Ev0TEST{next(_event_ids):05d}"
    if "ts" in changes:
        changes.setdefault("event_ts", changes["ts"])
    for name, value in changes.items():
        if value is None:
            body["event"].pop(name, None)
        else:
            body["event"][name] = value
    return body


@dataclass
class Enqueued:
    """A recording ``enqueue``: each wake-up with the session's inbox size when it came.

    ``hold()`` makes calls wait until ``release()`` (a slow broker); ``waiting`` counts
    the calls held.
    """

    sessions: SessionStore
    calls: list[tuple[str, str]] = field(default_factory=list)
    inbox_sizes: list[int] = field(default_factory=list)
    gate: asyncio.Event | None = None
    waiting: int = 0

    async def __call__(self, session_id: str, token: str) -> None:
        if self.gate is not None:
            self.waiting += 1
            await self.gate.wait()
            self.waiting -= 1
        self.inbox_sizes.append(len(await self.sessions.inbox(session_id)))
        self.calls.append((session_id, token))

    def hold(self) -> None:
        self.gate = asyncio.Event()

    def release(self) -> None:
        assert self.gate is not None
        self.gate.set()


@dataclass
class SlackEdge:
    """The running app and everything around it."""

    slack_api: FakeSlackApi
    database: Database
    sessions: SessionStore
    dedupe: InboundDedupe
    files: FileStore
    outbox: Outbox
    poster: SlackPoster
    enqueued: Enqueued
    cancelled: list[Cancelled]
    background: Background
    app: AsyncApp
    running: RunningSlack
    http: httpx.AsyncClient
    deps: SlackDeps | None = None
    watch: Watch | None = None
    taker: Taker | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.running.port}/slack/events"

    async def post_event(
        self,
        body: dict[str, Any],
        *,
        secret: str = SIGNING_SECRET,
        timestamp: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """POST an Events API body as JSON, signed."""
        raw = json.dumps(body).encode()
        return await self.post_raw(raw, "application/json", secret, timestamp, headers)

    async def post_form(
        self, fields: dict[str, str], *, secret: str = SIGNING_SECRET
    ) -> httpx.Response:
        """POST a slash command or an interaction (``payload=<json>``) form, signed.

        A command's ``response_url`` is pointed at the fake Slack API, as Slack points it
        at itself."""
        if "response_url" in fields:
            fields = {**fields, "response_url": self.slack_api.response_url()}
        raw = urlencode(fields).encode()
        return await self.post_raw(raw, "application/x-www-form-urlencoded", secret, None, None)

    async def post_raw(
        self,
        raw: bytes,
        content_type: str,
        secret: str,
        timestamp: int | None,
        headers: dict[str, str] | None,
    ) -> httpx.Response:
        ts = int(time.time()) if timestamp is None else timestamp
        sent = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": sign(raw, timestamp=ts, secret=secret),
            **(headers or {}),
        }
        return await self.http.post(self.url, content=raw, headers=sent)

    async def settle(self) -> None:
        """Wait until the after-ack work has finished."""
        await self.background.drain(timeout_s=10.0)

    async def session(self, thread_ts: str, *, org: str = TEAM_ID) -> Session | None:
        return await self.sessions.find(SessionKey(org, CHANNEL, thread_ts))

    async def inbox_texts(self, session_id: str) -> list[str]:
        return [item.text for item in await self.sessions.inbox(session_id)]


@asynccontextmanager
async def running_edge(
    tmp_path: Path,
    *,
    database_url: str | None = None,
    strict_channels: frozenset[str] = frozenset(),
    limits: Limits = DEFAULT_LIMITS,
    external_may_start: bool = False,
    installation: Installation | None = None,
    approvers: Approvers | None = None,
    enqueue: Callable[[str, str], Awaitable[None]] | None = None,
    agent_surface: bool = True,
    slack_api: FakeSlackApi | None = None,
    watch_policy: WatchPolicy | None = None,
    alert_policy: AlertPolicy | None = None,
    edit_policy: EditPolicy | None = None,
) -> AsyncIterator[SlackEdge]:
    """Start the fake Slack API, a migrated database and the app over HTTP; stop them after.

    SQLite lives in ``tmp_path / "warroom.sqlite3"``. ``enqueue``: where wake-ups go (a
    worker's queue); by default they are only recorded (``SlackEdge.enqueued``).
    ``agent_surface``: ``stop`` also closes the thread's Slack agent session (the
    product's default, ``WARROOM_AGENT_SURFACE``); False: the status-message path only.
    ``slack_api``: a fake Slack already running (the workers'), else one of its own.
    ``watch_policy``: watch channels (issue #27) with a real alert intake and taker
    (``alert_policy``); ``edit_policy``: who may change skills, memory and watches.
    """
    own_fake = slack_api is None
    if slack_api is None:
        slack_api = FakeSlackApi()
        await slack_api.start()
    database = Database.from_url(database_url, data_dir=tmp_path, limits=limits)
    await database.migrate()
    client = AsyncWebClient(token=slack_api.token, base_url=slack_api.base_url)
    sessions = SessionStore(database)
    background = Background()
    cancelled: list[Cancelled] = []

    async def cancel_running(what: Cancelled) -> None:
        cancelled.append(what)

    outbox = Outbox(database)
    files = FileStore(database)
    enqueued = Enqueued(sessions)
    deps = SlackDeps(
        sessions=sessions,
        dedupe=InboundDedupe(database),
        files=files,
        client=client,
        signing_secret=SIGNING_SECRET,
        bot_user_id=BOT_USER_ID,
        enqueue=enqueue or enqueued,
        cancel_running=cancel_running,
        skills=SkillsCommands(files, client, edit_policy or EditPolicy()),
        poster=(poster := SlackPoster(client, outbox)),
        strict_channels=strict_channels,
        external_may_start=external_may_start,
        installation=installation,
        ledger=ModelCallLog(database),
        record=IncidentRecord(IncidentLog(database), WORKSPACE_URL),
        egress=EgressLog(database),
        approvers=approvers or Approvers(),
        surface=AgentSurface(poster, team_id=TEAM_ID, enabled=agent_surface),
        bot_id=BOT_ID,
        recall=RecallStore(database),
    )
    taker = watch = None
    if watch_policy is not None:
        intake = AlertIntake(
            store=AlertStore(database),
            sessions=sessions,
            client=client,
            poster=poster,
            enqueue=enqueue or enqueued,
            bot_user_id=BOT_USER_ID,
            policy=alert_policy or AlertPolicy(),
            dedupe=deps.dedupe,
        )
        taker = Taker(intake)
        watch = Watch(
            WatchedChannels(database), watch_policy, AlertStore(database).record, taker.wake, BOT_ID
        )
        deps = replace(deps, watch=watch)
        taker.start()
    app = build_app(deps=deps, background=background)
    running = await start(app, HttpMode(host="127.0.0.1", port=0))
    http = httpx.AsyncClient(timeout=10.0)
    try:
        yield SlackEdge(
            slack_api,
            database,
            sessions,
            deps.dedupe,
            files,
            outbox,
            poster,
            enqueued,
            cancelled,
            background,
            app,
            running,
            http,
            deps,
            watch,
            taker,
        )
    finally:
        if taker is not None:
            await taker.stop()
        await http.aclose()
        await running.close()
        await background.cancel()
        await database.dispose()
        if own_fake:
            await slack_api.stop()
