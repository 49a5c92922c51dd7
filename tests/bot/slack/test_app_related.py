"""``/agent related`` through the running app, and private channels remembered from Slack's
``channel_type`` (issue 29)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.slack.app import AGENT_USAGE
from memory_store import IncidentSummary, RecallStore, SessionKey, Viewer
from tests.bot.conftest import load_case
from tests.bot.slack_edge import SlackEdge, event, running_edge
from tests.fakes.slack_api import WORKSPACE_URL

ORG = "E0FAKEORG"
ITEM = {
    "title": "checkout-api 500s after a deploy shrank the DB pool",
    "date": "2026-11-02",
    "channel_id": "C0NOVEMBER",
    "fix": "rolled back config/db.yaml",
    "path": "/incidents/2026-11-02-C0NOVEMBER/",
    "links": "https://example.slack.com/archives/C0NOVEMBER/p1 /incident/postmortem.md",
}


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[SlackEdge]:
    async with running_edge(tmp_path) as running:
        yield running


def command(text: str) -> dict[str, str]:
    return {**load_case("slash_command_agent_skills_edit.parsed.json"), "text": text}


async def test_agent_related_lists_what_each_session_was_given_with_links(edge: SlackEdge) -> None:
    # Given a session of the channel that was given one past incident at its start
    body = command("related")
    channel = str(body["channel_id"])
    opened = await edge.sessions.open_or_join(
        SessionKey(ORG, channel, "1796100000.000100"),
        requester_id="U0ALICE",
        initial_checkpoint="{}",
        text="checkout-api 500s",
        source_ts="1796100000.000100",
    )
    recall = RecallStore(edge.database)
    await recall.note_given(opened.session_id, ORG, channel, [ITEM])
    await recall.note_given("s-other-channel", ORG, "C0ELSE", [ITEM], thread_ts="1.0")
    # When someone runs /agent related there
    response = await edge.post_form(body)
    await edge.settle()
    # Then the reply links the thread, and names the incident, its fix, path and links
    assert response.status_code == 200
    (reply,) = edge.slack_api.state.ephemerals
    lines = reply["text"].splitlines()
    assert lines[0] == f"*Related past incidents given to sessions in <#{channel}>*"
    thread = f"{WORKSPACE_URL.rstrip('/')}/archives/{channel}/p1796100000000100"
    assert lines[1].startswith(f"<{thread}|Thread of ")
    assert lines[2] == (
        "  • 2026-11-02 in <#C0NOVEMBER>: checkout-api 500s after a deploy shrank the DB pool"
        " — fix: rolled back config/db.yaml (`/incidents/2026-11-02-C0NOVEMBER/`)"
        " <https://example.slack.com/archives/C0NOVEMBER/p1|link>"
    )
    assert len(lines) == 3  # nothing of the other channel


async def test_agent_related_in_a_channel_whose_sessions_got_none_says_so(edge: SlackEdge) -> None:
    await edge.post_form(command("related"))
    await edge.settle()
    (reply,) = edge.slack_api.state.ephemerals
    assert reply["text"].startswith("No session in <#")
    assert "`related`" in AGENT_USAGE


async def test_a_message_in_a_private_channel_marks_its_incidents_private(
    edge: SlackEdge,
) -> None:
    org = "T0FAKETEAM"  # the event's authorization
    recall = RecallStore(edge.database)
    for channel in ("C0PRIVATE", "C0PUBLIC"):
        await recall.record(org, channel, IncidentSummary(f"incident in {channel}"))
    for channel, kind in (("C0PRIVATE", "group"), ("C0PUBLIC", "channel")):
        body = event(
            "event_message_thread_reply_no_mention.json", channel=channel, channel_type=kind
        )
        response = await edge.post_event(body)
        assert response.status_code == 200
    await edge.settle()
    seen = await recall.incidents(Viewer(org, "C0ELSEWHERE"))
    assert [i.channel_id for i in seen] == ["C0PUBLIC"]
    own = await recall.incidents(Viewer(org, "C0PRIVATE"))
    assert {i.channel_id: i.private for i in own} == {"C0PRIVATE": True, "C0PUBLIC": False}
