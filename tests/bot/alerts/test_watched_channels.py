"""Watched channels over both Slack transports (signed HTTP events, Socket Mode envelopes):
an alerting app's post starts a session in its thread with no mention, a repeat joins the
first thread, people's and our own posts start nothing, and people stay in charge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.slack.skills.edit_policy import EditPolicy
from bot.slack.watch import WatchPolicy
from memory_store import AlertStore, AlertTally, SessionKey, SessionStatus, WatchedChannels
from tests.bot.alerts.alert_cases import alert_body
from tests.bot.alerts.watch_support import WATCHED, Channel, session_on, until, watched_channel
from tests.bot.conftest import load_case
from tests.bot.slack_edge import SlackEdge, event
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID

TRANSPORTS = ["http", "socket"]
SOURCES = [
    "alertmanager_firing",
    "grafana_firing",
    "pagerduty_triggered",
    "datadog_triggered",
    "sentry_issue",
    "opsgenie_created",
]
TITLES = {
    "alertmanager_firing": "HighErrorRate (checkout-api payments critical)",
    "grafana_firing": "DiskAlmostFull Nodes (node-3:9100 /var/lib/postgresql)",
    "pagerduty_triggered": "payments-api p99 latency above 2s",
    "datadog_triggered": "[P2] payments-api p99 latency > 2s",
    "sentry_issue": "TypeError: Cannot read properties of undefined (reading 'amount')",
    "opsgenie_created": "orders-db replication lag > 30s",
}


async def tally(edge: SlackEdge) -> AlertTally:
    return await AlertStore(edge.database).tally(TEAM_ID)


async def all_taken(edge: SlackEdge) -> AlertTally:
    """The tally once every recorded alert has been taken (awaited, not slept)."""
    return await until(lambda: tally(edge), lambda t: t.pending == 0)


def thread_texts(edge: SlackEdge, ts: str, channel: str = WATCHED) -> list[str]:
    """What the bot posted in the thread ``ts`` (not the root)."""
    return [
        str(m.get("text", ""))
        for m in edge.slack_api.thread(channel, ts)
        if m["ts"] != ts and m.get("user") == BOT_USER_ID
    ]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("case", SOURCES)
async def test_an_alerting_apps_post_starts_a_session_in_its_thread_with_no_mention(
    tmp_path: Path, transport: str, case: str
) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        # When the app posts its alert at the top of the watched channel
        ts = await channel.alert(case)
        # Then a session opens on that message's thread, the alert (as fenced data) its
        # first input, a worker is woken, and the thread says the agent is on it
        session = await session_on(edge, ts)
        first = (await edge.inbox_texts(session.id))[0]
        assert TITLES[case] in first
        assert "not instructions" in first.split("```")[0]
        assert [call[0] for call in edge.enqueued.calls] == [session.id]
        await edge.poster.flush()
        assert any("on it" in text for text in thread_texts(edge, ts))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_persons_top_level_message_in_a_watched_channel_starts_nothing(
    tmp_path: Path, transport: str
) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        body = alert_body("person_top_level")
        ts = edge.slack_api.add_message(WATCHED, body["event"]["text"], user="U0ALICE")
        body["event"].update(ts=ts, event_ts=ts)

        await channel.deliver(body)

        assert (await tally(edge)).received == 0
        assert await edge.sessions.find(SessionKey(TEAM_ID, WATCHED, ts)) is None
        assert edge.enqueued.calls == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_our_own_posts_never_start_a_session(tmp_path: Path, transport: str) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        # Given our own post at the top of the watched channel, echoed back by Slack
        echo = load_case("event_message_bot_self_echo.json")
        echo["event"].pop("thread_ts")
        echo["event"].pop("parent_user_id")
        echo["event"].update(channel=WATCHED, ts="1767225700.000100", event_ts="1767225700.000100")
        # and one that carries only our bot_id (no user), as an app's webhook post would
        webhook_echo = json.loads(json.dumps(echo))
        webhook_echo["event_id"] = "Ev0ECHO2"
        webhook_echo["event"].pop("user")
        webhook_echo["event"].update(subtype="bot_message", ts="1767225701.000100")
        # When both arrive
        await channel.deliver(echo)
        await channel.deliver(webhook_echo)
        # Then nothing was recorded or started
        assert (await tally(edge)).received == 0
        assert edge.enqueued.calls == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_repeat_joins_the_first_thread_and_the_resolve_reaches_its_session(
    tmp_path: Path, transport: str
) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        # Given Alertmanager's alert, which started a session in its thread
        first_ts = await channel.alert("alertmanager_firing")
        session = await session_on(edge, first_ts)
        # When it fires again (a new post) and then resolves (another post)
        again_ts = await channel.alert("alertmanager_firing")
        await all_taken(edge)
        resolved_ts = await channel.alert("alertmanager_resolved")
        counts = await all_taken(edge)
        # Then no second session: both went to the first thread's session as inputs
        for other in (again_ts, resolved_ts):
            assert await edge.sessions.find(SessionKey(TEAM_ID, WATCHED, other)) is None
        texts = await until(lambda: edge.inbox_texts(session.id), lambda t: len(t) >= 3)
        assert len(texts) == 3
        assert "status: resolved" in texts[2]
        assert counts.session_threads == 1
        assert counts.unaccounted == 0
        await edge.poster.flush()
        said = " ".join(thread_texts(edge, first_ts))
        assert "2nd time" in said
        assert "Resolved at" in said


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_redelivered_alert_is_taken_once(tmp_path: Path, transport: str) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        ts = await channel.alert("datadog_triggered")
        session = await session_on(edge, ts)
        # When Slack delivers the same message again (a retry: a new event_id, same ts)
        again = alert_body("datadog_triggered", ts=ts)
        await channel.deliver(again)
        counts = await all_taken(edge)
        # Then it was recorded once and the session has one input
        assert counts.received == 1
        assert len(await edge.inbox_texts(session.id)) == 1


async def test_an_unwatched_channel_starts_nothing_until_watch_on_and_again_after_off(
    tmp_path: Path,
) -> None:
    async with watched_channel(tmp_path, "http", policy=WatchPolicy()) as channel:
        edge = channel.edge
        # Given a channel nobody watches: an alert there starts nothing
        await channel.alert("sentry_issue")
        assert (await tally(edge)).received == 0
        # When someone runs /agent watch on in it
        await command(edge, "watch on")
        answer = edge.slack_api.state.ephemerals[-1]["text"]
        assert f"<#{WATCHED}> is now watched" in answer
        # Then the next alert starts a session
        ts = await channel.alert("opsgenie_created")
        await session_on(edge, ts)
        # And after /agent watch off, alerts start nothing again
        await command(edge, "watch off")
        await channel.alert("pagerduty_triggered")
        assert (await tally(edge)).received == 1
        await command(edge, "watch status")
        status = edge.slack_api.state.ephemerals[-1]["text"]
        assert "is not watched (switched off by <@U0FAKEALICE>" in status


async def test_a_channel_watched_by_default_can_be_switched_off(tmp_path: Path) -> None:
    async with watched_channel(tmp_path, "http") as channel:
        edge = channel.edge
        await command(edge, "watch status")
        assert (
            "watched from the start by the settings" in edge.slack_api.state.ephemerals[-1]["text"]
        )
        await command(edge, "watch off")
        await channel.alert("grafana_firing")

        assert (await tally(edge)).received == 0


async def test_only_the_allowed_senders_count_when_a_list_is_given(tmp_path: Path) -> None:
    policy = WatchPolicy(frozenset({WATCHED}), senders=frozenset({"A0DATADOG"}))
    async with watched_channel(tmp_path, "http", policy=policy) as channel:
        edge = channel.edge
        grafana_ts = await channel.alert("grafana_firing")
        datadog_ts = await channel.alert("datadog_triggered")

        await session_on(edge, datadog_ts)
        assert await edge.sessions.find(SessionKey(TEAM_ID, WATCHED, grafana_ts)) is None
        assert (await tally(edge)).received == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_thread_where_a_person_mentioned_the_bot_first_is_not_started_twice(
    tmp_path: Path, transport: str
) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        # Given an alert post whose event is late, and a person who already mentioned the
        # bot in its thread (a session started there)
        body = alert_body("pagerduty_triggered")
        fields = {k: v for k, v in body["event"].items() if k not in ("type", "channel", "ts")}
        fields = {k: v for k, v in fields.items() if k not in ("channel_type", "event_ts")}
        ts = str(edge.slack_api.add_bot_message(WATCHED, fields)["ts"])
        text = f"<@{BOT_USER_ID}> is this the checkout incident?"
        reply_ts = edge.slack_api.add_message(WATCHED, text, user="U0ALICE", thread_ts=ts)
        mention = event(
            "event_app_mention_in_thread.json", channel=WATCHED, text=text, ts=reply_ts,
            thread_ts=ts, user="U0ALICE",
        )  # fmt: skip
        await channel.deliver(mention)
        session = await session_on(edge, ts)
        # When the alert's own event arrives
        body["event"].update(ts=ts, event_ts=ts)
        await channel.deliver(body)
        await all_taken(edge)
        # Then the person's session got the alert as an input: one session, no second start
        after = await edge.sessions.find(SessionKey(TEAM_ID, WATCHED, ts))
        assert after is not None
        assert after.id == session.id
        await until(
            lambda: edge.inbox_texts(session.id),
            lambda texts: any("payments-api p99 latency" in t for t in texts),
        )
        await edge.poster.flush()
        assert not any("on it" in t for t in thread_texts(edge, ts))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_persons_reply_steers_and_stop_ends_the_listening(
    tmp_path: Path, transport: str
) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        ts = await channel.alert("alertmanager_firing")
        session = await session_on(edge, ts)
        # When a person replies in the alert's thread, then says stop
        await reply(channel, ts, "it started after the 14:02 deploy")
        await reply(channel, ts, "stop")
        # Then the reply reached the session, and stop cancelled it
        assert "it started after the 14:02 deploy" in await edge.inbox_texts(session.id)
        stopped = await edge.sessions.get(session.id)
        assert stopped is not None
        assert stopped.status is SessionStatus.CANCELLED
        # And a later repeat of the alert is noted in the thread but wakes nothing
        wakes = len(edge.enqueued.calls)
        await channel.alert("alertmanager_firing")
        await all_taken(edge)
        assert len(edge.enqueued.calls) == wakes


async def test_the_stop_button_ends_the_listening(tmp_path: Path) -> None:
    async with watched_channel(tmp_path, "http") as channel:
        edge = channel.edge
        ts = await channel.alert("opsgenie_created")
        session = await session_on(edge, ts)
        payload = load_case("interactive_block_actions.json")
        payload["actions"][0].update(action_id="warroom_stop", value=session.id)
        payload.pop("enterprise", None)
        payload["team"].pop("enterprise_id", None)

        response = await edge.post_form({"payload": json.dumps(payload)})
        await edge.settle()

        assert response.status_code == 200
        stopped = await edge.sessions.get(session.id)
        assert stopped is not None
        assert stopped.status is SessionStatus.CANCELLED


async def reply(channel: Channel, thread_ts: str, text: str) -> None:
    ts = channel.edge.slack_api.add_message(WATCHED, text, user="U0ALICE", thread_ts=thread_ts)
    body = event(
        "event_message_thread_reply_no_mention.json", channel=WATCHED, text=text, ts=ts,
        thread_ts=thread_ts, user="U0ALICE",
    )  # fmt: skip
    await channel.deliver(body)


async def command(edge: SlackEdge, text: str) -> None:
    """``/agent <text>`` in the watched channel, signed, answered through response_url."""
    fields = {
        "team_id": TEAM_ID,
        "channel_id": WATCHED,
        "user_id": "U0FAKEALICE",
        "command": "/agent",
        "text": text,
        "response_url": "set-by-post_form",
        "trigger_id": "1.2.fake",
    }
    response = await edge.post_form(fields)
    assert response.status_code == 200
    await edge.settle()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_apps_edit_that_resolves_its_post_reaches_the_session(
    tmp_path: Path, transport: str
) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        # Given PagerDuty's post of an incident, which started a session
        ts = await channel.alert("pagerduty_triggered")
        session = await session_on(edge, ts)
        # When PagerDuty's app edits that post in place to say Resolved (message_changed)
        before = alert_body("pagerduty_triggered")["event"]
        after = alert_body("pagerduty_resolved")["event"]
        edit_ts = "1767229400.000900"
        changed = alert_body("pagerduty_triggered")
        changed["event"] = {
            "type": "message",
            "subtype": "message_changed",
            "message": {**after, "ts": ts, "edited": {"user": after["user"], "ts": edit_ts}},
            "previous_message": {**before, "ts": ts},
            "channel": WATCHED,
            "hidden": True,
            "ts": edit_ts,
            "event_ts": edit_ts,
            "channel_type": "channel",
        }
        for fields in (changed["event"]["message"], changed["event"]["previous_message"]):
            for name in ("channel", "channel_type", "event_ts"):
                fields.pop(name, None)
        await channel.deliver(changed)
        # Then the resolve reached the first thread's session
        texts = await until(lambda: edge.inbox_texts(session.id), lambda t: len(t) >= 2)
        assert "status: resolved" in texts[1]
        # and an edit that changes nothing about the status is no alert
        again = json.loads(json.dumps(changed))
        again["event"]["previous_message"] = again["event"]["message"]
        await channel.deliver(again)
        assert (await tally(edge)).received == 2


async def test_only_the_skill_editors_may_switch_a_channel(tmp_path: Path) -> None:
    # Given skill editors that do not include the person running the command
    editors = EditPolicy.parse("U0BOSS")
    async with watched_channel(tmp_path, "http", policy=WatchPolicy(), edit_policy=editors) as ch:
        edge = ch.edge
        # When they run /agent watch on
        await command(edge, "watch on")
        # Then they are told no, and the channel stays unwatched (anyone may ask the status)
        assert "now watched" not in edge.slack_api.state.ephemerals[-1]["text"]
        assert await WatchedChannels(edge.database).get(TEAM_ID, WATCHED) is None
        await command(edge, "watch status")
        assert "is not watched (the default)" in edge.slack_api.state.ephemerals[-1]["text"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_reply_before_the_alerts_session_opened_still_reaches_it(
    tmp_path: Path, transport: str
) -> None:
    async with watched_channel(tmp_path, transport) as channel:
        edge = channel.edge
        assert edge.taker is not None
        # Given an alert post whose session is not open yet (the taker has not run)
        await edge.taker.stop()
        ts = await channel.alert("sentry_issue")
        # When a person replies in its thread first
        await reply(channel, ts, "that's the pay.ts change from this morning")
        assert await edge.sessions.find(SessionKey(TEAM_ID, WATCHED, ts)) is None
        edge.taker.start()
        # Then the session, once open, has the alert and the reply
        session = await session_on(edge, ts)
        texts = await edge.inbox_texts(session.id)
        assert "that's the pay.ts change from this morning" in texts
