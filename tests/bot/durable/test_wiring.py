"""The worker's Slack client, as the composition root builds it."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bot.durable.wiring import make_slack_client
from bot.errors import SlackUnreachable, slack_call
from bot.settings import Settings
from tests.fakes.slack_api import FakeSlackApi


async def test_the_workers_slack_client_never_resends_a_post_after_a_connection_reset(
    slack_api: FakeSlackApi,
) -> None:
    settings = Settings(
        slack_bot_token=SecretStr(slack_api.token), slack_api_url=slack_api.base_url
    )
    client = make_slack_client(settings)
    slack_api.reset_after_next("chat.postMessage")

    with pytest.raises(SlackUnreachable):
        await slack_call("chat.postMessage", client.chat_postMessage(channel="C1", text="answer"))

    assert len(slack_api.calls_to("chat.postMessage")) == 1
    assert (await client.auth_test())["ok"]
