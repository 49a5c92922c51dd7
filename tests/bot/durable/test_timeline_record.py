"""The timeline says what really happened, through the real driver (PostgreSQL, the fake
Messages API, bubblewrap jails): who stopped what and when, which inputs are people's
messages, and how each command ended."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from bot.durable.wiring import cancel_running
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from harness import EntryKind, IncidentRecord, Timeline, decision_key
from memory_store import IncidentLog, SessionStatus
from tests.bot.durable.cost_support import DEADLINE_S, Metered, close_metered, open_metered

pytestmark = [pytest.mark.postgres, pytest.mark.bwrap]
URL = "https://acme.slack.com/"
BOB = "U0BOB"


def _last(request: RecordedRequest) -> str:
    return json.dumps(request.messages[-1])


def stoppable(request: RecordedRequest) -> Reply:
    """A long command first; after the stop and a reply, an answer."""
    if "go on" in _last(request):
        return Reply.text("Stopped as asked; nothing else ran.")
    return Reply.tool("Bash", {"command": "sleep 30", "description": "Wait"})


def outcomes(request: RecordedRequest) -> Reply:
    """A failing command, one that times out, one refused (no background tasks in these
    tests), then an answer."""
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    calls: list[dict[str, Any]] = [
        {"command": "exit 3", "description": "Fail"},
        {"command": "sleep 5", "description": "Too slow", "timeout": 200},
        {"command": "true", "description": "Later", "run_in_background": True},
    ]
    return Reply.tool("Bash", calls[turn]) if turn < len(calls) else Reply.text("Done.")


async def _timeline(metered: Metered) -> Timeline:
    return await IncidentRecord(IncidentLog(metered.db), URL).timeline(metered.org, metered.channel)


async def _wait_for_event(metered: Metered, session_id: str, kind: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not any(e.kind == kind for e in await metered.sessions.events(session_id)):
        assert time.monotonic() < deadline, f"no {kind} event"
        await asyncio.sleep(0.02)  # polling a condition, with the deadline above


async def test_a_stopped_command_is_recorded_as_stopped_by_who_stopped_it_when_they_did(
    postgres_url: str, tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(stoppable) as fake:
        metered = await open_metered(postgres_url, fake.base_url, tmp_path)
        try:
            driver = metered.driver()
            await metered.open("s-stop", "pods down", "1796100000.000100")
            await driver.run("s-stop", metered.pending.pop("s-stop"))  # the model's step
            # Given a step running a long command
            step = asyncio.create_task(driver.run("s-stop", metered.pending.pop("s-stop")))
            await _wait_for_event(metered, "s-stop", "tool_intent")
            # When Bob stops the session (what `stop` does), then later someone replies
            cancelled = await metered.sessions.cancel("s-stop", actor=BOB)
            assert cancelled is not None
            await cancel_running(metered.manager, cancelled)
            await asyncio.wait_for(step, DEADLINE_S)
            session = await metered.sessions.get("s-stop")
            assert session is not None
            assert session.status is SessionStatus.CANCELLED
            await metered.reply("s-stop", "go on")
            await metered.run_until_idle(driver, "s-stop")
            timeline = await _timeline(metered)
        finally:
            await close_metered(metered)
    # Then the record has the stop, by Bob, and the command it cut short, at the stop
    lines = [(e.kind, e.actor.label, e.summary) for e in timeline.entries]
    agent = "agent (<@U1>'s thread)"
    assert lines == [
        (EntryKind.MESSAGE, "<@U1>", "pods down"),
        (EntryKind.STOP, f"<@{BOB}>", "stopped the session"),
        (EntryKind.COMMAND, agent, f"`sleep 30` → stopped by <@{BOB}> before it ended (killed)"),
        (EntryKind.MESSAGE, "<@U2>", "go on"),
        (EntryKind.ANSWER, agent, "Stopped as asked; nothing else ran."),
    ]
    stop, command, reply = timeline.entries[1:4]
    assert stop.at == command.at < reply.at


async def test_system_inputs_are_not_messages_and_each_command_says_how_it_ended(
    postgres_url: str, tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(outcomes) as fake:
        metered = await open_metered(postgres_url, fake.base_url, tmp_path)
        try:
            driver = metered.driver()
            await metered.open("s-out", "why 500s?", "1796100000.000100")
            await metered.run_until_idle(driver, "s-out")
            # Given what the system records in the inbox: a stale approval click, a wake-up
            click = json.dumps({"approve": True, "tool_use_id": "toolu_x", "user_id": BOB})
            await metered.sessions.notify(
                "s-out", kind="approval", text=click, source_key=decision_key("toolu_x")
            )
            await metered.sessions.notify("s-out", kind="wake", text="{}", source_key="wake:1")
            timeline = await _timeline(metered)
        finally:
            await close_metered(metered)
    # Then only the person's message is a message, and each command's end is its own
    messages = [(e.actor.label, e.summary) for e in timeline.entries if e.kind is EntryKind.MESSAGE]
    assert messages == [("<@U1>", "why 500s?")]
    commands = [e.summary for e in timeline.entries if e.kind is EntryKind.COMMAND]
    assert commands == [
        "`exit 3` → exit 3",
        "`sleep 5` → timed out after 0.2 s (killed)",
        "`true` → refused: Background commands are not available in this session.",
    ]
