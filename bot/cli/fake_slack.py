"""``warroom fake-slack``: the fake Slack Web API, to try ``serve`` in HTTP mode without Slack.

It serves the Web API ``serve`` calls (``auth.test``, ``chat.postMessage``,
``chat.update``, ``conversations.replies``, …) with the fake's token, and prints the
variables that point ``serve`` at it. With ``--events-url`` it also plays the
channel: each line typed is a message in ``#incident`` (the first @mentions the bot
and opens a thread, later ones reply in it), stored in the fake and delivered to
the app as a signed Events API request, as Slack would; what the bot posts or
edits there is printed (``warroom:``). A line that is just ``approve`` or ``deny``
clicks that button of the bot's latest approval request in the thread (§13), as a
signed ``block_actions`` interaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from bot.drill.channel import IncidentChannel
from bot.drill.errors import DrillError
from bot.drill.scenario import Person
from bot.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlackApi
from bot.slack.approval_messages import APPROVE_ACTION_ID, DENY_ACTION_ID

__all__ = ["CHANNEL", "SIGNING_SECRET", "deliver_lines", "exports", "watch_channel"]

CHANNEL = "C0INCIDENT"
SIGNING_SECRET = "fake-signing-secret"
YOU = "U0YOU"
WATCH_S = 0.2  # how often the channel is looked at for the bot's posts


def exports(fake: FakeSlackApi) -> str:
    """The shell line that points ``warroom serve`` at the fake, in HTTP mode."""
    return (
        f"export WARROOM_SLACK_MODE=http SLACK_API_URL={fake.base_url} "
        f"SLACK_BOT_TOKEN={fake.token} SLACK_SIGNING_SECRET={SIGNING_SECRET}"
    )


async def deliver_lines(
    fake: FakeSlackApi, events_url: str, lines: AsyncIterator[str], say: Callable[[str], None]
) -> None:
    """Deliver each line as a message of ``#incident`` (see the module doc) until
    ``lines`` ends; a line the app did not take is reported with ``say`` (and the
    next line tries again)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        channel = IncidentChannel(
            http=http,
            url=events_url,
            secret=SIGNING_SECRET,
            slack=fake,
            org_id=TEAM_ID,
            channel_id=CHANNEL,
        )
        thread_ts: str | None = None
        async for line in lines:
            if not line.strip():
                continue
            you = Person(YOU, "you", line.strip())
            word = line.strip().lower()
            try:
                if thread_ts is None:
                    thread_ts = await channel.mention(you)
                elif word in CLICKS:
                    await _click(fake, channel, you, CLICKS[word], thread_ts, say)
                else:
                    await channel.reply(you, thread_ts)
            except DrillError as exc:
                say(f"not delivered: {exc}")


CLICKS = {"approve": APPROVE_ACTION_ID, "deny": DENY_ACTION_ID}
"""The lines that click a button of the latest approval request, and the button."""


async def _click(
    fake: FakeSlackApi,
    channel: IncidentChannel,
    you: Person,
    action_id: str,
    thread_ts: str,
    say: Callable[[str], None],
) -> None:
    """Click ``action_id`` on the bot's latest message in the thread that has it."""
    for message in reversed(fake.state.messages.get(CHANNEL, [])):
        button = _button(message, action_id)
        if message.get("thread_ts") == thread_ts and button is not None:
            await channel.click(
                you,
                action_id=action_id,
                value=str(button.get("value", "")),
                message_ts=str(message["ts"]),
                thread_ts=thread_ts,
            )
            return
    say("no approval request waits in the thread: nothing to click")


def _button(message: dict[str, Any], action_id: str) -> dict[str, Any] | None:
    """The button ``action_id`` in ``message``'s blocks, or None."""
    for block in message.get("blocks") or []:
        for element in block.get("elements") or () if isinstance(block, dict) else ():
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return element
    return None


async def watch_channel(fake: FakeSlackApi, say: Callable[[str], None]) -> None:
    """Print each message the bot posts in ``#incident``, and each edit of one, until
    cancelled."""
    shown: dict[str, str] = {}
    while True:
        for message in list(fake.state.messages.get(CHANNEL, [])):
            if message.get("user") == BOT_USER_ID or message.get("bot_id"):
                ts, text = str(message["ts"]), str(message.get("text", ""))
                if shown.get(ts) != text:
                    say(f"warroom{' (edited)' if ts in shown else ''}: {text}")
                    shown[ts] = text
        await asyncio.sleep(WATCH_S)
