"""The fake Slack Web API answers like Slack, so tests of the edge can trust it."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.bot.conftest import load_case
from tests.fakes.slack_api import FakeSlackApi


async def error_of(call: object) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call  # type: ignore[misc]
    return str(caught.value.response["error"])


async def test_wrong_token_is_refused(slack_api: FakeSlackApi) -> None:
    client = AsyncWebClient(token="xoxb-wrong", base_url=slack_api.base_url)

    assert await error_of(client.auth_test()) == "invalid_auth"


async def test_limits_are_enforced_with_slacks_error_codes(slack_client: AsyncWebClient) -> None:
    post = slack_client.chat_postMessage
    long_section = [{"type": "section", "text": {"type": "mrkdwn", "text": "s" * 3_001}}]
    two_markdowns = [{"type": "markdown", "text": "m" * 7_000}] * 2
    many_blocks = [{"type": "divider"}] * 51

    assert await error_of(post(channel="C1", text="t" * 40_001)) == "msg_too_long"
    assert await error_of(post(channel="C1", text="x", blocks=long_section)) == "invalid_blocks"
    assert await error_of(post(channel="C1", text="x", blocks=many_blocks)) == "invalid_blocks"
    assert await error_of(post(channel="C1", text="x", blocks=two_markdowns)) == (
        "msg_blocks_too_long"
    )


async def test_rate_limit_answers_429_with_retry_after_and_slacks_body(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_api.rate_limit_next("chat.postMessage", retry_after_s=7)

    with pytest.raises(SlackApiError) as caught:
        await slack_client.chat_postMessage(channel="C1", text="hello")

    case = load_case("webapi_ratelimited_429.json")
    assert caught.value.response.status_code == 429
    assert caught.value.response.headers["Retry-After"] == "7"
    assert caught.value.response.data == case["body"]
    assert slack_api.thread("C1", "0") == []  # nothing was posted


async def test_injected_errors_use_the_recorded_shapes(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_api.fail_next("views.open", "expired_trigger_id")

    with pytest.raises(SlackApiError) as caught:
        await slack_client.views_open(trigger_id="1.2.x", view={"type": "modal", "blocks": []})

    assert caught.value.response.data == load_case("webapi_views_open_expired_trigger.json")
    assert slack_api.state.views == {}


async def test_replies_serve_posted_messages_with_metadata_only_when_asked(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    parent = slack_api.add_message("C1", "help")
    metadata = {"event_type": "warroom_post", "event_payload": {"key": "s:1"}}
    await slack_client.chat_postMessage(
        channel="C1", thread_ts=parent, text="hi", metadata=metadata
    )

    plain = await slack_client.conversations_replies(channel="C1", ts=parent)
    full = await slack_client.conversations_replies(
        channel="C1", ts=parent, include_all_metadata=True
    )

    assert [m.get("metadata") for m in plain["messages"]] == [None, None]
    assert [m.get("metadata") for m in full["messages"]] == [None, metadata]
