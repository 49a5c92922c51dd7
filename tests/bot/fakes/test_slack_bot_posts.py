"""The fake Slack takes other apps' posts (alerting apps in a watched channel) as Slack
shapes them, refuses what Slack would, and serves them back through the Web API."""

from __future__ import annotations

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.fakes.slack_alerts import SOURCES, alert_post
from bot.fakes.slack_api import BOT_ID, FakeSlackApi, SlackFailure

CHANNEL = "C0ALERTS"
TOO_LONG = [{"type": "header", "text": {"type": "plain_text", "text": "x" * 3001}}]


@pytest.mark.parametrize("source", SOURCES)
async def test_each_alerting_apps_post_is_stored_and_served_back(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, source: str
) -> None:
    stored = slack_api.add_bot_message(CHANNEL, alert_post(source))

    history = await slack_client.conversations_history(channel=CHANNEL)

    served = history["messages"][0]
    assert served["ts"] == stored["ts"]
    assert served["bot_id"] == stored["bot_id"] != BOT_ID
    assert served["attachments"] == stored["attachments"]


@pytest.mark.parametrize(
    ("post", "error"),
    [
        ({"text": "no bot id"}, "invalid_arguments"),
        ({"bot_id": BOT_ID, "text": "our own bot's id"}, "invalid_arguments"),
        ({"bot_id": "B0OTHER", "text": ""}, "no_text"),
        ({"bot_id": "B0OTHER", "attachments": {"title": "not a list"}}, "invalid_attachments"),
        ({"bot_id": "B0OTHER", "blocks": TOO_LONG}, "invalid_blocks"),
    ],
)  # fmt: skip
def test_a_post_slack_would_refuse_is_refused(
    slack_api: FakeSlackApi, post: dict[str, object], error: str
) -> None:
    with pytest.raises(SlackFailure) as refused:
        slack_api.add_bot_message(CHANNEL, post)

    assert refused.value.error == error
    assert slack_api.state.messages.get(CHANNEL, []) == []
