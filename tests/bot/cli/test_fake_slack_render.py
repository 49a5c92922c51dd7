"""``warroom fake-slack`` prints a message as Slack shows it (its blocks), not only its
fallback text (issue #26, item 7): an approval request's command and buttons, a rich text
list and code block, a reply's fields and context."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
from slack_sdk.web.async_client import AsyncWebClient

from bot.cli.fake_slack import CHANNEL, watch_channel
from bot.fakes.slack_api import FakeSlackApi
from bot.slack.approval_messages import render_approval
from harness import PendingApproval

COMMAND = "kubectl -n payments rollout restart deploy/payments-api"
RICH_TEXT = [
    {
        "type": "rich_text",
        "elements": [
            {"type": "rich_text_section", "elements": [
                {"type": "text", "text": "Timeline of "},
                {"type": "link", "url": "https://acme.slack.com/archives/C1/p1",
                 "text": "the thread"},
            ]},
            {"type": "rich_text_list", "style": "ordered", "indent": 0, "elements": [
                {"type": "rich_text_section", "elements": [
                    {"type": "text", "text": "14:02 deploy by "},
                    {"type": "user", "user_id": "U0ALICE"}]},
                {"type": "rich_text_section", "elements": [
                    {"type": "text", "text": "14:03 500s begin "},
                    {"type": "emoji", "name": "fire"}]},
            ]},
            {"type": "rich_text_preformatted", "elements": [
                {"type": "text", "text": "pool_size: 5\nmax_overflow: 0"}]},
        ],
    }
]  # fmt: skip
FIELDS = [
    {"type": "section", "fields": [
        {"type": "mrkdwn", "text": "*Skill*"}, {"type": "mrkdwn", "text": "*Version*"},
        {"type": "mrkdwn", "text": "db-pool-exhaustion"}, {"type": "plain_text", "text": "3"}]},
    {"type": "context", "elements": [
        {"type": "mrkdwn", "text": "edited by <@U0BOB>"}, {"type": "plain_text", "text": "today"}]},
]  # fmt: skip


async def test_fake_slack_prints_blocks_as_a_person_sees_them_in_slack() -> None:
    fake = FakeSlackApi()
    await fake.start()
    said: list[str] = []
    watching = asyncio.create_task(watch_channel(fake, said.append))
    client = AsyncWebClient(token=fake.token, base_url=fake.base_url)
    try:
        thread_ts = fake.add_message(CHANNEL, "<@UBOT> payments is down")
        now = datetime.now(UTC)
        approval = PendingApproval(
            "toolu_1", "Bash", "0" * 64, COMMAND, "restarts a production workload",
            now, now + timedelta(minutes=15),
        )  # fmt: skip
        asking = render_approval(approval, session_id="s1", requester_id="U0ALICE")
        # When the app posts an approval request, a rich text timeline (Web API calls)
        for text, blocks in (("Approval needed", list(asking.blocks)), ("Timeline", RICH_TEXT)):
            await client.chat_postMessage(
                channel=CHANNEL, thread_ts=thread_ts, text=text, blocks=blocks
            )
        # and answers a slash command with fields and a context line (its response_url)
        async with httpx.AsyncClient() as http:
            reply = {"response_type": "ephemeral", "text": "Skills", "blocks": FIELDS}
            await http.post(fake.response_url("1"), json=reply)
        shown = await _until(said, lambda text: "edited by" in text)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        await fake.stop()
    # Then each is printed as Slack shows it, not as its fallback text
    assert f"```{COMMAND}```" in shown
    assert "*Why:* restarts a production workload" in shown
    assert "[ Approve ]  [ Deny ]" in shown
    assert "@U0ALICE's agent wants to run" in shown
    assert "Timeline of the thread (https://acme.slack.com/archives/C1/p1)" in shown
    assert "\n    1. 14:02 deploy by @U0ALICE\n    2. 14:03 500s begin :fire:" in shown
    assert "\n        pool_size: 5\n        max_overflow: 0" in shown
    assert "warroom (only you): *Skill*    *Version*\n    db-pool-exhaustion    3" in shown
    assert "edited by @U0BOB  today" in shown


async def _until(said: list[str], done: Callable[[str], bool], timeout_s: float = 30.0) -> str:
    """What was printed, once ``done`` holds for it (the watcher looks every 0.2 s)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not done(text := "\n".join(said)):
        assert asyncio.get_running_loop().time() < deadline, text
        await asyncio.sleep(0.05)
    return text
