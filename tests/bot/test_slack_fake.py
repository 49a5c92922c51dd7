"""The fake Slack Web API answers like Slack, so tests of the edge can trust it."""

from __future__ import annotations

import aiohttp
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

    assert await error_of(post(channel="C1", text="x", blocks=long_section)) == "invalid_blocks"
    assert await error_of(post(channel="C1", text="x", blocks=many_blocks)) == "invalid_blocks"
    assert await error_of(post(channel="C1", text="x", blocks=two_markdowns)) == (
        "msg_blocks_too_long"
    )


def _button(**fields: object) -> dict[str, object]:
    return {"type": "button", "text": {"type": "plain_text", "text": "Approve"}} | fields


@pytest.mark.parametrize(
    "button",
    [
        _button(value="v" * 2_001),
        _button(action_id="a" * 256),
        _button(text={"type": "plain_text", "text": "t" * 76}),
        _button(text={"type": "mrkdwn", "text": "*Approve*"}),
        _button(style="warning"),
    ],
    ids=["value", "action_id", "text", "mrkdwn-text", "style"],
)
async def test_a_button_past_block_kits_limits_is_refused(
    slack_client: AsyncWebClient, button: dict[str, object]
) -> None:
    blocks = [{"type": "actions", "elements": [button]}]
    refused = slack_client.chat_postMessage(channel="C1", text="x", blocks=blocks)
    assert await error_of(refused) == "invalid_blocks"


async def test_buttons_within_the_limits_and_25_to_a_block_are_taken(
    slack_client: AsyncWebClient,
) -> None:
    fine = _button(action_id="a" * 255, value="v" * 2_000, style="danger")
    posted = await slack_client.chat_postMessage(
        channel="C1", text="x", blocks=[{"type": "actions", "elements": [fine] * 25}]
    )
    assert posted["ok"] is True
    too_many = [{"type": "actions", "elements": [fine] * 26}]
    assert (
        await error_of(slack_client.chat_postMessage(channel="C1", text="x", blocks=too_many))
        == "invalid_blocks"
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


async def test_text_over_40000_chars_is_cut_when_posted_and_refused_when_updated(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    posted = await slack_client.chat_postMessage(channel="C1", text="t" * 40_001)

    assert len(slack_api.thread("C1", posted["ts"])[0]["text"]) == 40_000
    update = slack_client.chat_update(channel="C1", ts=posted["ts"], text="u" * 40_001)
    assert await error_of(update) == load_case("webapi_chat_update_msg_too_long.json")["error"]


async def test_auth_test_carries_the_grid_fields_of_the_recorded_answer() -> None:
    fake = FakeSlackApi(enterprise_id="E0FAKEORG")
    await fake.start()
    try:
        client = AsyncWebClient(token=fake.token, base_url=fake.base_url)
        answer = (await client.auth_test()).data
    finally:
        await fake.stop()

    assert isinstance(answer, dict)
    assert set(answer) == set(load_case("webapi_auth_test_ok.json"))
    assert (answer["enterprise_id"], answer["is_enterprise_install"]) == ("E0FAKEORG", False)


async def test_chat_update_returns_the_updated_message(slack_client: AsyncWebClient) -> None:
    posted = await slack_client.chat_postMessage(channel="C1", text="working")

    updated = await slack_client.chat_update(channel="C1", ts=posted["ts"], text="done")

    assert updated["message"]["text"] == "done"
    assert updated["message"]["edited"]["ts"]


async def test_cursors_are_opaque_strings_and_a_made_up_one_is_refused(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    root = slack_api.add_message("C1", "root")
    for i in range(4):
        slack_api.add_message("C1", f"reply {i}", thread_ts=root)

    first = await slack_client.conversations_replies(channel="C1", ts=root, limit=2)
    cursor = first["response_metadata"]["next_cursor"]
    second = await slack_client.conversations_replies(channel="C1", ts=root, limit=2, cursor=cursor)

    assert not cursor.isdigit()
    assert [m["text"] for m in second["messages"]] == ["reply 1", "reply 2"]
    bad = slack_client.conversations_replies(channel="C1", ts=root, cursor="2")
    assert await error_of(bad) == "invalid_cursor"


@pytest.mark.parametrize(
    "error", ["is_archived", "not_in_channel", "channel_not_found"], ids=lambda e: str(e)
)
async def test_a_broken_channel_refuses_every_call_naming_it(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, error: str
) -> None:
    slack_api.break_channel("C1", error)

    assert await error_of(slack_client.chat_postMessage(channel="C1", text="x")) == error
    assert await error_of(slack_client.chat_postMessage(channel="C1", text="x")) == error
    assert (await slack_client.chat_postMessage(channel="C2", text="x"))["ok"]


@pytest.mark.parametrize("error", ["token_revoked", "account_inactive", "invalid_auth"])
async def test_a_revoked_installation_refuses_everything(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient, error: str
) -> None:
    slack_api.revoke(error)

    assert await error_of(slack_client.auth_test()) == error
    assert await error_of(slack_client.chat_postMessage(channel="C1", text="x")) == error


async def test_post_ephemeral_is_refused_where_the_bot_or_the_user_is_not(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    slack_api.remove_bot("C0NOBOT")
    slack_api.set_members("C1", ["U0ALICE"])
    ephemeral = slack_client.chat_postEphemeral

    assert await error_of(ephemeral(channel="D0ALICE", user="U0ALICE", text="x")) == (
        "channel_not_found"
    )
    assert await error_of(ephemeral(channel="C0NOBOT", user="U0ALICE", text="x")) == (
        "channel_not_found"
    )
    assert await error_of(ephemeral(channel="C1", user="U0BOB", text="x")) == "user_not_in_channel"
    assert (await ephemeral(channel="C1", user="U0ALICE", text="x"))["ok"]


async def test_methods_are_limited_per_workspace_by_tier() -> None:
    # Given Slack's per-minute limits applied to a 2 s window
    fake = FakeSlackApi(rate_window_s=2.0)
    await fake.start()
    try:
        client = AsyncWebClient(token=fake.token, base_url=fake.base_url, retry_handlers=[])
        ts = (await client.chat_postMessage(channel="C1", text="status"))["ts"]
        # When chat.update (Tier 3: 50/min) is called 51 times within the window
        for i in range(50):
            await client.chat_update(channel="C1", ts=ts, text=f"step {i}")
        with pytest.raises(SlackApiError) as caught:
            await client.chat_update(channel="C1", ts=ts, text="one too many")
    finally:
        await fake.stop()
    # Then the 51st is answered 429 with Retry-After, as Slack does
    assert caught.value.response.status_code == 429
    assert caught.value.response["error"] == "ratelimited"
    assert int(caught.value.response.headers["Retry-After"][0]) >= 1


async def test_a_private_file_is_served_to_the_bot_token_only(slack_api: FakeSlackApi) -> None:
    file = slack_api.add_file("pods.log", b"CrashLoopBackOff\n")

    async with aiohttp.ClientSession() as session:
        bearer = {"Authorization": f"Bearer {slack_api.token}"}
        async with session.get(file["url_private_download"], headers=bearer) as answer:
            content = await answer.read()
        async with session.get(file["url_private_download"]) as anonymous:
            sign_in = (anonymous.status, anonymous.content_type)

    assert content == b"CrashLoopBackOff\n"
    assert sign_in == (200, "text/html")


async def test_views_update_replaces_the_whole_view_keeping_only_matching_input_entries(
    slack_api: FakeSlackApi, slack_client: AsyncWebClient
) -> None:
    # Given an open modal with a Submit button and an input someone typed in
    def field(block_id: str, action_id: str) -> dict[str, object]:
        element = {"type": "plain_text_input", "action_id": action_id}
        label = {"type": "plain_text", "text": block_id}
        return {"type": "input", "block_id": block_id, "label": label, "element": element}

    title = {"type": "plain_text", "text": "Skills"}
    submit = {"type": "plain_text", "text": "Save"}
    first = {"type": "modal", "title": title, "submit": submit, "callback_id": "edit",
             "blocks": [field("name", "v"), field("body", "v")]}  # fmt: skip
    opened = (await slack_client.views_open(trigger_id="1.2.x", view=first))["view"]
    typed = {"name": {"v": {"type": "plain_text_input", "value": "triage"}},
             "body": {"v": {"type": "plain_text_input", "value": "# Triage"}}}  # fmt: skip
    slack_api.state.views[opened["id"]]["state"] = {"values": typed}

    # When the app updates it with a view that leaves out submit and callback_id, keeps
    # "name" as it was and gives "body" another action_id
    second = {"type": "modal", "title": title, "blocks": [field("name", "v"), field("body", "w")]}
    updated = (await slack_client.views_update(view_id=opened["id"], view=second))["view"]

    # Then it is the new view, at Slack's defaults where it says nothing, with a new hash;
    # only the entry whose block_id and action_id it kept is kept
    assert updated["id"] == opened["id"]
    assert updated["submit"] is None
    assert updated["callback_id"] == ""
    assert updated["hash"] != opened["hash"]
    assert updated["state"] == {"values": {"name": typed["name"]}}
    # and the old hash no longer updates it
    stale = slack_client.views_update(view_id=opened["id"], view=second, hash=opened["hash"])
    assert await error_of(stale) == "hash_conflict"
