"""What a session's thread receives after the app opened it: answers, status, its Stop button.

The worker side is not running here; the poster is driven the way the post step
drives it (same key on a retried step), in a thread the app itself opened.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.errors import SlackCallFailed
from bot.slack.poster import Thread
from bot.slack.render import Progress, render_status
from memory_store import SessionStatus
from tests.bot.conftest import load_case
from tests.bot.slack_edge import CHANNEL, SlackEdge, event, running_edge

ROOT_TS = "1767225600.000100"
SUMMARY = "## Findings\n\nThe v1.4 deploy lowered the DB pool to 10; rolled back at 09:25."


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[SlackEdge]:
    async with running_edge(tmp_path) as running:
        yield running


@pytest.fixture
async def thread(edge: SlackEdge) -> Thread:
    """A session opened by a top-level mention through the app."""
    assert (await edge.post_event(event("event_app_mention_top_level.json"))).status_code == 200
    await edge.settle()
    session = await edge.session(ROOT_TS)
    assert session is not None
    return Thread(session.id, CHANNEL, ROOT_TS)


def bot_posts(edge: SlackEdge) -> list[dict[str, Any]]:
    return [m for m in edge.slack_api.thread(CHANNEL, ROOT_TS) if m.get("bot_id")]


async def test_the_final_summary_arrives_exactly_once_when_its_post_step_runs_twice(
    edge: SlackEdge, thread: Thread
) -> None:
    key = f"{thread.session_id}:answer:4"

    await edge.poster.post_answer(thread, key, SUMMARY)
    await edge.poster.post_answer(thread, key, SUMMARY)  # the step retried after a crash

    (answer,) = bot_posts(edge)
    assert answer["blocks"] == [{"type": "markdown", "text": SUMMARY}]


async def test_an_answer_refused_as_msg_too_long_still_arrives_as_a_file(
    edge: SlackEdge, thread: Thread
) -> None:
    edge.slack_api.fail_next("chat.postMessage", "msg_too_long")

    posted = await edge.poster.post_answer(thread, f"{thread.session_id}:answer:2", SUMMARY)

    assert posted.file_id is not None
    assert edge.slack_api.state.files[posted.file_id]["content"].decode() == SUMMARY
    (share,) = bot_posts(edge)
    assert share["files"][0]["id"] == posted.file_id


async def test_a_429_on_chat_update_is_waited_out_and_the_last_status_is_not_lost(
    edge: SlackEdge, thread: Thread
) -> None:
    first = render_status(Progress(thread.session_id, "Reading the playbooks"))
    ts = await edge.poster.post(thread, f"{thread.session_id}:status", first)
    edge.slack_api.rate_limit_next("chat.update", retry_after_s=1)

    last = render_status(Progress(thread.session_id, "Running `kubectl get pods`", elapsed_s=42))
    await edge.poster.update_status(CHANNEL, ts, last, final=True)

    limited, retried = edge.slack_api.calls_to("chat.update")
    assert (limited.status, retried.status) == (429, 200)
    assert retried.waited_s is not None
    assert retried.waited_s >= 1.0
    (status,) = bot_posts(edge)
    assert status["blocks"] == list(last.blocks)


async def test_the_stop_button_of_the_status_message_stops_its_session(
    edge: SlackEdge, thread: Thread
) -> None:
    # Given the status message the worker posts, with its Stop button
    status = render_status(Progress(thread.session_id, "Running `kubectl get pods`"))
    await edge.poster.post(thread, f"{thread.session_id}:status", status)
    (posted,) = bot_posts(edge)
    button = next(
        element
        for block in posted["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    )
    # When Bob presses it
    payload = load_case("interactive_block_actions.json")
    payload.pop("enterprise")
    payload["team"].pop("enterprise_id")
    payload["message"] = posted
    payload["actions"] = [{**button, "block_id": "b", "action_ts": "1767225900.123456"}]
    response = await edge.post_form({"payload": json.dumps(payload)})
    await edge.settle()
    # Then the session is cancelled, its step killed, and the thread told
    assert response.status_code == 200
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert session.status is SessionStatus.CANCELLED
    assert [c.session_id for c in edge.cancelled] == [thread.session_id]
    assert "Stopped by <@U0FAKEBOB>" in bot_posts(edge)[-1]["text"]


async def test_an_answers_notification_text_keeps_mentions_and_links_whole(
    edge: SlackEdge, thread: Thread
) -> None:
    # Given an answer that mentions a person and links a dashboard in Slack's markup
    answer = "> **Paged** <@U0FAKEALICE>: see <https://grafana.example/d/a_b|the *p99* graph>"

    # When it is posted
    await edge.poster.post_answer(thread, f"{thread.session_id}:answer:6", answer)

    # Then its fallback text (what notifications show) keeps both entities intact
    (post,) = edge.slack_api.calls_to("chat.postMessage")
    assert post.args["text"] == (
        "Paged <@U0FAKEALICE>: see <https://grafana.example/d/a_b|the *p99* graph>"
    )


async def test_a_post_whose_answer_is_lost_to_a_connection_reset_appears_once(
    edge: SlackEdge, thread: Thread
) -> None:
    # Given Slack accepts the answer but the connection resets before its reply arrives
    key = f"{thread.session_id}:answer:8"
    edge.slack_api.reset_after_next("chat.postMessage")
    with pytest.raises(SlackCallFailed):
        await edge.poster.post_answer(thread, key, SUMMARY)
    # When the post step runs again
    posted = await edge.poster.post_answer(thread, key, SUMMARY)
    # Then the client sent it once, and the outbox found it in the thread instead of posting
    (answer,) = bot_posts(edge)
    assert posted.message_ts == (answer["ts"],)
    assert len(edge.slack_api.calls_to("chat.postMessage")) == 1


async def test_a_usage_reply_whose_answer_is_lost_is_not_sent_twice(edge: SlackEdge) -> None:
    edge.slack_api.reset_after_next("chat.postMessage")

    await edge.post_event(event("event_app_mention_top_level.json", text="<@U0FAKEBOT>"))
    await edge.settle()

    assert len(bot_posts(edge)) == 1
