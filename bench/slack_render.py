"""Benchmark of the Slack edge's building blocks: rendering and idempotent posting.

Run: ``.venv/bin/python bench/slack_render.py``. Prints one JSON line:
    answer_40k_chars_ms        render a 40,000-char Markdown answer (median)
    split_1mb_code_ms          split a 1 MB fenced code block into 12,000-char messages
    status_2000_todos_ms       render a status message with 2,000 todo items (capped at 50 blocks)
    post_ms_p50                idempotent post (intent, chat.postMessage, ts) with the real outbox
                               on SQLite and the local fake Slack Web API
    recover_ms_p50             the same post after a crash, found by metadata (200-message thread)
    status_updates_for_100     chat.update calls made for a burst of 100 status states (coalesced)

No goal is set for these figures yet: ``goal`` is empty, ``met`` null (``bench/goals.py``).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from goals import verdict  # bench/ is on the path when run as a script
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.poster import SlackPoster, Thread
from bot.slack.render import (
    InlineAnswer,
    Progress,
    notice,
    render_answer,
    render_status,
    split_markdown,
)
from harness import Todo, TodoStatus
from memory_store import Database, Outbox, SessionKey, SessionStore
from tests.fakes.slack_api import FakeSlackApi

PARAGRAPH = "The checkout pods restarted at 14:02 after the deploy of v1.4; " * 20


def median_ms(work: Callable[[], object], repeats: int = 20) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 3)


async def posting_figures() -> dict[str, float]:
    fake = FakeSlackApi(rate_limits=False)  # measures our rendering, not Slack's limits
    await fake.start()
    with tempfile.TemporaryDirectory() as data_dir:
        db = Database.from_url(None, data_dir=Path(data_dir))
        await db.migrate()
        try:
            return await _post_and_recover(fake, db)
        finally:
            await db.dispose()
            await fake.stop()


async def _post_and_recover(fake: FakeSlackApi, db: Database) -> dict[str, float]:
    client = AsyncWebClient(token=fake.token, base_url=fake.base_url)
    outbox = Outbox(db)
    thread_ts = fake.add_message("C1", "help")
    opened = await SessionStore(db).open_or_join(
        SessionKey("T1", "C1", thread_ts),
        requester_id="U1",
        initial_checkpoint="{}",
        text="help",
        source_ts=thread_ts,
    )
    thread = Thread(opened.session_id, "C1", thread_ts)
    poster = SlackPoster(client, outbox, min_update_interval_s=0.2)
    post_ms = []
    for seq in range(200):
        start = time.perf_counter()
        await poster.post(thread, f"{thread.session_id}:{seq}", notice(f"step {seq}"))
        post_ms.append((time.perf_counter() - start) * 1000)
    recover_ms = []
    for seq in range(1000, 1020):
        key = f"{thread.session_id}:{seq}"
        await outbox.post_intent(
            thread.session_id,
            key,
            channel_id="C1",
            thread_ts=thread_ts,
            kind="x",
            payload_json="{}",
        )
        metadata = {"event_type": "warroom_post", "event_payload": {"key": key}}
        await client.chat_postMessage(
            channel="C1", thread_ts=thread_ts, text="x", metadata=metadata
        )
        start = time.perf_counter()
        await poster.post(thread, key, notice("x"))
        recover_ms.append((time.perf_counter() - start) * 1000)
    status_ts = await poster.post(thread, f"{thread.session_id}:status", notice("status"))
    before = len(fake.calls_to("chat.update"))
    for i in range(100):
        await poster.update_status("C1", status_ts, notice(f"state {i}"), final=i == 99)
    return {
        "post_ms_p50": round(statistics.median(post_ms), 2),
        "recover_ms_p50": round(statistics.median(recover_ms), 2),
        "status_updates_for_100": len(fake.calls_to("chat.update")) - before,
    }


def main() -> None:
    answer_40k = "\n\n".join(f"{i}. {PARAGRAPH}" for i in range(30))[:40_000]
    code_1mb = (
        "```\n"
        + "\n".join(f"{i} GET /checkout 500 upstream timeout" for i in range(28_000))
        + "\n```"
    )
    todos = tuple(Todo(f"check shard {i} " * 10, TodoStatus.PENDING, "") for i in range(2_000))
    rendered = render_answer(answer_40k)
    figures = {
        "answer_40k_chars_ms": median_ms(lambda: render_answer(answer_40k)),
        "answer_40k_messages": len(rendered.messages) if isinstance(rendered, InlineAnswer) else 0,
        "split_1mb_code_ms": median_ms(lambda: split_markdown(code_1mb, 12_000), repeats=5),
        "split_1mb_code_chunks": len(split_markdown(code_1mb, 12_000)),
        "status_2000_todos_ms": median_ms(lambda: render_status(Progress("s", "step", todos))),
        "status_2000_todos_blocks": len(render_status(Progress("s", "step", todos)).blocks),
    }
    figures.update(asyncio.run(posting_figures()))
    print(json.dumps(figures | verdict(figures, {})))  # no goal set yet: met is null


if __name__ == "__main__":
    main()
