"""What reaches a session from real Slack payloads: alerts, forwards, files, edits, deletions,
Slack Connect users, and an event whose record failed.

Signed Events API requests go to the real bolt app over HTTP (``running_edge``).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from sqlalchemy import text

from bot.slack.routing import EDITED_PREFIX, EXTERNAL_PREFIX
from bot.slack.thread_context import HEADER
from memory_store import Limits
from tests import pg_admin
from tests.bot.conftest import load_case
from tests.bot.slack_edge import CHANNEL, SlackEdge, event, running_edge
from tests.conftest import PG_ADMIN_URL, require_service

TOP = "event_app_mention_top_level.json"
REPLY = "event_message_thread_reply_no_mention.json"
ROOT_TS = "1767225600.000100"


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[SlackEdge]:
    async with running_edge(tmp_path) as running:
        yield running


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """Each backend's URL (None: the embedded SQLite), a fresh PostgreSQL database for each
    test (the threads' keys repeat from test to test)."""
    if request.param == "sqlite":
        yield None
        return
    require_service("PostgreSQL", PG_ADMIN_URL)
    with pg_admin.throwaway_database(PG_ADMIN_URL) as url:
        yield urlunsplit(urlsplit(url)._replace(scheme="postgresql+asyncpg"))


@pytest.fixture
async def either_edge(tmp_path: Path, database_url: str | None) -> AsyncIterator[SlackEdge]:
    """The edge over each backend (PostgreSQL records a new thread in one statement)."""
    async with running_edge(tmp_path, database_url=database_url) as running:
        yield running


async def start_session(edge: SlackEdge) -> str:
    assert (await edge.post_event(event(TOP))).status_code == 200
    await edge.settle()
    session = await edge.session(ROOT_TS)
    assert session is not None
    return session.id


def redelivered(body: dict[str, object]) -> dict[str, object]:
    """The same delivery again (Slack's retry keeps the ``event_id``)."""
    return copy.deepcopy(body)


# ----- alert content (issue #19, item 3) ---------------------------------------------


async def test_a_new_session_sees_the_app_alerts_above_it_as_people_see_them(
    edge: SlackEdge,
) -> None:
    # Given a thread opened by a GitHub notification (attachments only, empty text) and a
    # Datadog alert (Block Kit header, section fields and context)
    recorded = load_case("webapi_conversations_replies_app_alerts.json")["messages"]
    edge.slack_api.state.messages[CHANNEL] = copy.deepcopy(recorded)
    # When someone mentions the bot in that thread
    body = event("event_app_mention_in_thread.json", ts="1767225700.000700")
    assert (await edge.post_event(body)).status_code == 200
    await edge.settle()
    # Then the session's context carries what the alerts say, not just "bot GitHub: "
    session = await edge.session(ROOT_TS)
    assert session is not None
    context = (await edge.inbox_texts(session.id))[1]
    assert context.startswith(HEADER)
    for seen in (
        "bot GitHub: [acme/payments] Pull request merged by carol",
        "#812 Lower DB pool to 10",
        "Reduces `DB_POOL_SIZE` from 50 to 10",
        "Deployed: v1.4 at 09:05 UTC",
        "p99 is *4.1 s* on `payments-api`",
        "*Env:* prod-eu",
        "Monitor #4410 · view (https://app.datadoghq.example/monitors/4410)",
    ):
        assert seen in context


async def test_a_forwarded_message_steers_with_its_comment_and_the_shared_text(
    edge: SlackEdge,
) -> None:
    session_id = await start_session(edge)

    assert (await edge.post_event(event("event_message_forwarded_share.json"))).status_code == 200
    await edge.settle()

    steered = (await edge.inbox_texts(session_id))[-1]
    assert steered.startswith("this is what the vendor said")
    assert "[forwarded message from Vendor Ops in #vendor-status]" in steered
    assert "we are failing over the EU database at 09:10 UTC" in steered


async def test_a_forward_without_comment_is_not_ignored(edge: SlackEdge) -> None:
    session_id = await start_session(edge)
    body = event("event_message_forwarded_share.json", text="", blocks=None)

    await edge.post_event(body)
    await edge.settle()

    steered = (await edge.inbox_texts(session_id))[-1]
    assert steered.startswith("[forwarded message from Vendor Ops")


async def test_a_file_upload_steers_with_the_files_name_type_and_size(edge: SlackEdge) -> None:
    session_id = await start_session(edge)

    assert (await edge.post_event(event("event_message_file_share.json"))).status_code == 200
    await edge.settle()

    steered = (await edge.inbox_texts(session_id))[-1]
    assert steered.startswith("pods log from the canary")
    assert "[file: canary-pods.log (text, 96 B)]" in steered


# ----- edits and deletions (items 4, 9) ----------------------------------------------


async def test_deleting_the_sessions_first_message_does_not_wake_it(edge: SlackEdge) -> None:
    session_id = await start_session(edge)

    response = await edge.post_event(event("event_message_changed_tombstone.json"))
    await edge.settle()

    assert response.status_code == 200
    assert len(await edge.inbox_texts(session_id)) == 1
    assert len(edge.enqueued.calls) == 1


@pytest.mark.parametrize("strict", [True, False], ids=["strict channel", "open channel"])
async def test_a_reply_edited_to_add_the_mention_reaches_the_session_once(
    tmp_path: Path, strict: bool
) -> None:
    strict_channels = frozenset({CHANNEL}) if strict else frozenset()
    async with running_edge(tmp_path, strict_channels=strict_channels) as edge:
        session_id = await start_session(edge)
        # When a reply is edited to add the mention: Slack sends both events of the edit
        for case in (
            "event_message_changed_mention_added.json",
            "event_app_mention_edited_to_add_mention.json",
        ):
            assert (await edge.post_event(event(case))).status_code == 200
        await edge.settle()
        # Then the session gets the edited text once
        assert (await edge.inbox_texts(session_id))[1:] == [
            EDITED_PREFIX + "rollback of v1.3 finished at 09:25, latency still high"
        ]


# ----- Slack Connect (item 8) --------------------------------------------------------


async def test_an_external_slack_connect_user_starts_no_session_by_default(
    edge: SlackEdge,
) -> None:
    body = event("event_app_mention_enterprise_shared_channel.json", thread_ts=None)

    assert (await edge.post_event(body)).status_code == 200
    await edge.settle()

    assert await edge.session("1767225800.000800", org="E0FAKEORG") is None
    assert edge.enqueued.calls == []


async def test_external_users_may_start_sessions_when_the_setting_allows_it(
    tmp_path: Path,
) -> None:
    async with running_edge(tmp_path, external_may_start=True) as edge:
        body = event("event_app_mention_enterprise_shared_channel.json", thread_ts=None)

        await edge.post_event(body)
        await edge.settle()

        assert await edge.session("1767225800.000800", org="E0FAKEORG") is not None


async def test_an_external_users_reply_is_shown_to_the_model_as_from_an_external_user(
    edge: SlackEdge,
) -> None:
    # Given a session started by a member in a channel shared with a vendor's org
    body = event(TOP)
    body["is_ext_shared_channel"] = True
    body["authorizations"][0]["enterprise_id"] = "E0FAKEORG"
    assert (await edge.post_event(body)).status_code == 200
    await edge.settle()
    # When the vendor's engineer mentions the bot in the thread
    await edge.post_event(event("event_app_mention_enterprise_shared_channel.json"))
    await edge.settle()
    # Then the reply steers the session and says it comes from outside the org
    session = await edge.session(ROOT_TS, org="E0FAKEORG")
    assert session is not None
    texts = await edge.inbox_texts(session.id)
    assert texts[1:] == [EXTERNAL_PREFIX + "vendor side sees 502s too"]


# ----- an event whose record failed (item 2) -----------------------------------------


@pytest.mark.postgres
async def test_an_event_whose_record_failed_after_its_dedupe_check_lands_on_slacks_retry(
    tmp_path: Path, postgres_url: str
) -> None:
    limits = Limits(lock_timeout_ms=100)
    async with running_edge(tmp_path, database_url=postgres_url, limits=limits) as edge:
        body = event(TOP, ts="1767400000.000001")
        # Given sessions cannot be written (another transaction holds a SHARE lock on the
        # table past the ack budget) while everything else can
        async with edge.database.engine.connect() as blocker:
            await blocker.execute(text("LOCK TABLE sessions IN SHARE MODE"))
            first = await edge.post_event(body)
            await blocker.rollback()
        # When Slack retries the unacked event
        retry = await edge.post_event(
            redelivered(body),
            headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"},
        )
        await edge.settle()
        # Then the retry is recorded and wakes the session: nothing marked it seen
        assert first.status_code != 200
        assert retry.status_code == 200
        session = await edge.session("1767400000.000001")
        assert session is not None
        assert edge.enqueued.calls == [(session.id, session.pending_token)]


LOG = b"pod/api-7d9 CrashLoopBackOff\nOOMKilled: memory limit 256Mi\n"


async def test_a_shared_text_files_content_reaches_the_session_and_an_image_only_by_name(
    edge: SlackEdge,
) -> None:
    session_id = await start_session(edge)
    log = edge.slack_api.add_file("canary-pods.log", LOG)
    image = edge.slack_api.add_file("graph.png", b"\x89PNG", filetype="png", mimetype="image/png")
    body = event("event_message_file_share.json", files=[log, image])

    assert (await edge.post_event(body)).status_code == 200
    await edge.settle()

    text, contents = (await edge.inbox_texts(session_id))[1:]
    assert "[file: graph.png (png, 4 B)]" in text
    assert contents.startswith(f"Contents of [file: canary-pods.log (text, {len(LOG)} B)]:")
    assert "OOMKilled: memory limit 256Mi" in contents
    assert "PNG" not in contents


async def test_a_new_session_reads_the_text_files_shared_above_it(edge: SlackEdge) -> None:
    api = edge.slack_api
    root = api.add_message(CHANNEL, "canary is crashlooping", user="U0FAKEALICE")
    api.state.messages[CHANNEL].append(
        {
            "type": "message",
            "subtype": "file_share",
            "user": "U0FAKEBOB",
            "text": "here are the pods",
            "ts": "1767225602.500000",
            "thread_ts": root,
            "files": [api.add_file("canary-pods.log", LOG)],
        }
    )
    mention_ts = api.add_message(CHANNEL, "<@U0FAKEBOT> why?", thread_ts=root)

    body = event("event_app_mention_in_thread.json", ts=mention_ts, thread_ts=root)
    await edge.post_event(body)
    await edge.settle()

    session = await edge.session(root)
    assert session is not None
    context = (await edge.inbox_texts(session.id))[1]
    assert "here are the pods" in context
    assert "OOMKilled: memory limit 256Mi" in context


# ----- a reply delivered before its thread's mention (issue #32, item 3) ---------------


def _in_slack(edge: SlackEdge, *bodies: dict[str, object]) -> None:
    """Store the events' messages in the fake Slack, as Slack holds them once posted."""
    for body in bodies:
        message = dict(body["event"])  # type: ignore[call-overload]
        for field in ("channel", "event_ts", "channel_type"):
            message.pop(field, None)
        message["type"] = "message"
        edge.slack_api.state.messages.setdefault(CHANNEL, []).append(message)


async def test_a_reply_delivered_before_its_threads_mention_is_in_the_sessions_first_input(
    either_edge: SlackEdge,
) -> None:
    edge = either_edge
    # Given a top-level mention and a teammate's reply under it, both posted in Slack
    mention, reply = event(TOP), event(REPLY)
    _in_slack(edge, mention, reply)
    # When Slack delivers the reply first (acked: no session yet), then the mention
    assert (await edge.post_event(reply)).status_code == 200
    await edge.settle()
    assert await edge.session(ROOT_TS) is None
    assert (await edge.post_event(mention)).status_code == 200
    await edge.settle()
    # Then the session opened by the mention holds the reply before its first wake-up
    session = await edge.session(ROOT_TS)
    assert session is not None
    assert await edge.inbox_texts(session.id) == [
        "payments-api p99 is 4s since 09:00, can you investigate?",
        "rollback of v1.3 finished at 09:20, latency still high",
    ]
    assert edge.enqueued.inbox_sizes == [2]
    # And the reply's event redelivered by Slack is not recorded a second time
    assert (await edge.post_event(redelivered(reply))).status_code == 200
    await edge.settle()
    assert len(await edge.inbox_texts(session.id)) == 2


async def test_a_top_level_mention_with_no_early_reply_does_not_read_its_thread(
    either_edge: SlackEdge,
) -> None:
    edge = either_edge
    mention = event(TOP)
    _in_slack(edge, mention)

    assert (await edge.post_event(mention)).status_code == 200
    await edge.settle()

    assert edge.slack_api.calls_to("conversations.replies") == []
    assert edge.enqueued.inbox_sizes == [1]


async def test_a_reply_and_its_mention_delivered_at_the_same_moment_both_reach_the_session(
    edge: SlackEdge,
) -> None:
    # Given five threads, each a mention with a reply under it, both posted in Slack
    pairs = []
    for n in range(5):
        root = f"17672256{n:02d}.000100"
        mention = event(TOP, ts=root, text=f"<@U0FAKEBOT> incident {n}")
        reply = event(REPLY, ts=f"17672256{n:02d}.000300", thread_ts=root, text=f"reply {n}")
        _in_slack(edge, mention, reply)
        pairs.append((root, mention, reply))
    # When each thread's reply and mention arrive at once
    await asyncio.gather(
        *(edge.post_event(body) for _, mention, reply in pairs for body in (reply, mention))
    )
    await edge.settle()
    # Then every session holds its request and its reply, once each
    for n, (root, _, _) in enumerate(pairs):
        session = await edge.session(root)
        assert session is not None
        texts = await edge.inbox_texts(session.id)
        assert sorted(texts) == sorted([f"incident {n}", f"reply {n}"])
