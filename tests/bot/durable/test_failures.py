"""A session the sweeper gave up: its failure is told once per failure (issue #32, item 5).

Real SQLite store and outbox, the real ``SlackPoster`` of two workers, the fake Slack API.
"""

from __future__ import annotations

import asyncio

from slack_sdk.web.async_client import AsyncWebClient

from bot.durable.failures import tell_failed
from bot.fakes.slack_api import FakeSlackApi
from bot.slack.poster import SlackPoster
from harness import Checkpoint, Requester
from memory_store import Database, Outbox, SessionKey, SessionStatus, SessionStore
from tests.memory_store.session_support import ManualClock

CHANNEL = "C0FAKEINC"


async def _crash_looped(
    store: SessionStore, clock: ManualClock, session_id: str, token: str
) -> None:
    """Claim ``token`` and let its lease run out; the sweep fails the session."""
    assert await store.claim(session_id, token, worker_id="w:1:dead", lease_s=5) is not None
    clock.advance(10)
    result = await store.sweep(max_crashes=1, stale_after_s=30)
    assert result.failed == (session_id,)


async def _open(store: SessionStore, slack_api: FakeSlackApi) -> tuple[str, str]:
    thread_ts = slack_api.add_message(CHANNEL, "<@U0FAKEBOT> checkout is returning 500s")
    checkpoint = Checkpoint("s-failed", "T0FAKETEAM", CHANNEL, Requester("U0FAKEALICE"))
    opened = await store.open_or_join(
        SessionKey("T0FAKETEAM", CHANNEL, thread_ts),
        requester_id="U0FAKEALICE",
        initial_checkpoint=checkpoint.to_json(),
        text="checkout is returning 500s",
        source_ts=thread_ts,
        session_id="s-failed",
    )
    assert opened.token is not None
    return opened.session_id, opened.token


def _notices(slack_api: FakeSlackApi) -> list[str]:
    posts = slack_api.calls_to("chat.postMessage")
    return [c.args["text"] for c in posts if "investigation failed" in c.args.get("text", "")]


async def _nothing(session_id: str, token: str) -> None:
    raise AssertionError("a top-level session's failure enqueues nothing")


async def test_two_sweeps_telling_one_failure_post_it_once(
    database: Database, slack_api: FakeSlackApi
) -> None:
    clock = ManualClock()
    store = SessionStore(database, clock=clock)
    client = AsyncWebClient(token=slack_api.token, base_url=slack_api.base_url)
    workers = [SlackPoster(client, Outbox(database)) for _ in range(2)]
    session_id, token = await _open(store, slack_api)
    await _crash_looped(store, clock, session_id, token)

    # When two workers' sweeps tell the failure at once
    await asyncio.gather(*(tell_failed(store, w, _nothing, session_id, crashes=1) for w in workers))
    # And a third tells it again later
    await tell_failed(store, workers[0], _nothing, session_id, crashes=1)

    # Then the thread has one failure notice
    assert len(_notices(slack_api)) == 1


async def test_a_session_revived_and_failed_again_is_told_again(
    database: Database, slack_api: FakeSlackApi
) -> None:
    clock = ManualClock()
    store = SessionStore(database, clock=clock)
    poster = SlackPoster(
        AsyncWebClient(token=slack_api.token, base_url=slack_api.base_url), Outbox(database)
    )
    session_id, token = await _open(store, slack_api)
    await _crash_looped(store, clock, session_id, token)
    await tell_failed(store, poster, _nothing, session_id, crashes=1)
    # Given a reply that revives the failed session, whose step crash-loops again
    revived = await store.add_input(session_id, user_id="U0FAKEBOB", text="retry", source_ts="9.9")
    assert revived is not None
    await _crash_looped(store, clock, session_id, revived)
    session = await store.get(session_id)
    assert session is not None
    assert session.status is SessionStatus.FAILED

    await tell_failed(store, poster, _nothing, session_id, crashes=1)

    assert len(_notices(slack_api)) == 2
