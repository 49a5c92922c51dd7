"""The peer of ``bench/slack_ack.py``: bare slack-bolt plus raw asyncpg, the same writes.

A bolt ``AsyncApp`` (HTTP mode, ``process_before_response=True``, the same signing
check) whose message listeners do, before the ack, what Warroom records for a new
input: the ``event_id`` sighting, the ``<channel>:<ts>`` sighting and the input row
— three ``INSERT … ON CONFLICT DO NOTHING`` statements on an asyncpg pool (each its
own implicit transaction, one round trip). No ORM, no routing, no follow-up work: the
floor a recording Slack edge on the same database can reach.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.modes import HttpMode, start

SCHEMA = """
CREATE TABLE IF NOT EXISTS peer_sightings (
    key text PRIMARY KEY, seen_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS peer_inputs (
    channel_id text NOT NULL, thread_ts text NOT NULL, ts text NOT NULL,
    user_id text NOT NULL, text text NOT NULL, created_at timestamptz NOT NULL,
    PRIMARY KEY (channel_id, thread_ts, ts));
"""
SIGHT = (
    "INSERT INTO peer_sightings (key, seen_at, expires_at) VALUES ($1, $2, $3) "
    "ON CONFLICT (key) DO NOTHING"
)
RECORD = (
    "INSERT INTO peer_inputs (channel_id, thread_ts, ts, user_id, text, created_at) "
    "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING"
)


async def serve_peer(database_url: str, *, signing_secret: str, token: str, base_url: str) -> None:
    """Serve the peer until stdin closes; print the port first, then 0 (no wake-ups)."""
    pool = await asyncpg.create_pool(database_url.replace("+asyncpg", ""), min_size=2, max_size=10)
    await pool.execute(SCHEMA)
    app = AsyncApp(
        client=AsyncWebClient(token=token, base_url=base_url),
        signing_secret=signing_secret,
        process_before_response=True,
        name="peer",
    )

    async def on_message(ack: AsyncAck, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        now = datetime.now(UTC)
        expires = now + timedelta(hours=1)
        ts, channel = str(event.get("ts")), str(event.get("channel"))
        await pool.execute(SIGHT, f"event:{body.get('event_id')}", now, expires)
        await pool.execute(SIGHT, f"ts:{channel}:{ts}", now, expires)
        thread = str(event.get("thread_ts") or ts)
        await pool.execute(
            RECORD, channel, thread, ts, str(event.get("user")), str(event.get("text")), now
        )
        await ack()

    app.event("app_mention")(on_message)
    app.event("message")(on_message)
    running = await start(app, HttpMode(host="127.0.0.1", port=0))
    print(running.port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await running.close()
    print(0, flush=True)
    await pool.close()
