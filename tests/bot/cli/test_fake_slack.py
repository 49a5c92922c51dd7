"""``warroom fake-slack``: HTTP mode tried end to end without Slack (issue #12, item 15)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from bot.cli.fake_slack import CHANNEL, deliver_lines
from bot.fakes.anthropic_api import FakeAnthropicAPI
from bot.fakes.anthropic_script import echo_reply
from bot.fakes.slack_api import FakeSlackApi
from tests.bot.cli.test_app import wait_until_up
from tests.bot.cli_support import Output, finish, start, terminate, warroom_env
from tests.ports import free_port


async def test_fake_slack_lets_serve_run_in_http_mode_and_answer_a_typed_mention(
    tmp_path: Path,
) -> None:
    slack_port, app_port = free_port(), free_port()
    events_url = f"http://127.0.0.1:{app_port}/slack/events"
    async with FakeAnthropicAPI(echo_reply, api_key="fake-key") as model:
        # Given the fake Slack, playing the channel for the app's Request URL
        fake = await start(
            "fake-slack",
            "--port",
            str(slack_port),
            "--events-url",
            events_url,
            env=warroom_env(tmp_path / "unused"),
            cwd=tmp_path,
            stdin=True,
        )
        assert fake.stdout is not None
        assert fake.stdin is not None
        out = Output(fake.stdout)
        printed = await out.until(lambda text: "export " in text, timeout_s=120)
        exported = dict(re.findall(r"(\w+)=(\S+)", printed.split("export ", 1)[1]))
        # And `warroom serve` started with what it printed
        env = warroom_env(
            tmp_path / "data",
            **exported,
            SLACK_HTTP_PORT=str(app_port),
            ANTHROPIC_API_KEY="fake-key",
            ANTHROPIC_BASE_URL=model.base_url,
        )
        serve = await start("serve", env=env, cwd=tmp_path)
        try:
            await wait_until_up(f"http://127.0.0.1:{app_port}/healthz")
            # When a message is typed to the fake Slack
            fake.stdin.write(b"is checkout-api up?\n")
            await fake.stdin.drain()
            # Then the bot's answer in the thread is printed
            await out.until(
                lambda text: (
                    "warroom: " in text and "checkout-api" in text.split("warroom: ", 1)[1]
                ),
                timeout_s=90,
            )
            # And the thread is a Slack agent session (the default), listening after it
            await out.until(lambda text: "warroom agent session: active · " in text, timeout_s=30)
        finally:
            terminate(serve, fake)
            serve_code, fake_code = await finish(serve), await finish(fake)

    assert exported["WARROOM_SLACK_MODE"] == "http"
    assert exported["SLACK_API_URL"] == f"http://127.0.0.1:{slack_port}/api/"
    assert (serve_code, fake_code) == (0, 0)


async def test_the_fake_slacks_message_ts_is_the_time_it_was_posted() -> None:
    fake = FakeSlackApi()
    before = time.time()

    ts = fake.add_message("C1", "hello")

    assert abs(float(ts) - before) < 5


async def test_typing_approve_clicks_the_latest_approval_request_in_the_thread() -> None:
    # Given the app's Request URL (recording what it is sent) and the fake Slack
    received: list[dict[str, str]] = []

    async def events(request: web.Request) -> web.Response:
        if request.content_type == "application/x-www-form-urlencoded":
            received.append({k: str(v) for k, v in (await request.post()).items()})
        else:
            received.append({"json": await request.text()})
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/slack/events", events)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}/slack/events"
    fake = FakeSlackApi()
    await fake.start()
    said: list[str] = []
    button = {"type": "button", "action_id": "warroom_approve", "value": '{"s":"S1"}'}

    async def lines() -> AsyncIterator[str]:
        yield "rollback the pool change"
        thread_ts = str(fake.state.messages[CHANNEL][-1]["ts"])
        yield "deny"  # no approval request yet: nothing is clicked
        fake.state.messages[CHANNEL].append(
            {"ts": "99.000001", "thread_ts": thread_ts, "bot_id": "B1", "text": "approve?",
             "blocks": [{"type": "actions", "elements": [button]}]}
        )  # fmt: skip
        yield "Approve"

    try:
        # When the mention, then "deny" and "Approve", are typed
        await deliver_lines(fake, url, lines(), said.append)
    finally:
        await fake.stop()
        await runner.cleanup()
    # Then the mention went as an event, "deny" clicked nothing, and "Approve" clicked
    # the request's button, signed as Slack sends an interaction
    assert said == ["no approval request waits in the thread: nothing to click"]
    clicks = [r for r in received if "payload" in r]
    assert len(clicks) == 1
    assert received[-1] is clicks[0]
    payload = json.loads(clicks[0]["payload"])
    assert payload["type"] == "block_actions"
    assert payload["actions"][0]["action_id"] == "warroom_approve"
    assert payload["actions"][0]["value"] == '{"s":"S1"}'
    assert payload["container"]["message_ts"] == "99.000001"


SKILL = "---\\nname: triage\\ndescription: First look at an incident.\\n---\\n\\n# Triage\\n"


async def test_a_skills_modal_is_shown_filled_in_and_can_be_submitted_new_then_edit(
    tmp_path: Path,
) -> None:
    slack_port, app_port = free_port(), free_port()
    events_url = f"http://127.0.0.1:{app_port}/slack/events"
    # Given `warroom fake-slack` playing the channel for `warroom serve`
    fake = await start(
        "fake-slack",
        "--port",
        str(slack_port),
        "--events-url",
        events_url,
        env=warroom_env(tmp_path / "unused"),
        cwd=tmp_path,
        stdin=True,
    )
    assert fake.stdout is not None
    assert fake.stdin is not None
    out = Output(fake.stdout)
    printed = await out.until(lambda text: "export " in text, timeout_s=120)
    exported = dict(re.findall(r"(\w+)=(\S+)", printed.split("export ", 1)[1]))
    env = warroom_env(
        tmp_path / "data", **exported, SLACK_HTTP_PORT=str(app_port), ANTHROPIC_API_KEY="k"
    )
    serve = await start("serve", env=env, cwd=tmp_path)

    async def typed(line: str) -> None:
        assert fake.stdin is not None
        fake.stdin.write(f"{line}\n".encode())
        await fake.stdin.drain()

    def after(mark: str) -> str:
        return out.text.rsplit(mark, 1)[-1]

    try:
        await wait_until_up(f"http://127.0.0.1:{app_port}/healthz")
        # When `/agent skills new` is typed: the app opens a loading modal, then fills it
        await typed("/agent skills new")
        await out.until(lambda text: "skill_part_1: " in text, timeout_s=30)
        shown = after("modal ")
        # Then the modal is shown as the app filled it: its inputs, and how to fill them
        assert "skill_name: " in shown
        assert "skill_part_1: " in shown
        assert "type 'set BLOCK TEXT', then 'submit' or 'close'" in shown
        # And filling it in and submitting it makes the skill
        await typed("set skill_name triage")
        await typed(f"set skill_part_1 {SKILL}")
        await typed("submit")
        await out.until(lambda text: "submitted" in text, timeout_s=30)
        await typed("/agent skills list")
        await out.until(lambda text: "`triage`" in after("submitted"), timeout_s=30)

        # When the skill is edited: the editor shows its text, and a change is saved
        mark = len(out.text)
        await typed("/agent skills edit triage")
        await out.until(lambda text: "skill_part_1: " in text[mark:], timeout_s=30)
        assert "skill_part_1: " in out.text[mark:]
        assert "name: triage" in out.text[mark:]
        await typed(f"set skill_part_1 {SKILL.replace('First look', 'A first look')}")
        await typed("submit")
        await out.until(lambda text: "submitted" in text[mark:], timeout_s=30)
        await typed("/agent skills show triage")
        await out.until(lambda text: "A first look at an incident" in text[mark:], timeout_s=30)
    finally:
        terminate(serve, fake)
        serve_code, fake_code = await finish(serve), await finish(fake)

    assert "not delivered" not in out.text
    assert "the modal says" not in out.text
    assert (serve_code, fake_code) == (0, 0)
