"""The fake Slack's agent surface is as strict as Slack documents it (docs.slack.dev,
method and event reference; slack_sdk 3.48 sends the arguments).

Recorded shapes: ``tests/bot/data/slack/webapi_agents_*``, ``webapi_chat_*Stream*``.
"""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.bot.conftest import load_case
from tests.fakes.slack_api import FakeSlackApi

CHANNEL = "C0FAKEINC"
THREAD = "1767225600.000100"
RECIPIENT = {"recipient_user_id": "U0FAKEALICE", "recipient_team_id": "T0FAKETEAM"}
TASK = {"type": "task_update", "id": "t1", "title": "Running `uptime`", "status": "in_progress"}


async def refused(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


async def start(client: AsyncWebClient, **args: Any) -> str:
    answer = await client.chat_startStream(
        channel=CHANNEL, thread_ts=THREAD, **{"chunks": [TASK], **RECIPIENT, **args}
    )
    return str(answer["ts"])


async def test_set_status_answers_the_recorded_shape_and_takes_the_title_once(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_api.agents.subscribed_to_stop = False
    first = await slack_client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=THREAD, status="processing", title="disk full"
    )
    later = await slack_client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=THREAD, status="active", title="renamed?"
    )
    recorded = load_case("webapi_agents_sessions_setStatus_ok.json")
    assert set(first.data) == set(recorded)
    assert first["response_metadata"] == recorded["response_metadata"]
    assert (later["status"], later["title"]) == ("active", "disk full")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"status": "working"}, "invalid_status"),
        ({"status": "active", "thread_ts": None}, "thread_ts_required"),
        ({"status": "active", "channel_id": None}, "channel_not_found"),
        ({"status": "active", "title": "x" * 201}, "invalid_arguments"),
    ],
)
async def test_set_status_refuses_what_slack_refuses(
    slack_client: AsyncWebClient, args: dict[str, Any], error: str
) -> None:
    sent = {"channel_id": CHANNEL, "thread_ts": THREAD, **args}
    sent = {k: v for k, v in sent.items() if v is not None}
    assert await refused(slack_client.api_call("agents.sessions.setStatus", json=sent)) == error


async def test_set_status_in_a_channel_without_the_bot_is_not_authorized(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_api.remove_bot(CHANNEL)
    call = slack_client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=THREAD, status="processing"
    )
    assert await refused(call) == "not_authorized"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"recipient_user_id": None}, "missing_recipient_user_id"),
        ({"recipient_team_id": None}, "missing_recipient_team_id"),
        ({"markdown_text": "hi"}, "cannot_provide_both_markdown_text_and_chunks"),
        ({"task_display_mode": "list"}, "invalid_arguments"),
        ({"chunks": [{"type": "card", "text": "x"}]}, "invalid_chunks"),
        ({"chunks": [{**TASK, "status": "done"}]}, "invalid_chunks"),
        ({"chunks": [{**TASK, "colour": "red"}]}, "invalid_chunks"),
        ({"chunks": [{**TASK, "title": "x" * 257}]}, "invalid_chunks"),
        ({"chunks": [{"type": "markdown_text", "text": "x" * 12_001}]}, "msg_too_long"),
        ({"chunks": []}, "invalid_chunks"),
    ],
)
async def test_start_stream_refuses_what_slack_refuses(
    slack_client: AsyncWebClient, args: dict[str, Any], error: str
) -> None:
    sent = {"channel": CHANNEL, "thread_ts": THREAD, "chunks": [TASK], **RECIPIENT, **args}
    sent = {k: v for k, v in sent.items() if v is not None}
    assert await refused(slack_client.api_call("chat.startStream", json=sent)) == error


async def test_a_stream_keeps_its_shape_and_takes_nothing_once_stopped(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    ts = await start(slack_client)
    assert set(
        (await slack_client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=[TASK])).data
    ) == set(load_case("webapi_chat_startStream_ok.json"))
    mismatch = slack_client.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="hi")
    assert await refused(mismatch) == "streaming_mode_mismatch"
    empty = slack_client.api_call("chat.appendStream", json={"channel": CHANNEL, "ts": ts})
    assert await refused(empty) == "markdown_text_or_chunks_required"
    edit = slack_client.chat_update(channel=CHANNEL, ts=ts, text="edited")
    assert await refused(edit) == "streaming_state_conflict"
    too_many = [{"type": "divider"}] * 51
    assert await refused(slack_client.chat_stopStream(channel=CHANNEL, ts=ts, blocks=too_many)) == (
        "invalid_blocks"
    )
    bad_status = slack_client.chat_stopStream(channel=CHANNEL, ts=ts, session_status="done")
    assert await refused(bad_status) == "invalid_arguments"

    stopped = await slack_client.chat_stopStream(
        channel=CHANNEL, ts=ts, blocks=[{"type": "divider"}], session_status="active"
    )
    assert set(stopped.data) <= set(load_case("webapi_chat_stopStream_ok.json"))
    after = slack_client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=[TASK])
    assert (
        await refused(after)
        == load_case("webapi_chat_appendStream_not_in_streaming_state.json")["error"]
    )
    again = slack_client.chat_stopStream(channel=CHANNEL, ts=ts)
    assert await refused(again) == "message_not_in_streaming_state"
    await slack_client.chat_update(channel=CHANNEL, ts=ts, text="now editable")


async def test_the_native_stop_stops_the_streams_and_leaves_the_status_to_the_app(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    agents = slack_api.agents
    with pytest.raises(ValueError, match="not processing"):
        agents.click_stop(CHANNEL, THREAD, "U0FAKEBOB")
    await slack_client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=THREAD, status="processing"
    )
    ts = await start(slack_client)

    event = agents.click_stop(CHANNEL, THREAD, "U0FAKEBOB")

    recorded = load_case("event_agent_session_stopped.json")["event"]
    assert set(event) == set(recorded)
    assert event["streaming_message_ts"] == [ts]
    session = agents.session(CHANNEL, THREAD)
    assert session is not None
    assert session.status == "processing"
    after = slack_client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=[TASK])
    assert await refused(after) == "stopped_by_user"


async def test_without_the_event_subscription_no_stop_is_shown(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_api.agents.subscribed_to_stop = False
    await slack_client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=THREAD, status="processing"
    )
    with pytest.raises(ValueError, match="subscribe"):
        slack_api.agents.click_stop(CHANNEL, THREAD, "U0FAKEBOB")


async def test_a_stream_ends_after_its_lifetime(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_api.agents.stream_lifetime_s = 0.0
    ts = await start(slack_client)
    after = slack_client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=[TASK])
    assert await refused(after) == "message_not_in_streaming_state"


async def test_a_workspace_that_refuses_the_surface_refuses_every_method(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_api.agents.refuse("missing_scope", needed="chat:write", provided="channels:read")
    status = slack_client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=THREAD, status="processing"
    )
    assert await refused(status) == "missing_scope"
    assert await refused(start(slack_client)) == "missing_scope"


async def test_start_and_stop_stream_are_tier_2(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_client.retry_handlers.clear()
    for _ in range(20):
        await start(slack_client)
    with pytest.raises(SlackApiError) as caught:
        await start(slack_client)
    assert caught.value.response.status_code == 429
