"""The incident, played as people would, with the driver's two acts of sabotage.

0. erin makes the channel an alert channel (``/agent watch on``) and Alertmanager posts
   its alert there: a session starts in the alert's thread before anyone mentions the
   bot (``alert_scene``).
1. alice @mentions the bot at the top of the channel: session one starts.
2. Once its first tool call has finished, carol replies in alice's thread to steer
   it ("also check the DB pool size").
3. When session one starts sampling the DB pool (a command taking
   ``scenario.SAMPLE_S``), bob starts a second thread, and in the full mode, once the
   command runs in the sandbox, the driver SIGKILLs the worker process running that
   step (the lease owner).
4. While session one's error-rate sample runs, the driver destroys its sandbox from
   outside, through the provider, by the handle in the session row. Session one then asks to
   roll back the deploy that shrank the pool (a change: it waits for approval, §13), and
   carol clicks Approve on the message in alice's thread.
5. Once session one has answered, and it reached Prometheus through the egress gateway
   (where Prometheus runs), the driver reads everything a program in its sandbox could read
   (the environment, every process's, the files of ``/workspace`` and ``/tmp``) for the
   checks to search for the password.
6. Once both sessions have answered, dave starts a third thread.
7. Once dave's session has answered, frank asks ``@warroom postmortem`` in a fourth: its
   session drafts ``/incident/postmortem.md`` from the timeline.
8. Once the alert's session has answered, Alertmanager posts the resolve: it reaches that
   session, which says whether it agrees with its hypothesis.

Every wait polls a condition with a deadline (``DrillStalled`` when it passes).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from bot.drill import alert_scene, scenario
from bot.drill.checks import Kill
from bot.drill.errors import DrillStalled
from bot.drill.scenario import ALICE, BOB, CAROL, DAVE, ERIN, FRANK, Person
from bot.drill.stage import Stage
from bot.fakes.slack_alerts import alert_post
from bot.slack.approval_messages import APPROVE_ACTION_ID, ButtonValue
from harness import Checkpoint, PendingApproval
from memory_store import Event, Session, SessionKey, SessionStatus
from sandbox_client import Health, SandboxError, SandboxHandle

T = TypeVar("T")
POLL_S = 0.05
SECRET_SWEEP = (
    "env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; "
    "find /workspace /tmp -type f -size -1024k -exec cat {} + 2>/dev/null; true"
)


@dataclass
class Record:
    """What the driver did and learned while playing (filled in as it goes)."""

    sessions: dict[str, str] = field(default_factory=dict)
    threads: dict[str, str] = field(default_factory=dict)
    steer_sent_at: int | None = None
    kill: Kill | None = None
    destroyed: str | None = None
    stalled: str | None = None
    marks: dict[str, float] = field(default_factory=dict)
    sandbox_sweep: str | None = None

    def mark(self, what: str) -> None:
        """Note the wall-clock time (Unix seconds) of ``what``."""
        self.marks[what] = time.time()


class Story:
    """Plays the incident on a running ``Stage`` (see the module docstring)."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.record = Record()
        self._say = stage.narrator.line

    async def play(self) -> Record:
        """Play it all; a wait that runs out ends the story early (``record.stalled``)."""
        self.record.mark("started")
        try:
            await self._incident()
        except DrillStalled as stalled:
            self.record.stalled = str(stalled)
            self._say(f"!! drill: {stalled}")
        return self.record

    async def _incident(self) -> None:
        await self._alert_fires()
        alice = await self._start(ALICE)
        await self._event(alice, "tool_result", "its first tool call")
        self.record.steer_sent_at = len(self.stage.policy.requests_of(ALICE))
        await self._reply(CAROL, ALICE)
        sample = await self._event(alice, "tool_intent", "the pool sample", scenario.SAMPLE_POOL)
        bob = await self._start(BOB)
        if self.stage.pool is not None:
            await self._running(alice, json.loads(sample.payload_json)["tool_use_id"])
            await self._kill_step_of(alice)
        else:
            self._say("!! drill: (embedded mode: no worker process to kill; --redis-url has them)")
        errors = await self._event(
            alice, "tool_intent", "the error-rate sample", scenario.SAMPLE_ERRORS
        )
        await self._running(alice, json.loads(errors.payload_json)["tool_use_id"])
        await self._destroy_sandbox_of(alice)
        await self._approve(alice, CAROL)
        await self._answered(alice, ALICE)
        if self.stage.egress is not None:
            await self._sweep_sandbox_of(alice)
        await self._answered(bob, BOB)
        dave = await self._start(DAVE)
        await self._answered(dave, DAVE)
        frank = await self._start(FRANK)
        await self._answered(frank, FRANK)
        await self._alert_resolves()
        await self.stage.narrator.catch_up()

    # ----- the alert (alert_scene) ------------------------------------------------------

    async def _alert_fires(self) -> None:
        """erin watches the channel; Alertmanager's post starts a session, no mention."""
        channel = self.stage.channel
        self._say(f"{ERIN.name} in #{channel.channel_id}: /agent watch on")
        await channel.command(ERIN, "/agent", "watch on")

        async def watched() -> bool | None:
            replies = self.stage.slack.state.ephemerals
            return True if any("now watched" in str(r.get("text")) for r in replies) else None

        await self._until(watched, "the channel to be watched")
        post = alert_post(alert_scene.SOURCE)
        self._say(f"Alertmanager in #{channel.channel_id}: {post['attachments'][0]['title']}")
        ts = await channel.app_post(post)
        self.record.mark("alert posted")
        key = SessionKey(channel.org_id, channel.channel_id, ts)

        async def opened() -> Session | None:
            return await self.stage.sessions.find(key)

        session = await self._until(opened, "the alert's session to open")
        self.record.sessions[alert_scene.NAME] = session.id
        self.record.threads[alert_scene.NAME] = ts
        self.stage.narrator.follow(session.id, "the alert's thread")

    async def _alert_resolves(self) -> None:
        """Once the alert's session answered, Alertmanager posts the resolve."""
        session_id = self.record.sessions[alert_scene.NAME]
        await self._posted(session_id, 1, "the alert's session to answer")
        post = alert_post(alert_scene.SOURCE, resolved=True)
        await self.stage.narrator.catch_up()
        channel = self.stage.channel
        self._say(f"Alertmanager in #{channel.channel_id}: {post['attachments'][0]['title']}")
        await channel.app_post(post)
        await self._posted(session_id, 2, "the alert's session to answer the resolve")
        self.record.mark("alert resolved answered")

    async def _posted(self, session_id: str, answers: int, what: str) -> None:
        """Wait until the session is idle with ``answers`` answers posted."""

        async def done() -> bool | None:
            session = await self.stage.sessions.get(session_id)
            if session is None or session.status is not SessionStatus.WAITING:
                return None
            events = await self.stage.sessions.events(session_id)
            return True if sum(e.kind == "post_done" for e in events) >= answers else None

        await self._until(done, what)

    # ----- people ---------------------------------------------------------------------

    async def _start(self, person: Person) -> str:
        """``person`` @mentions the bot in a new thread; returns the new session's id."""
        channel = self.stage.channel
        await self.stage.narrator.catch_up()
        self._say(f"{person.name} in #{channel.channel_id}: @warroom {person.text}")
        ts = await channel.mention(person)
        key = SessionKey(channel.org_id, channel.channel_id, ts)

        async def opened() -> Session | None:
            return await self.stage.sessions.find(key)

        session = await self._until(opened, f"{person.name}'s session to open")
        self.record.sessions[person.name] = session.id
        self.record.threads[person.name] = ts
        self.stage.narrator.follow(session.id, f"{person.name}'s thread")
        return session.id

    async def _reply(self, person: Person, owner: Person) -> None:
        await self.stage.narrator.catch_up()
        self._say(f"{person.name} in {owner.name}'s thread: {person.text}")
        await self.stage.channel.reply(person, self.record.threads[owner.name])

    async def _approve(self, session_id: str, person: Person) -> None:
        """``person`` clicks Approve on the change alice's agent asked to make (§13)."""

        async def asked() -> PendingApproval | None:
            session = await self.stage.sessions.get(session_id)
            if session is None:
                return None
            approval = Checkpoint.from_json(session.checkpoint).approval
            posted = approval is not None and approval.pending and approval.message_ts
            return approval if posted else None

        approval = await self._until(asked, "alice's agent to ask approval for the rollback")
        await self.stage.narrator.catch_up()
        self._say(f"{person.name} approves in alice's thread: `{approval.action}`")
        value = ButtonValue(session_id, approval.tool_use_id, approval.input_sha256).encode()
        await self.stage.channel.click(
            person,
            action_id=APPROVE_ACTION_ID,
            value=value,
            message_ts=approval.message_ts,
            thread_ts=self.record.threads[ALICE.name],
        )
        self.record.mark("approved")

    # ----- sabotage -------------------------------------------------------------------

    async def _kill_step_of(self, session_id: str) -> None:
        """SIGKILL the worker process holding the session's lease (it is mid-step)."""
        pool = self.stage.pool
        assert pool is not None

        async def owner() -> str | None:
            session = await self.stage.sessions.get(session_id)
            return session.lease_owner if session is not None else None

        lease_owner = await self._until(owner, "a worker to hold alice's step")
        pid = int(lease_owner.split(":")[1])
        await self.stage.narrator.catch_up()
        if pool.kill(pid):
            self.record.mark("killed")
            self.record.kill = Kill(pid, lease_owner, scenario.SAMPLE_POOL)
            self._say(
                f"!! drill: SIGKILL worker process {pid}, mid-step in alice's "
                f"`{scenario.SAMPLE_POOL}`"
            )
        else:
            self._say(f"!! drill: worker process {pid} is not ours to kill")

    async def _running(self, session_id: str, tool_use_id: str) -> None:
        """Wait until the session's sandbox knows process ``tool_use_id``: the command has
        really started (a worker killed before that leaves an outcome nobody knows)."""

        async def started() -> bool | None:
            handle = await self._sandbox_of(session_id)
            if handle is None:
                return None
            client = self.stage.provider.connect(handle)
            try:
                record = await client.get_process(tool_use_id)
            except SandboxError:
                return None
            finally:
                await client.aclose()
            return True if record is not None else None

        await self._until(started, f"process {tool_use_id} to run in alice's sandbox")

    async def _sandbox_of(self, session_id: str) -> SandboxHandle | None:
        """The sandbox handle in the session's committed checkpoint."""
        session = await self.stage.sessions.get(session_id)
        if session is None:
            return None
        handle_json = Checkpoint.from_json(session.checkpoint).sandbox or session.sandbox
        return SandboxHandle.from_json(handle_json) if handle_json else None

    async def _destroy_sandbox_of(self, session_id: str) -> None:
        """Destroy the session's sandbox through the provider, from outside any worker."""
        handle = await self._sandbox_of(session_id)
        if handle is None:
            self._say("!! drill: alice's session has no sandbox to destroy")
            return
        await self.stage.narrator.catch_up()
        await self.stage.provider.destroy(handle)
        self.record.mark("destroyed")
        self.record.destroyed = handle.sandbox_id
        self._say(f"!! drill: destroyed alice's sandbox {handle.sandbox_id} from outside")

    async def _sweep_sandbox_of(self, session_id: str) -> None:
        """Read what a program in the session's sandbox can read (see the module docstring).

        An answered session's worker parks (suspends) its sandbox: wait for that, thaw it for
        the one command, and park it again, so no worker's freeze meets the command.
        """
        handle = await self._sandbox_of(session_id)
        if handle is None:
            self._say("!! drill: alice's session has no sandbox to search")
            return
        provider = self.stage.provider

        async def parked() -> bool | None:
            return True if await provider.health(handle) is Health.SUSPENDED else None

        await self._until(parked, "alice's sandbox to be parked after her answer")
        await provider.resume(handle)
        client = provider.connect(handle)
        try:
            record = await client.exec("drill-secret-sweep", SECRET_SWEEP, timeout_s=30)
        finally:
            await client.aclose()
            await provider.suspend(handle)
        self.record.sandbox_sweep = record.stdout
        await self.stage.narrator.catch_up()
        self._say(
            f"!! drill: read alice's sandbox {handle.sandbox_id} (environment, every "
            f"process's, /workspace and /tmp: {len(record.stdout.encode())} bytes) to search "
            "for the Prometheus password"
        )

    # ----- waiting --------------------------------------------------------------------

    async def _event(self, session_id: str, kind: str, what: str, contains: str = "") -> Event:
        async def logged() -> Event | None:
            for event in await self.stage.sessions.events(session_id):
                if event.kind == kind and contains in _summary(event):
                    return event
            return None

        return await self._until(logged, f"{what} ({kind})")

    async def _answered(self, session_id: str, person: Person) -> Session:
        async def answered() -> Session | None:
            session = await self.stage.sessions.get(session_id)
            if session is None or session.status is not SessionStatus.WAITING:
                return None
            events = await self.stage.sessions.events(session_id)
            return session if any(e.kind == "post_done" for e in events) else None

        session = await self._until(answered, f"{person.name}'s session to answer")
        self.record.mark(f"{person.name} answered")
        return session

    async def _until(self, check: Callable[[], Awaitable[T | None]], what: str) -> T:
        timeout_s = self.stage.options.timeout_s
        deadline = time.monotonic() + timeout_s
        while (value := await check()) is None:
            if time.monotonic() > deadline:
                raise DrillStalled(what, timeout_s)
            await asyncio.sleep(POLL_S)
        return value


def _summary(event: Event) -> str:
    try:
        return str(json.loads(event.payload_json).get("summary", ""))
    except (ValueError, AttributeError):
        return ""
