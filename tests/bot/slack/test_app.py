"""The Slack app over real HTTP: signed Events API requests → sessions, steering, dedupe, acks.

Each test runs the real bolt ``AsyncApp`` on 127.0.0.1 with a migrated SQLite store
(one test also on PostgreSQL) and the fake Slack Web API; ``enqueue`` records the
wake-ups a worker would get.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.slack.inbound import org_id_of
from bot.slack.poster import Thread
from bot.slack.render import Progress, render_status
from bot.slack.routing import EDITED_PREFIX
from bot.slack.thread_context import HEADER
from harness import Checkpoint
from memory_store import Limits, SessionStatus
from tests.bot.conftest import DATA, load_case
from tests.bot.slack_edge import CHANNEL, SIGNING_SECRET, SlackEdge, event, running_edge, sign

TOP = "event_app_mention_top_level.json"
REPLY = "event_message_thread_reply_no_mention.json"
ROOT_TS = "1767225600.000100"  # the top-level mention's ts in the payloads


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[SlackEdge]:
    async with running_edge(tmp_path) as running:
        yield running


async def start_session(edge: SlackEdge) -> str:
    response = await edge.post_event(event(TOP))
    assert response.status_code == 200
    await edge.settle()
    session = await edge.session(ROOT_TS)
    assert session is not None
    return session.id


def thread_messages(edge: SlackEdge, thread_ts: str) -> list[str]:
    return [m["text"] for m in edge.slack_api.thread(CHANNEL, thread_ts)]


# ----- sessions ------------------------------------------------------------------------


async def test_a_top_level_mention_starts_a_session_on_its_thread_and_wakes_it(
    edge: SlackEdge,
) -> None:
    response = await edge.post_event(event(TOP))
    await edge.settle()

    assert response.status_code == 200
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert session.requester_id == "U0FAKEALICE"
    assert await edge.inbox_texts(session.id) == [
        "payments-api p99 is 4s since 09:00, can you investigate?"
    ]
    assert Checkpoint.from_json(session.checkpoint).session_id == session.id
    assert edge.enqueued.calls == [(session.id, session.pending_token)]


async def test_a_follow_up_in_the_thread_steers_the_same_session_instead_of_a_new_one(
    edge: SlackEdge,
) -> None:
    # Given a session started by a top-level mention
    session_id = await start_session(edge)
    # When a teammate replies in the thread without mentioning the bot
    response = await edge.post_event(event(REPLY))
    await edge.settle()
    # Then the reply joins that session's inbox; no other session exists
    assert response.status_code == 200
    assert (await edge.inbox_texts(session_id))[1:] == [
        "rollback of v1.3 finished at 09:20, latency still high"
    ]
    assert await edge.session("1767225660.000300") is None


async def test_a_retried_event_makes_no_second_session_and_no_second_wake(
    edge: SlackEdge,
) -> None:
    body = event(TOP)
    first = await edge.post_event(body)
    retry = await edge.post_event(
        body, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    )
    await edge.settle()

    assert (first.status_code, retry.status_code) == (200, 200)
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert len(await edge.inbox_texts(session.id)) == 1
    assert len(edge.enqueued.calls) == 1


async def test_a_mention_and_its_message_twin_arriving_together_start_one_session(
    edge: SlackEdge,
) -> None:
    mention = event(TOP)
    twin = event(TOP, type="message", channel_type="channel")

    responses = await asyncio.gather(edge.post_event(mention), edge.post_event(twin))
    await edge.settle()

    assert [r.status_code for r in responses] == [200, 200]
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert len(await edge.inbox_texts(session.id)) == 1
    assert len(edge.enqueued.calls) == 1


async def test_the_twins_of_a_mention_inside_a_session_thread_steer_it_once(
    edge: SlackEdge,
) -> None:
    session_id = await start_session(edge)

    await edge.post_event(event("event_app_mention_in_thread.json"))
    await edge.post_event(event("event_message_duplicate_of_mention_in_thread.json"))
    await edge.settle()

    assert (await edge.inbox_texts(session_id))[1:] == [
        "also check the db connection pool, <@U0FAKEALICE> saw timeouts"
    ]


async def test_a_mention_inside_a_thread_that_is_no_session_takes_the_earlier_messages(
    edge: SlackEdge,
) -> None:
    # Given a thread where people and an alerting bot talked before anyone asked the bot
    api = edge.slack_api
    root = api.add_message(CHANNEL, "checkout 5xx alert fired", user="U0FAKEALICE")
    api.add_message(CHANNEL, "looks like the db pool again", user="U0FAKEBOB", thread_ts=root)
    api.state.messages[CHANNEL].append(
        {
            "type": "message",
            "subtype": "bot_message",
            "bot_id": "B0PAGER",
            "username": "pager",
            "text": "error rate 12%",
            "ts": api._ts(),  # between the reply and the mention (the fake's ts increase)
            "thread_ts": root,
        }
    )
    mention_ts = api.add_message(CHANNEL, "<@U0FAKEBOT> what changed?", thread_ts=root)
    # When someone mentions the bot in that thread
    body = event(
        "event_app_mention_in_thread.json",
        ts=mention_ts,
        thread_ts=root,
        user="U0FAKEALICE",
        text="<@U0FAKEBOT> what changed?",
    )
    response = await edge.post_event(body)
    await edge.settle()
    # Then a session starts whose first inputs are the request and the thread so far,
    # and it is woken only once both are recorded
    assert response.status_code == 200
    session = await edge.session(root)
    assert session is not None
    request, context = await edge.inbox_texts(session.id)
    assert request == "what changed?"
    assert context.startswith(HEADER)
    assert "<@U0FAKEALICE>: checkout 5xx alert fired" in context
    assert "<@U0FAKEBOB>: looks like the db pool again" in context
    assert "bot pager: error rate 12%" in context
    assert "what changed" not in context
    assert edge.enqueued.inbox_sizes == [2]


async def test_a_bare_mention_answers_with_usage_in_its_thread_and_starts_nothing(
    edge: SlackEdge,
) -> None:
    response = await edge.post_event(event(TOP, text="<@U0FAKEBOT>"))
    await edge.settle()

    assert response.status_code == 200
    assert await edge.session(ROOT_TS) is None
    (post,) = edge.slack_api.calls_to("chat.postMessage")
    assert post.args["thread_ts"] == ROOT_TS
    assert "Mention me with what to look at" in post.args["text"]


async def test_the_twins_of_a_bare_mention_get_one_usage_reply(edge: SlackEdge) -> None:
    mention = event(TOP, text="<@U0FAKEBOT>")
    twin = event(TOP, text="<@U0FAKEBOT>", type="message", channel_type="channel")

    await asyncio.gather(edge.post_event(mention), edge.post_event(twin))
    await edge.settle()

    assert len(edge.slack_api.calls_to("chat.postMessage")) == 1


async def test_the_org_is_the_installations_enterprise_in_a_shared_channel(
    tmp_path: Path,
) -> None:
    async with running_edge(tmp_path, external_may_start=True) as edge:
        body = event("event_app_mention_enterprise_shared_channel.json")
        response = await edge.post_event(body)
        await edge.settle()

        assert response.status_code == 200
        assert await edge.session(ROOT_TS, org="T0FAKEVENDR") is None
        session = await edge.session(ROOT_TS, org="E0FAKEORG")
        assert session is not None
        assert session.requester_id == "U0FAKEVENDOR"


# ----- bots, edits, deletions ----------------------------------------------------------


async def test_the_bots_own_messages_and_other_bots_never_start_or_steer(
    edge: SlackEdge,
) -> None:
    session_id = await start_session(edge)
    other_bot = event(REPLY, user=None, bot_id="B0OTHER", subtype="bot_message", text="deployed")
    bot_mentions_us = event(TOP, ts="1767225999.000100", bot_id="B0OTHER")

    statuses = [
        (await edge.post_event(body)).status_code
        for body in (event("event_message_bot_self_echo.json"), other_bot, bot_mentions_us)
    ]
    await edge.settle()

    assert statuses == [200, 200, 200]
    assert len(await edge.inbox_texts(session_id)) == 1
    assert await edge.session("1767225999.000100") is None
    assert len(edge.enqueued.calls) == 1
    assert edge.slack_api.calls_to("chat.postMessage") == []


async def test_a_persons_edit_steers_the_session_and_bot_edits_or_deletions_do_not(
    edge: SlackEdge,
) -> None:
    session_id = await start_session(edge)
    deleted = event(REPLY, subtype="message_deleted", ts="1767225800.000900")
    deleted["event"]["previous_message"] = load_case(REPLY)["event"]
    joined = event(REPLY, subtype="channel_join", ts="1767225801.000900", text="joined")

    statuses = [
        (await edge.post_event(body)).status_code
        for body in (
            event("event_message_changed_user_edit.json"),
            event("event_message_changed.json"),
            deleted,
            joined,
        )
    ]
    await edge.settle()

    assert statuses == [200, 200, 200, 200]
    assert (await edge.inbox_texts(session_id))[1:] == [
        EDITED_PREFIX + "rollback of v1.3 finished at 09:25, latency still high"
    ]


async def test_a_strict_channel_ignores_replies_without_a_mention_but_takes_mentions(
    tmp_path: Path,
) -> None:
    async with running_edge(tmp_path, strict_channels=frozenset({CHANNEL})) as edge:
        session_id = await start_session(edge)

        await edge.post_event(event(REPLY))
        await edge.post_event(event("event_app_mention_in_thread.json"))
        await edge.settle()

        assert (await edge.inbox_texts(session_id))[1:] == [
            "also check the db connection pool, <@U0FAKEALICE> saw timeouts"
        ]


# ----- stop ----------------------------------------------------------------------------


async def test_stop_in_a_session_thread_cancels_it_kills_the_step_and_says_so(
    edge: SlackEdge,
) -> None:
    session_id = await start_session(edge)

    response = await edge.post_event(event(REPLY, text="stop", ts="1767225900.000100"))
    await edge.settle()

    assert response.status_code == 200
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert session.status is SessionStatus.CANCELLED
    assert [c.session_id for c in edge.cancelled] == [session_id]
    assert "stop" not in await edge.inbox_texts(session_id)
    assert any("Stopped by <@U0FAKEBOB>" in t for t in thread_messages(edge, ROOT_TS))


async def test_stop_closes_the_turns_status_message_with_no_live_stop_button(
    edge: SlackEdge,
) -> None:
    # Given a session whose worker shows its turn's status message, Working with Stop
    session_id = await start_session(edge)
    thread = Thread(session_id, CHANNEL, ROOT_TS)
    working = render_status(Progress(session_id, "Running `sleep 600`"))
    status_ts = await edge.poster.post(thread, f"{session_id}:status:0", working, kind="status")

    # When a person says stop
    await edge.post_event(event(REPLY, text="stop", ts="1767225900.000100"))
    await edge.settle()

    # Then that message is final: stopped, without the Stop button (the reply says who)
    [shown] = [m for m in edge.slack_api.thread(CHANNEL, ROOT_TS) if m["ts"] == status_ts]
    assert "\\nStopped" in json.dumps(shown["blocks"])
    assert "warroom_stop" not in json.dumps(shown["blocks"])
    assert "Working" not in json.dumps(shown["blocks"])


async def test_a_retried_stop_stops_once_and_says_so_once(edge: SlackEdge) -> None:
    session_id = await start_session(edge)
    stop = event(REPLY, text="stop", ts="1767225900.000100")

    await edge.post_event(stop)
    await edge.post_event(stop, headers={"X-Slack-Retry-Num": "1"})
    await edge.settle()

    assert [c.session_id for c in edge.cancelled] == [session_id]
    assert edge.slack_api.calls_to("chat.postMessage")[-1].args["thread_ts"] == ROOT_TS
    assert len(edge.slack_api.calls_to("chat.postMessage")) == 1


def stop_press(session_id: str, *, enterprise: bool) -> dict[str, str]:
    """The Stop button's ``block_actions`` form; ``enterprise``: from an Enterprise Grid org
    (the payload as recorded), else from the plain workspace the events come from."""
    payload = load_case("interactive_block_actions.json")
    payload["actions"][0].update(action_id="warroom_stop", value=session_id)
    if not enterprise:
        payload.pop("enterprise")
        payload["team"].pop("enterprise_id")
    return {"payload": json.dumps(payload)}


async def test_the_stop_button_cancels_the_session_it_belongs_to(edge: SlackEdge) -> None:
    session_id = await start_session(edge)

    response = await edge.post_form(stop_press(session_id, enterprise=False))
    await edge.settle()

    assert response.status_code == 200
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert session.status is SessionStatus.CANCELLED
    assert [c.session_id for c in edge.cancelled] == [session_id]
    assert any("Stopped by <@U0FAKEBOB>" in t for t in thread_messages(edge, ROOT_TS))


async def test_a_stop_press_from_another_org_is_acked_and_ignored(edge: SlackEdge) -> None:
    session_id = await start_session(edge)

    response = await edge.post_form(stop_press(session_id, enterprise=True))
    await edge.settle()

    assert response.status_code == 200
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert session.status is SessionStatus.RUNNING
    assert edge.cancelled == []


# ----- acks and signatures -------------------------------------------------------------


async def test_the_ack_does_not_wait_for_slow_work_after_it(edge: SlackEdge) -> None:
    # Given a broker that takes its time to accept the wake-up
    edge.enqueued.hold()
    # When a mention arrives
    started = time.monotonic()
    response = await edge.post_event(event(TOP))
    elapsed_s = time.monotonic() - started
    # Then Slack has its ack at once; the input is recorded and the wake-up follows
    assert response.status_code == 200
    assert elapsed_s < 1.0
    await edge.slack_api.wait_for(lambda: edge.enqueued.waiting == 1)
    assert await edge.session(ROOT_TS) is not None
    assert edge.enqueued.calls == []
    edge.enqueued.release()
    await edge.settle()
    assert len(edge.enqueued.calls) == 1


@pytest.mark.parametrize(
    ("secret", "age_s"),
    [("not-the-secret", 0), (SIGNING_SECRET, 6 * 60)],
    ids=["wrong secret", "stale timestamp"],
)
async def test_a_wrong_or_stale_signature_is_refused_with_401_and_nothing_is_recorded(
    edge: SlackEdge, secret: str, age_s: int
) -> None:
    body = event(TOP)

    response = await edge.post_event(body, secret=secret, timestamp=int(time.time()) - age_s)
    await edge.settle()

    assert response.status_code == 401
    assert await edge.session(ROOT_TS) is None
    assert edge.enqueued.calls == []
    assert await edge.dedupe.first_sighting(f"event:{org_id_of(body)}:{body['event_id']}")


async def test_slacks_recorded_retry_request_is_signed_as_we_sign_and_refused_as_stale(
    edge: SlackEdge,
) -> None:
    recorded = load_case("event_retry_request_headers.json")
    raw = (DATA / recorded["body_file"]).read_bytes()
    headers = recorded["headers"]
    timestamp = int(headers["X-Slack-Request-Timestamp"])
    assert sign(raw, timestamp=timestamp) == headers["X-Slack-Signature"]

    response = await edge.post_raw(raw, "application/json", SIGNING_SECRET, timestamp, None)

    assert response.status_code == 401
    assert await edge.session(ROOT_TS) is None


# ----- concurrency on both backends ----------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite; the run's PostgreSQL URL (resolved here, outside the event loop)."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


async def test_two_near_simultaneous_mentions_in_one_thread_make_one_session(
    tmp_path: Path, database_url: str | None
) -> None:
    async with running_edge(tmp_path, database_url=database_url) as edge:
        root = edge.slack_api.add_message(CHANNEL, "checkout is down", user="U0FAKEALICE")
        first = event("event_app_mention_in_thread.json", thread_ts=root, ts="1767300000.000001")
        second = event(
            "event_app_mention_in_thread.json",
            thread_ts=root,
            ts="1767300000.000002",
            user="U0FAKEALICE",
            text="<@U0FAKEBOT> and the payment queue",
        )

        responses = await asyncio.gather(edge.post_event(first), edge.post_event(second))
        await edge.settle()

        assert [r.status_code for r in responses] == [200, 200]
        session = await edge.session(root)
        assert session is not None
        texts = await edge.inbox_texts(session.id)
        assert "and the payment queue" in texts
        assert "also check the db connection pool, <@U0FAKEALICE> saw timeouts" in texts
        assert {sid for sid, _ in edge.enqueued.calls} == {session.id}
        assert len(edge.enqueued.calls) == 1


async def test_an_input_that_finds_the_database_locked_is_recorded_before_the_ack(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_edge(tmp_path, limits=Limits(lock_timeout_ms=100)) as edge:
        # Given another process holds the SQLite write lock for a moment
        blocker = sqlite3.connect(tmp_path / "warroom.sqlite3", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")

        async def free_once_retrying() -> None:
            await edge.slack_api.wait_for(lambda: "retrying" in caplog.text)
            blocker.execute("ROLLBACK")

        # When a mention arrives and its record finds the database locked
        freeing = asyncio.create_task(free_once_retrying())
        try:
            response = await edge.post_event(event(TOP))
            await freeing
        finally:
            blocker.close()
        # Then the record is retried within the ack budget, and only then acked
        assert response.status_code == 200
        session = await edge.session(ROOT_TS)
        assert session is not None
        await edge.settle()
        assert edge.enqueued.calls == [(session.id, session.pending_token)]


async def test_an_input_the_database_cannot_record_is_not_acked_and_slacks_retry_lands(
    tmp_path: Path,
) -> None:
    async with running_edge(tmp_path, limits=Limits(lock_timeout_ms=100)) as edge:
        body = event(TOP)
        # Given the database stays locked for longer than the ack budget
        blocker = sqlite3.connect(tmp_path / "warroom.sqlite3", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            response = await edge.post_event(body)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        # Then Slack gets no ack (so it retries) and nothing half-recorded blocks the retry
        assert response.status_code != 200
        assert await edge.session(ROOT_TS) is None
        retry = await edge.post_event(body)
        await edge.settle()
        assert retry.status_code == 200
        session = await edge.session(ROOT_TS)
        assert session is not None
        assert edge.enqueued.calls == [(session.id, session.pending_token)]
