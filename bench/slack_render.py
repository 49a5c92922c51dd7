"""Benchmark of the Slack edge's building blocks: rendering and idempotent posting.

Run: ``.venv/bin/python bench/slack_render.py``. Prints one JSON line:
    answer_40k_chars_ms        render a 40,000-char Markdown answer (median)
    split_1mb_code_ms          split a 1 MB fenced code block into 12,000-char messages
    status_2000_todos_ms       render a status message with 2,000 todo items (capped at 50 blocks)
    post_ms_p50                idempotent post (intent, chat.postMessage, ts) with the real outbox
                               on SQLite and the local fake Slack Web API
    recover_ms_p50             the same post after a crash, found by metadata (200-message thread)
    status_updates_for_100     chat.update calls made for a burst of 100 status states (coalesced)
    calls_per_model_step       Slack Web API calls a model step's progress costs on the agent
                               surface (streamed steps, issue #28), after the turn's first step
    calls_per_tool_step        the same for a tool step
    chat_update_per_step       ``chat.update`` calls per step on the agent surface
    calls_first_step           the turn's first step (agent session + stream, or status post)
    calls_answer               posting the answer (with the session's move to ``active``)
    status_path                the same five figures on today's status-message path

Each step's progress is sent before the next (steps take seconds; the status message's
one-update-a-second spacing then coalesces nothing). Goals: the agent surface makes no
more calls per step than the status message, and none of them ``chat.update``.
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

from bot.slack.agent_surface import AgentSurface
from bot.slack.poster import SlackPoster, Thread
from bot.slack.progress import ThreadReporter
from bot.slack.render import (
    InlineAnswer,
    Progress,
    notice,
    render_answer,
    render_status,
    split_markdown,
)
from harness import (
    Checkpoint,
    Event,
    Inbound,
    Message,
    ModelResponded,
    Requester,
    TextBlock,
    Todo,
    TodoStatus,
    ToolFinished,
    ToolIntent,
    Usage,
)
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


STEP_PAIRS = 20
"""Model steps (each asking for one command) and tool steps (each running it) in the turn."""


def _model_step(i: int) -> tuple[Event, ...]:
    said = f"Checking shard {i}."
    return (ModelResponded("tool_use", said, ("Bash",), Usage(input_tokens=1), 1),)


def _tool_step(i: int) -> tuple[Event, ...]:
    command = f"kubectl -n shard-{i} get pods"
    return (
        ToolIntent(tool_use_id=f"tu{i}", name="Bash", summary=command),
        ToolFinished(f"tu{i}", "Bash", command, False, 20, "3 pods Running", "", 900),
    )


async def step_call_figures(*, streaming: bool) -> dict[str, float]:
    """Web API calls per step of one turn through ``ThreadReporter``, on the agent
    surface (``streaming``) or the status message."""
    fake = FakeSlackApi(rate_limits=False)
    await fake.start()
    with tempfile.TemporaryDirectory() as data_dir:
        db = Database.from_url(None, data_dir=Path(data_dir))
        await db.migrate()
        try:
            return await _turn_calls(fake, db, streaming=streaming)
        finally:
            await db.dispose()
            await fake.stop()


async def _turn_calls(fake: FakeSlackApi, db: Database, *, streaming: bool) -> dict[str, float]:
    client = AsyncWebClient(token=fake.token, base_url=fake.base_url)
    thread_ts = fake.add_message("C1", "<@U0FAKEBOT> checkout is down")
    opened = await SessionStore(db).open_or_join(
        SessionKey("T1", "C1", thread_ts),
        requester_id="U1",
        initial_checkpoint="{}",
        text="checkout is down",
        source_ts=thread_ts,
    )
    thread = Thread(opened.session_id, "C1", thread_ts)
    poster = SlackPoster(client, Outbox(db), min_update_interval_s=0.0)
    surface = AgentSurface(poster, team_id="T1", enabled=streaming)
    reporter = ThreadReporter(poster, surface=surface)
    cp = Checkpoint(
        thread.session_id,
        "T1",
        "C1",
        Requester("U1"),
        messages=(Message("user", (TextBlock("checkout is down"),)),),
        pending_input=(Inbound("U1", "go on"),),
        turns=1,
    )

    async def show(events: tuple[Event, ...]) -> int:
        before = len(fake.calls)
        await reporter.show_progress(
            session_id=thread.session_id,
            channel_id="C1",
            thread_ts=thread_ts,
            checkpoint=cp,
            events=events,
        )
        await surface.drain(timeout_s=30)
        await reporter.board.drain(timeout_s=30)
        return len(fake.calls) - before

    first = await show(_model_step(0))
    model_calls, tool_calls = [], []
    for i in range(STEP_PAIRS):
        tool_calls.append(await show(_tool_step(i)))
        model_calls.append(await show(_model_step(i + 1)))
    updates_before = len(fake.calls_to("chat.update"))
    before = len(fake.calls)
    await reporter.post_answer(
        key=f"{thread.session_id}:answer:1",
        session_id=thread.session_id,
        channel_id="C1",
        thread_ts=thread_ts,
        markdown="The pool was exhausted.",
    )
    await reporter.board.drain(timeout_s=30)
    answer_calls = len(fake.calls) - before
    steps = 2 * STEP_PAIRS
    step_updates = updates_before  # every chat.update so far was a step's
    return {
        "calls_per_model_step": round(statistics.mean(model_calls), 2),
        "calls_per_tool_step": round(statistics.mean(tool_calls), 2),
        "chat_update_per_step": round(step_updates / (steps + 1), 2),
        "calls_first_step": first,
        "calls_answer": answer_calls,
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
    status_path = asyncio.run(step_call_figures(streaming=False))
    figures.update(asyncio.run(step_call_figures(streaming=True)))
    figures["status_path"] = status_path
    goals = {
        "calls_per_model_step": ("<=", status_path["calls_per_model_step"]),
        "calls_per_tool_step": ("<=", status_path["calls_per_tool_step"]),
        "chat_update_per_step": ("==", 0.0),
    }
    print(json.dumps(figures | verdict(figures, goals)))


if __name__ == "__main__":
    main()
