"""Approvals in the thread, end to end (docs/architecture.md §13; issue #16).

The real Slack app over HTTP (signed Events API and ``block_actions`` requests, the fake Slack
Web API) and the worker's step driver (``StepDriver``, the body of the ``advance`` actor) share
one store; the model is the real adapter against the fake Messages API, and commands run in
real bubblewrap jails. Every sandbox has a stand-in ``kubectl`` (a workspace set-up step, so a
replaced sandbox has it too) that appends its arguments to ``/workspace/effects.log``: a
command that ran is a line in that file. The script asks for ``kubectl rollout restart``
(which needs approval), then counts the lines, then answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.durable.driver import StepDriver
from bot.durable.wiring import ManagedSandboxes
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.slack.approval_messages import APPROVE_ACTION_ID, DENY_ACTION_ID, ButtonValue
from bot.slack.approvals import Approvers
from bot.slack.installation import Installation
from bot.slack.poster import SlackPoster
from bot.slack.progress import ThreadReporter
from harness import (
    DEFAULT_MODEL,
    REJECTED,
    AnthropicModel,
    ApprovalGate,
    ApprovalStatus,
    Checkpoint,
    EntryKind,
    IncidentRecord,
    SandboxWorkspaces,
)
from memory_store import IncidentLog, Outbox, SessionStatus, utc_now
from sandbox_client import LocalConfig, LocalProvider, SandboxHandle, SandboxManager, SetupStep
from tests.bot.conftest import load_case
from tests.bot.durable_support import destroy_sandboxes
from tests.bot.slack_edge import CHANNEL, SlackEdge, event, running_edge
from tests.fakes.slack_api import TEAM_ID

pytestmark = pytest.mark.bwrap

TOP = "event_app_mention_top_level.json"
ROOT_TS = "1767225600.000100"
OTHER_TS = "1767225700.000100"
ALICE, BOB, CAROL = "U0FAKEALICE", "U0FAKEBOB", "U0FAKECAROL"
RESTART = "PATH=/workspace/bin:$PATH kubectl rollout restart deploy/payments"
_MENTION_TEXT = "payments-api p99 is 4s since 09:00, can you investigate?"
COUNT = "cat /workspace/effects.log 2>/dev/null | wc -l"
FAKE_KUBECTL = (
    b'#!/bin/sh\necho "$*" >> /workspace/effects.log\necho "deployment.apps/payments restarted"\n'
)
SETUP = (
    SetupStep.file("/workspace/bin/kubectl", FAKE_KUBECTL),
    SetupStep.run("chmod +x /workspace/bin/kubectl"),
)


def plan(request: RecordedRequest) -> Reply:
    """restart (needs approval) → count the effects → answer."""
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    if turn == 0:
        return Reply.tool("Bash", {"command": RESTART, "description": "Restart payments"})
    if turn == 1:
        return Reply.tool("Bash", {"command": COUNT, "description": "Count restarts"})
    return Reply.text("Done.")


@dataclass
class Rig:
    """The Slack edge, one worker's driver over the same store, and their queue."""

    edge: SlackEdge
    fake: FakeAnthropicAPI
    manager: SandboxManager
    model: AnthropicModel
    approvers: Approvers
    timeout_s: float
    queue: list[tuple[str, str]] = field(default_factory=list)
    driver: StepDriver = field(init=False)

    def __post_init__(self) -> None:
        self.restart_worker()

    def restart_worker(self) -> None:
        """A new worker process: a fresh driver (nothing cached) over the same store."""
        client = AsyncWebClient(
            token=self.edge.slack_api.token, base_url=self.edge.slack_api.base_url
        )
        reporter = ThreadReporter(SlackPoster(client, Outbox(self.edge.database)))

        async def enqueue(session_id: str, token: str) -> None:
            self.queue.append((session_id, token))

        self.driver = StepDriver(
            sessions=self.edge.sessions,
            files=self.edge.files,
            model=self.model,
            workspaces=SandboxWorkspaces(self.manager, SETUP),
            poster=reporter,
            enqueue=enqueue,
            worker_id=f"test:{id(reporter)}:w",
            sandboxes=ManagedSandboxes(self.manager, SETUP),
            approvals=ApprovalGate(timeout_s=self.timeout_s),
        )

    async def drive(self) -> None:
        """Run every enqueued step (the edge's wake-ups and the driver's own) until idle."""
        for _ in range(100):
            await self.edge.settle()
            self.queue.extend(self.edge.enqueued.calls)
            self.edge.enqueued.calls.clear()
            if not self.queue:
                return
            session_id, token = self.queue.pop(0)
            await self.driver.run(session_id, token)
        raise AssertionError("the session did not come to rest within 100 steps")

    async def start(self, root_ts: str = ROOT_TS) -> str:
        """A mention starts a session; it runs until it waits for a decision."""
        await self.edge.post_event(event(TOP, ts=root_ts))
        await self.drive()
        session = await self.edge.session(root_ts)
        assert session is not None
        return session.id

    async def checkpoint(self, session_id: str) -> Checkpoint:
        session = await self.edge.sessions.get(session_id)
        assert session is not None
        return Checkpoint.from_json(session.checkpoint)

    def approval_message(self, root_ts: str = ROOT_TS) -> dict[str, Any]:
        """The thread's one approval message."""
        found = [m for m in self.edge.slack_api.thread(CHANNEL, root_ts) if _is_approval(m)]
        assert len(found) == 1, found
        return found[0]

    def button(self, root_ts: str = ROOT_TS) -> str:
        """The value the approval message's buttons carry (Approve and Deny share it)."""
        values = _buttons(self.approval_message(root_ts))
        assert len(values) == 2
        assert values[0] == values[1]
        return values[0]

    async def click(
        self, action_id: str, value: str, *, user: str = BOB, team: str = TEAM_ID
    ) -> None:
        payload = load_case("interactive_block_actions.json")
        payload.pop("enterprise")
        payload["team"].pop("enterprise_id")
        payload["user"].update(id=user, team_id=team)
        payload["actions"][0].update(action_id=action_id, value=value)
        response = await self.edge.post_form({"payload": json.dumps(payload)})
        assert response.status_code == 200
        await self.edge.settle()

    def results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks the model was sent, in order (last request's view)."""
        last = self.fake.requests[-1].messages
        return [
            block
            for message in last
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]

    def ephemerals(self, user: str = BOB) -> list[str]:
        return [
            str(call.args.get("text"))
            for call in self.edge.slack_api.calls_to("chat.postEphemeral")
            if call.args.get("user") == user
        ]


def _block_text(block: dict[str, Any]) -> str:
    text = block.get("text")
    return text.get("text", "") if isinstance(text, dict) else str(text or "")


def _is_approval(message: dict[str, Any]) -> bool:
    return any("Approval needed*" in _block_text(b) for b in message.get("blocks") or ())


def _decision(message: dict[str, Any]) -> str:
    return " ".join(_block_text(b) for b in message.get("blocks") or ())


def _buttons(message: dict[str, Any]) -> list[str]:
    return [
        element["value"]
        for block in message.get("blocks") or ()
        if block.get("type") == "actions"
        for element in block.get("elements") or ()
        if element.get("action_id") in (APPROVE_ACTION_ID, DENY_ACTION_ID)
    ]


def _result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


RigFactory = Callable[..., Awaitable[Rig]]


@pytest.fixture
async def rig_factory(tmp_path: Path) -> AsyncIterator[RigFactory]:
    state_dir = Path(tempfile.mkdtemp(prefix="wr-appr-"))  # socket paths stay short
    async with contextlib.AsyncExitStack() as stack:

        async def make(*, approvers: Approvers | None = None, timeout_s: float = 1800.0) -> Rig:
            edge = await stack.enter_async_context(
                running_edge(tmp_path, installation=Installation(TEAM_ID), approvers=approvers)
            )
            fake = await stack.enter_async_context(FakeAnthropicAPI(plan))
            manager = SandboxManager(LocalProvider(LocalConfig(state_dir=state_dir)))
            stack.push_async_callback(manager.aclose)
            model = AnthropicModel(api_key="sk-test", model=DEFAULT_MODEL, base_url=fake.base_url)
            stack.push_async_callback(model.aclose)
            return Rig(edge, fake, manager, model, approvers or Approvers(), timeout_s)

        yield make
    await asyncio.to_thread(destroy_sandboxes, state_dir)  # a jail outlives its manager
    shutil.rmtree(state_dir, ignore_errors=True)


# ----- the tests -------------------------------------------------------------------------


async def test_a_change_parks_the_session_and_asks_once_in_the_thread(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    session_id = await rig.start()

    # One message with the exact command, the reason, who asked, and two bound buttons
    message = rig.approval_message()
    text = _decision(message)
    assert RESTART in text.replace("&lt;", "<").replace("&gt;", ">")
    assert "changes the cluster's resources" in text
    assert f"<@{ALICE}>" in text
    value = ButtonValue.decode(rig.button())
    cp = await rig.checkpoint(session_id)
    assert cp.approval is not None
    assert value == ButtonValue(session_id, cp.approval.tool_use_id, cp.approval.input_sha256)
    # The session waits holding nothing: no step queued, its sandbox suspended, a wake-up
    # set for the expiry
    session = await rig.edge.sessions.get(session_id)
    assert session is not None
    assert session.status is SessionStatus.WAITING
    assert session.pending_token is None
    assert rig.queue == []
    assert cp.sandbox is not None
    health = await rig.manager.provider.health(SandboxHandle.from_json(cp.sandbox))
    assert health.value == "SUSPENDED"
    assert len(rig.fake.requests) == 1  # the model was not asked again


async def test_approve_runs_exactly_that_command_once_and_says_who_approved(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    session_id = await rig.start()

    await rig.click(APPROVE_ACTION_ID, rig.button())
    await rig.drive()

    restart, count = rig.results()
    assert "deployment.apps/payments restarted" in _result_text(restart)
    assert not restart.get("is_error")
    assert _result_text(count).strip() == "1"  # it ran exactly once
    decided = _decision(rig.approval_message())
    assert f"Approved by <@{BOB}>" in decided
    assert _buttons(rig.approval_message()) == []
    assert (await rig.checkpoint(session_id)).answer is None
    # The incident's record has who asked, who approved, and the command's outcome
    record = IncidentRecord(IncidentLog(rig.edge.database))
    timeline = await record.timeline(TEAM_ID, CHANNEL)
    lines = [(e.kind.value, e.actor.label, e.summary) for e in timeline.entries]
    asked = next(i for i, line in enumerate(lines) if line[2].startswith("asked approval"))
    assert "changes the cluster's resources" in lines[asked][2]
    assert ("approval", f"<@{BOB}>", f"approved `{RESTART}`") in lines[asked:]
    assert ("command", lines[asked][1], f"`{RESTART}` → exit 0") in lines[asked:]
    # and the click is that approval, not a message (from nobody, of raw JSON)
    messages = [e for e in timeline.entries if e.kind is EntryKind.MESSAGE]
    assert [(e.actor.label, e.summary) for e in messages] == [(f"<@{ALICE}>", _MENTION_TEXT)]


async def test_deny_gives_the_model_claude_codes_rejection_and_nothing_runs(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    await rig.start()

    await rig.click(DENY_ACTION_ID, rig.button())
    await rig.drive()

    restart, count = rig.results()
    assert _result_text(restart).startswith(REJECTED)
    assert restart.get("is_error") is True
    assert _result_text(count).strip() == "0"
    assert f"Denied by <@{BOB}>" in _decision(rig.approval_message())
    timeline = await IncidentRecord(IncidentLog(rig.edge.database)).timeline(TEAM_ID, CHANNEL)
    decided = [e for e in timeline.entries if e.summary.startswith("denied")]
    assert [(e.actor.label, e.summary) for e in decided] == [(f"<@{BOB}>", f"denied `{RESTART}`")]


async def test_an_unanswered_request_expires_as_a_rejection(rig_factory: RigFactory) -> None:
    rig = await rig_factory(timeout_s=60.0)
    session_id = await rig.start()
    value = rig.button()

    # When the sweeper runs after the expiry (the database's wake_at)
    swept = await rig.edge.sessions.sweep(
        utc_now() + timedelta(seconds=61), max_crashes=3, stale_after_s=3600
    )
    assert [w.session_id for w in swept.woken] == [session_id]
    rig.queue.extend((w.session_id, w.token) for w in swept.woken)
    await rig.drive()

    restart, count = rig.results()
    assert _result_text(restart).startswith(REJECTED)
    assert "expired" in _result_text(restart)
    assert _result_text(count).strip() == "0"
    assert "Expired unanswered" in _decision(rig.approval_message())
    # A click after the expiry changes nothing and says so
    before = len(rig.fake.requests)
    await rig.click(APPROVE_ACTION_ID, value)
    await rig.drive()
    assert "already decided" in rig.ephemerals()[-1]
    assert len(rig.fake.requests) == before


async def test_a_double_click_is_one_decision_and_the_second_clicker_is_told(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    await rig.start()
    value = rig.button()

    # Two clicks before the worker takes the first: the database keeps the first
    await rig.click(APPROVE_ACTION_ID, value)
    await rig.click(DENY_ACTION_ID, value, user=CAROL)
    assert "already approved" in rig.ephemerals(CAROL)[-1]
    await rig.drive()
    # A third after the worker applied it
    await rig.click(APPROVE_ACTION_ID, value)
    await rig.drive()

    restart, count = rig.results()
    assert "restarted" in _result_text(restart)
    assert _result_text(count).strip() == "1"
    assert "already decided" in rig.ephemerals(BOB)[-1]
    assert len(rig.edge.slack_api.calls_to("chat.postEphemeral")) == 2


async def test_a_stale_button_after_a_worker_restart_does_nothing_but_say_so(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    session_id = await rig.start()
    value = ButtonValue.decode(rig.button())
    assert value is not None

    # A deploy: a new worker, nothing cached
    rig.restart_worker()
    # A button bound to another input (the command changed) and one for another call
    changed = ButtonValue(session_id, value.tool_use_id, "0" * 64).encode()
    other = ButtonValue(session_id, "toolu_not_pending", value.input_sha256).encode()
    await rig.click(APPROVE_ACTION_ID, changed)
    await rig.click(APPROVE_ACTION_ID, other)
    await rig.drive()

    assert len(rig.fake.requests) == 1  # nothing ran, the model was not asked
    assert all("out of date" in text for text in rig.ephemerals())
    assert len(rig.ephemerals()) == 2
    still = (await rig.checkpoint(session_id)).approval
    assert still is not None
    assert still.pending
    # The real button still works on the new worker
    await rig.click(APPROVE_ACTION_ID, value.encode())
    await rig.drive()
    assert _result_text(rig.results()[1]).strip() == "1"


async def test_someone_not_allowed_to_approve_is_told_and_nothing_is_recorded(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory(approvers=Approvers.parse(f"{CAROL} S0ONCALL", not_requester=True))
    rig.edge.slack_api.set_usergroup("S0ONCALL", ["U0FAKEDAVE"])
    session_id = await rig.start()
    value = rig.button()

    await rig.click(APPROVE_ACTION_ID, value)  # bob: not an approver
    await rig.click(APPROVE_ACTION_ID, value, user=ALICE)  # the requester
    await rig.click(APPROVE_ACTION_ID, value, user="U0EXTERNAL", team="T0OTHERORG")
    await rig.drive()

    assert "not one of the people" in rig.ephemerals(BOB)[-1]
    assert "You started this session" in rig.ephemerals(ALICE)[-1]
    assert "organisation" in rig.ephemerals("U0EXTERNAL")[-1]
    assert len(rig.fake.requests) == 1
    assert all(i.kind != "approval" for i in await rig.edge.sessions.inbox(session_id))
    # A member of the approvers' user group may
    await rig.click(APPROVE_ACTION_ID, value, user="U0FAKEDAVE")
    await rig.drive()
    assert "Approved by <@U0FAKEDAVE>" in _decision(rig.approval_message())
    assert _result_text(rig.results()[1]).strip() == "1"


async def test_two_pending_approvals_in_two_threads_are_decided_apart(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    first = await rig.start(ROOT_TS)
    second = await rig.start(OTHER_TS)
    assert first != second
    first_value, second_value = rig.button(ROOT_TS), rig.button(OTHER_TS)
    assert first_value != second_value

    await rig.click(DENY_ACTION_ID, second_value)
    await rig.click(APPROVE_ACTION_ID, first_value, user=CAROL)
    await rig.drive()

    assert f"Approved by <@{CAROL}>" in _decision(rig.approval_message(ROOT_TS))
    assert f"Denied by <@{BOB}>" in _decision(rig.approval_message(OTHER_TS))
    first_cp, second_cp = await rig.checkpoint(first), await rig.checkpoint(second)
    assert first_cp.approval is not None
    assert first_cp.approval.status is ApprovalStatus.APPROVED
    assert second_cp.approval is not None
    assert second_cp.approval.status is ApprovalStatus.DENIED


async def test_an_approved_command_whose_sandbox_was_replaced_runs_in_the_new_one(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    session_id = await rig.start()
    cp = await rig.checkpoint(session_id)
    assert cp.sandbox is not None
    # The parked sandbox is gone meanwhile (a host restart, the idle reaper)
    await rig.manager.provider.destroy(SandboxHandle.from_json(cp.sandbox))

    await rig.click(APPROVE_ACTION_ID, rig.button())
    await rig.drive()

    restart, count = rig.results()
    assert "restarted" in _result_text(restart)
    assert _result_text(count).strip() == "1"
    told = json.dumps(rig.fake.requests[-2].messages[-1])
    assert "sandbox" in told.lower()
    assert (await rig.checkpoint(session_id)).sandbox != cp.sandbox


async def test_stop_while_waiting_denies_it_and_the_model_hears_so_on_the_next_reply(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    session_id = await rig.start()
    value = rig.button()

    await rig.edge.post_event(
        event("event_message_thread_reply_no_mention.json", text="stop", ts="1767225900.000100")
    )
    await rig.drive()
    session = await rig.edge.sessions.get(session_id)
    assert session is not None
    assert session.status is SessionStatus.CANCELLED
    assert "Stopped by" in _decision(rig.approval_message())
    # A click now changes nothing, and says why
    await rig.click(APPROVE_ACTION_ID, value)
    await rig.drive()
    assert len(rig.fake.requests) == 1
    assert "already stopped" in rig.ephemerals()[-1]
    # A reply revives the session: the call is answered with the rejection
    await rig.edge.post_event(
        event(
            "event_message_thread_reply_no_mention.json", text="what now?", ts="1767225990.000100"
        )
    )
    await rig.drive()
    restart = rig.results()[0]
    assert _result_text(restart).startswith(REJECTED)
    assert "stopped" in _result_text(restart)
    # The record has the stop, by who wrote it, when it was written, and the approval it
    # ended then (not when the reply revived the session)
    timeline = await IncidentRecord(IncidentLog(rig.edge.database)).timeline(TEAM_ID, CHANNEL)
    lines = [(e.kind.value, e.actor.label, e.summary) for e in timeline.entries]
    stop = lines.index(("stop", f"<@{BOB}>", "stopped the session"))
    assert lines[stop + 1] == (
        "approval",
        f"<@{BOB}>",
        f"stopped `{RESTART}` while it awaited approval (not run)",
    )
    assert lines[stop + 2] == ("message", f"<@{BOB}>", "what now?")
    assert [line for line in lines if RESTART in line[2]] == [lines[stop - 1], lines[stop + 1]]


async def test_a_thread_slack_refuses_for_good_ends_the_session_without_retrying(
    rig_factory: RigFactory,
) -> None:
    rig = await rig_factory()
    # Given a channel archived once the session has started
    await rig.edge.post_event(event(TOP, ts=ROOT_TS))
    await rig.edge.settle()
    rig.edge.slack_api.break_channel(CHANNEL, "is_archived")

    await rig.drive()

    session = await rig.edge.session(ROOT_TS)
    assert session is not None
    assert session.status is SessionStatus.FAILED
    kinds = [e.kind for e in await rig.edge.sessions.events(session.id)]
    assert "post_failed" in kinds
    assert "approval_posted" not in kinds
