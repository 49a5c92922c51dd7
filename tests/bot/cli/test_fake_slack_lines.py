"""``warroom fake-slack``'s typed lines reach the real Slack app as a person's acts would:
a second thread, a top-level message, the ``/agent`` slash command, a modal filled in and
submitted (a new skill); and its message ``ts`` keeps to the clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

from bot.cli.fake_slack import CHANNEL, deliver_lines, watch_channel
from bot.fakes.slack_api import TEAM_ID, FakeSlackApi
from bot.slack.skills.edit_policy import EditPolicy
from bot.slack.watch import WatchPolicy
from memory_store import Namespace, Scope, Session, SessionKey
from tests.bot.slack_edge import SlackEdge, running_edge


async def modal_opened(fake: FakeSlackApi, *, timeout_s: float = 30.0) -> None:
    """Wait until the app has opened a modal (its views.open follows the command's ack)."""
    deadline = time.monotonic() + timeout_s
    while not fake.state.views:
        assert time.monotonic() < deadline, "no modal was opened"
        await asyncio.sleep(0.05)


SKILL = "---\\nname: triage\\ndescription: First look at an incident.\\n---\\n\\n# Triage\\n"


async def test_typed_lines_open_threads_post_at_the_top_run_agent_and_submit_a_modal(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    async with running_edge(tmp_path) as edge:
        fake = edge.slack_api
        fake.state.messages.setdefault(CHANNEL, [])

        async def lines() -> AsyncIterator[str]:
            yield "checkout-api returns 500s"  # the first line: a thread
            yield "top: deploy of checkout-api at 14:02"  # a top-level message
            yield "@warroom payments is slow too"  # a second thread
            yield "/agent skills new"  # opens the new-skill modal
            await modal_opened(fake)
            yield "set skill_name triage"
            yield f"set skill_part_1 {SKILL}"
            yield "submit"

        # When these lines are typed into fake-slack, against the real app
        await deliver_lines(fake, edge.url, lines(), said.append)
        await edge.settle()

        # Then two threads were opened, each a session, and the top-level message is none
        top = [m for m in fake.state.messages[CHANNEL] if "thread_ts" not in m]
        assert [m["text"] for m in top][1] == "deploy of checkout-api at 14:02"
        roots = [str(m["ts"]) for m in top if "<@" in str(m["text"])]
        assert len(roots) == 2
        sessions = [await edge.sessions.find(SessionKey(TEAM_ID, CHANNEL, ts)) for ts in roots]
        assert None not in sessions
        # and the modal's submission made the skill
        skill = await edge.files.read(Namespace(TEAM_ID, Scope.SKILLS), "/triage/SKILL.md")
        assert skill.content.startswith("---\nname: triage\n")
    assert "submitted" in said
    assert not [s for s in said if s.startswith("not delivered")]


async def test_a_line_for_an_input_the_modal_lacks_says_which_it_has(tmp_path: Path) -> None:
    said: list[str] = []
    async with running_edge(tmp_path) as edge:
        fake = edge.slack_api

        async def lines() -> AsyncIterator[str]:
            yield "/agent skills new"
            await modal_opened(fake)
            yield "set skil_name triage"

        await deliver_lines(fake, edge.url, lines(), said.append)

    assert said == [
        "no input 'skil_name' in the modal; its inputs: skill_name, skill_part_1, skill_part_2"
    ]


async def test_the_fake_slacks_ts_keeps_to_the_clock_however_many_messages() -> None:
    fake = FakeSlackApi()

    stamps = [float(fake.add_message("C1", f"update {i}")) for i in range(200)]

    assert stamps == sorted(set(stamps))  # unique, in order
    assert stamps[-1] <= time.time() + 1  # not ahead of the clock (it was +200 s)


async def watched(fake: FakeSlackApi, *, timeout_s: float = 30.0) -> None:
    """Wait until ``/agent watch on`` has answered (the switch is stored before that)."""
    deadline = time.monotonic() + timeout_s
    while not any("now watched" in str(e.get("text")) for e in fake.state.ephemerals):
        assert time.monotonic() < deadline, "/agent watch on did not answer"
        await asyncio.sleep(0.05)


async def alert_session(edge: SlackEdge, *, timeout_s: float = 10.0) -> Session:
    """The session the Alertmanager post in ``CHANNEL`` started, once it exists."""
    deadline = time.monotonic() + timeout_s
    while True:
        posts = [m for m in edge.slack_api.state.messages[CHANNEL] if m.get("username")]
        alertmanager = [m for m in posts if m["username"] == "Alertmanager"]
        if alertmanager:
            key = SessionKey(TEAM_ID, CHANNEL, alertmanager[0]["ts"])
            if (session := await edge.sessions.find(key)) is not None:
                return session
        assert time.monotonic() < deadline, "no session in the alert's thread"
        await asyncio.sleep(0.05)


async def test_an_alert_line_is_an_alerting_apps_post_that_starts_a_session_once_watched(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    policy = WatchPolicy()  # nothing watched until /agent watch on
    async with running_edge(tmp_path, watch_policy=policy) as edge:
        fake = edge.slack_api
        fake.state.messages.setdefault(CHANNEL, [])

        async def lines() -> AsyncIterator[str]:
            yield "alert: datadog"  # not watched yet: starts nothing
            yield "/agent watch on"
            await watched(fake)
            yield "alert: alertmanager"  # an alert thread
            await alert_session(edge)
            yield "is it the 14:02 deploy?"  # a reply in the alert's thread

        # When these lines are typed into fake-slack, against the real app
        await deliver_lines(fake, edge.url, lines(), said.append)
        await edge.settle()

        # Then both alerts are other apps' posts at the top of the channel; the second,
        # in the now watched channel, started a session in its thread, and the typed
        # reply reached it
        posts = [m for m in fake.state.messages[CHANNEL] if m.get("bot_id", "").startswith("B0")]
        posts = [m for m in posts if m.get("bot_id") != "B0FAKEBOT"]
        assert [m.get("username") for m in posts] == ["Datadog", "Alertmanager"]
        assert await edge.sessions.find(SessionKey(TEAM_ID, CHANNEL, posts[0]["ts"])) is None
        session = await alert_session(edge)
        texts = [item.text for item in await edge.sessions.inbox(session.id)]
        assert "is it the 14:02 deploy?" in texts
        assert any("alertmanager posted an alert" in line for line in said)


class HeldPolicy(EditPolicy):
    """Everyone may edit skills, once ``go`` is set: the app's ``views.update`` that fills
    its loading modal waits for it, as it would behind a slow ``users.info``."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()

    async def allows(self, client: AsyncWebClient, user_id: str) -> bool:
        await self.go.wait()
        return True


async def until(what: str, check: Callable[[], bool], *, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        await asyncio.sleep(0.05)


async def test_a_loading_modal_the_app_fills_in_later_is_shown_again_and_can_be_submitted(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    policy = HeldPolicy()
    async with running_edge(tmp_path, edit_policy=policy) as edge:
        fake = edge.slack_api
        watching = asyncio.create_task(watch_channel(fake, said.append))

        async def lines() -> AsyncIterator[str]:
            yield "/agent skills new"  # views.open: a loading modal, at once
            await until("the loading modal shown", lambda: any("Loading" in s for s in said))
            yield "set skill_name triage"  # typed too early: the modal has no such input yet
            yield "submit"  # nor a Submit button
            policy.go.set()  # then the app fills the modal in (views.update)
            await until("the filled modal shown", lambda: any("modal updated" in s for s in said))
            yield "set skill_name triage"
            yield f"set skill_part_1 {SKILL}"
            yield "submit"

        try:
            # When the modal is filled in after fake-slack printed it loading
            await deliver_lines(fake, edge.url, lines(), said.append)
            await edge.settle()
            skill = await edge.files.read(Namespace(TEAM_ID, Scope.SKILLS), "/triage/SKILL.md")
        finally:
            watching.cancel()

    # Then it was printed loading, then again filled in (its inputs, what to type)
    opened = next(s for s in said if s.startswith("modal opened: "))
    assert "Loading" in opened
    assert "type 'close'" in opened
    updated = next(s for s in said if s.startswith("modal updated: "))
    assert updated.startswith("modal updated: New skill (type 'set BLOCK TEXT'")
    assert "skill_name: Name" in updated
    # and what was typed before it was filled in was refused, saying why
    assert "no input 'skill_name' in the modal; its inputs: " in said
    assert "the modal has no Submit button (yet): type 'close', or wait for it" in said
    # and the filled-in modal was submitted: the skill is made
    assert "submitted" in said
    assert skill.content.startswith("---\nname: triage\n")
