"""Replying to a slash command through its ``response_url``.

``chat.postEphemeral`` needs the bot in the channel: in a DM, or a channel Warroom was
never added to, Slack refuses it (``channel_not_found``, ``user_not_in_channel``) and the
user sees nothing. The command's ``response_url`` works wherever the command was typed
(docs.slack.dev, "Responding to slash commands": up to 5 replies within 30 minutes,
``response_type`` ``ephemeral`` by default). Sent with slack_sdk's ``AsyncWebhookClient``
without retry handlers: a reply is never sent twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiohttp
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.errors import SlackCallFailed, SlackUnreachable

METHOD = "response_url"


async def respond(response_url: str, *, text: str, blocks: Sequence[dict[str, Any]] = ()) -> None:
    """Send an ephemeral reply to the command that gave ``response_url``.

    Raises:
        SlackCallFailed: Slack answered with an error (``error`` is its body, e.g.
            ``expired_url``, ``used_url``); SlackUnreachable: no answer.
    """
    client = AsyncWebhookClient(response_url, retry_handlers=[])
    try:
        shown = list(blocks) or None
        answer = await client.send(text=text, blocks=shown, response_type="ephemeral")
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SlackUnreachable(METHOD, "transport") from exc
    if answer.status_code != 200:
        raise SlackCallFailed(METHOD, answer.body or "unknown", status=answer.status_code)
