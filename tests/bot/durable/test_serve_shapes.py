"""``warroom serve`` in HTTP mode with its workers, in both shapes, driven by signed events.

*Embedded*: one ``serve`` process, SQLite, its worker threads in-process (no ``REDIS_URL``).
*Scaled out*: ``serve`` over PostgreSQL and Redis, and a separate worker process
(``running_cluster``). The fake Slack and the fake model are served from this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.bot.cli.test_app import wait_until_up
from tests.bot.cli_support import finish, start, warroom_env
from tests.bot.durable.test_workers import WORKER_SETTINGS
from tests.bot.durable_support import Cluster, Fakes, destroy_sandboxes, poll, running_cluster
from tests.bot.slack_edge import SIGNING_SECRET, event, sign
from tests.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.bwrap]

CHANNEL = "C0FAKEINC"
TOP = "event_app_mention_top_level.json"
REPLY = "event_message_thread_reply_no_mention.json"
REPLY_TEXT = "rollback of v1.3 finished at 09:20, latency still high"


@pytest.fixture(scope="module")
def cluster(redis_url: str) -> Iterator[Cluster]:
    """A fresh PostgreSQL database, the fakes and one worker process."""
    with running_cluster(
        redis_url, name="warroom_shapes", workers=1, settings=WORKER_SETTINGS
    ) as made:
        yield made


@contextlib.asynccontextmanager
async def serving(env: Mapping[str, str], cwd: Path) -> AsyncIterator[str]:
    """``warroom serve`` in HTTP mode with ``env``; yields its Events API URL."""
    port = free_port()
    settings = {
        "WARROOM_SLACK_MODE": "http",
        "SLACK_HTTP_PORT": str(port),
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
    }
    serve = await start("serve", env={**env, **settings}, cwd=cwd)
    try:
        await wait_until_up(f"http://127.0.0.1:{port}/healthz")
        yield f"http://127.0.0.1:{port}/slack/events"
    finally:
        serve.send_signal(signal.SIGTERM)
        await finish(serve)
        assert serve.stderr is not None
        print((await serve.stderr.read()).decode()[-6000:])


async def post_event(url: str, body: Mapping[str, Any]) -> None:
    """POST ``body`` signed, as Slack does; the app must ack it."""
    raw = json.dumps(body).encode()
    ts = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": sign(raw, timestamp=ts),
    }
    async with httpx.AsyncClient(timeout=10.0) as http:
        assert (await http.post(url, content=raw, headers=headers)).status_code == 200


def in_slack(fakes: Fakes, *bodies: Mapping[str, Any]) -> None:
    """Store the events' messages in the fake Slack, as Slack holds them once posted."""
    for body in bodies:
        message = dict(body["event"])
        for name in ("channel", "event_ts", "channel_type"):
            message.pop(name, None)
        message["type"] = "message"
        fakes.slack.state.messages.setdefault(CHANNEL, []).append(message)


async def reply_then_mention(url: str, fakes: Fakes, session_marker: str) -> str:
    """Deliver a thread's reply, then the mention that opens the thread's session (the
    mention's retry after an outage); returns the first model request's user text."""
    # Given a mention (carrying the model script's marker) and a reply under it, in Slack
    text = f"<@U0FAKEBOT> [session:{session_marker}] payments-api p99 is 4s, investigate"
    mention, reply = event(TOP, text=text), event(REPLY)
    in_slack(fakes, mention, reply)
    # When Slack delivers the reply first, then the mention
    await post_event(url, reply)
    await post_event(url, mention)

    # Then the session's first model call reads the reply
    async def first_request() -> str | None:
        made = fakes.script.requests_for(session_marker)
        return json.dumps(made[0].messages) if made else None

    return await poll(first_request, timeout_s=60, what="the session's first model call")


async def test_embedded_serve_gives_a_reply_delivered_before_its_mention_to_the_session() -> None:
    fakes = Fakes.start()
    data_dir = Path(tempfile.mkdtemp(prefix="wr-s-"))
    env = warroom_env(
        data_dir,
        SLACK_BOT_TOKEN=fakes.slack.token,
        SLACK_API_URL=fakes.slack.base_url,
        ANTHROPIC_API_KEY="sk-ant-test",
        ANTHROPIC_BASE_URL=fakes.model.base_url,
    )
    try:
        async with serving(env, data_dir) as url:
            first = await reply_then_mention(url, fakes, "early-embedded")
        assert REPLY_TEXT in first
    finally:
        fakes.stop()
        await asyncio.to_thread(destroy_sandboxes, data_dir / "sbx")
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.mark.postgres
@pytest.mark.redis
async def test_scaled_out_serve_gives_a_reply_delivered_before_its_mention_to_the_session(
    cluster: Cluster,
) -> None:
    cluster.pool.wait_ready(count=1)
    env = warroom_env(
        cluster.data_dir,
        DATABASE_URL=cluster.database_url,
        REDIS_URL=cluster.redis_url,
        SLACK_BOT_TOKEN=cluster.fakes.slack.token,
        SLACK_API_URL=cluster.fakes.slack.base_url,
        ANTHROPIC_API_KEY="sk-ant-test",
        ANTHROPIC_BASE_URL=cluster.fakes.model.base_url,
    )
    async with serving(env, cluster.data_dir) as url:
        first = await reply_then_mention(url, cluster.fakes, "early-scaled")
    assert REPLY_TEXT in first
