"""The embedded default (no ``REDIS_URL``): an in-memory broker, worker threads in this
process, SQLite; and the small parts of the queue wiring (crash rules, retry policy).

Durability still comes from the database: a session recorded runnable by a process
that died before enqueueing it is picked up by the next process's first sweep.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dramatiq.asyncio import get_event_loop_thread
from dramatiq.brokers.stub import StubBroker
from pydantic import SecretStr

from bot.durable.actors import (
    EmbeddedWorker,
    RuntimeHolder,
    _transient,
    crash_from,
    parse_crash_spec,
    setup,
)
from bot.durable.crash_points import CrashPoint, no_crash
from bot.fakes.anthropic_api import FakeAnthropicAPI
from bot.fakes.slack_api import FakeSlackApi
from bot.settings import Settings
from harness import ModelRejected, ModelUnavailable, WorkspaceUnavailable
from memory_store import Database, SessionStatus, SessionStore
from tests.bot.durable_support import (
    Fakes,
    ModelScript,
    Probe,
    destroy_sandboxes,
    poll,
    standard_plan,
)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A short temporary directory (sandbox socket paths are at most 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="wr-e-"))
    try:
        yield path
    finally:
        destroy_sandboxes(path / "sbx")
        shutil.rmtree(path, ignore_errors=True)


async def test_the_embedded_worker_picks_up_a_session_left_runnable_by_a_dead_process(
    data_dir: Path, slack_api: FakeSlackApi
) -> None:
    script = ModelScript()
    async with FakeAnthropicAPI(script) as model_api:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
            database_url=None,
            redis_url=None,
            anthropic_api_key=SecretStr("sk-ant-test"),
            anthropic_base_url=model_api.base_url,
            slack_bot_token=SecretStr(slack_api.token),
            slack_api_url=slack_api.base_url,
            data_dir=data_dir,
            sweep_interval_s=0.2,
        )
        assert settings.redis_url is None
        db = Database.from_url(None, data_dir=data_dir)
        await db.migrate()
        try:
            # Given a session recorded runnable, whose wake-up was never sent
            probe = Probe(
                SessionStore(db), Fakes(None, model_api, slack_api, script), None, data_dir
            )
            await probe.open("embedded-1", standard_plan(answer="Embedded answer."))
            # When the bot's process starts its in-process worker
            broker, _, _ = setup(settings)
            assert isinstance(broker, StubBroker)
            worker = EmbeddedWorker(broker, threads=2)
            worker.start()
            try:
                # Then the first sweep enqueues it and it runs to its answer, once
                await probe.assert_completed_once("embedded-1")
            finally:
                await asyncio.to_thread(worker.stop, timeout_ms=10_000)
            session = await probe.session("embedded-1")
            assert session.status is SessionStatus.WAITING
        finally:
            await db.dispose()


def test_a_crash_rule_fires_only_for_its_session_step_and_first_attempt() -> None:
    (rule,) = parse_crash_spec("after_tool@1:s-1")
    assert rule.matches(CrashPoint.AFTER_TOOL, session_id="s-1", step=1, attempt=0)
    assert not rule.matches(CrashPoint.AFTER_TOOL, session_id="s-2", step=1, attempt=0)
    assert not rule.matches(CrashPoint.AFTER_TOOL, session_id="s-1", step=2, attempt=0)
    assert not rule.matches(CrashPoint.AFTER_TOOL, session_id="s-1", step=1, attempt=1)
    assert not rule.matches(CrashPoint.AFTER_MODEL, session_id="s-1", step=1, attempt=0)


def test_a_crash_rule_with_a_bang_fires_on_every_attempt_of_any_session() -> None:
    (rule,) = parse_crash_spec("before_model@0!")
    assert rule.matches(CrashPoint.BEFORE_MODEL, session_id="any", step=0, attempt=5)


def test_no_crash_spec_means_the_production_crasher() -> None:
    assert crash_from(None) is no_crash
    assert crash_from("") is no_crash


def test_a_malformed_crash_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="during_lunch"):
        parse_crash_spec("during_lunch@1")


def test_only_transient_errors_are_retried_and_only_a_few_times() -> None:
    overloaded = ModelUnavailable(status=529, attempts=4)
    assert _transient(0, overloaded)
    assert _transient(0, WorkspaceUnavailable("no answer"))
    assert not _transient(3, overloaded)
    assert not _transient(0, ModelRejected(status=400, message="bad request"))
    assert not _transient(0, ValueError("a bug"))


async def test_a_stopping_worker_fetches_no_more_wake_ups_and_leaves_them_queued(
    data_dir: Path, slack_api: FakeSlackApi, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeAnthropicAPI(ModelScript()) as model_api:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
            database_url=None,
            redis_url=None,
            anthropic_api_key=SecretStr("sk-ant-test"),
            anthropic_base_url=model_api.base_url,
            slack_bot_token=SecretStr(slack_api.token),
            slack_api_url=slack_api.base_url,
            data_dir=data_dir,
        )
        db = Database.from_url(None, data_dir=data_dir)
        await db.migrate()
        broker, actors, holder = setup(settings)
        worker = EmbeddedWorker(broker, threads=2)
        worker.start()
        try:
            # Given a worker that started stopping (its first SIGTERM)
            await poll(_booted(holder), timeout_s=20, what="the worker to boot")
            holder.drain()
            # When a wake-up is sent
            actors.advance.send("s-deploy", "token-1")
            # Then its consumers end, and the wake-up stays queued for another worker,
            # handed back at most once (not taken again and again; issue #32.2)
            await poll(_consumers_ended(holder), timeout_s=20, what="the consumers to end")
            assert isinstance(broker, StubBroker)
            assert broker.queues["warroom"].qsize() == 1
            assert caplog.text.count("wake-up handed back") <= 1
        finally:
            await asyncio.to_thread(worker.stop, timeout_ms=10_000)
            await db.dispose()


def _booted(holder: RuntimeHolder) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return holder.worker is not None

    return check


def _consumers_ended(holder: RuntimeHolder) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        assert holder.worker is not None
        return not any(c.is_alive() for c in holder.worker.consumers.values())

    return check


def _bare_settings(data_dir: Path) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
        database_url=None,
        redis_url=None,
        data_dir=data_dir,
    )


class _SlowToUnwind:
    """A coroutine that waits until cancelled, then takes a moment to undo what it did
    (as closing a database connection does: the call in flight ends first)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.unwound = threading.Event()
        self._never: asyncio.Event | None = None  # held here: it holds the waiting task

    async def __call__(self) -> Any:
        self._never = asyncio.Event()  # (a task only its loop knows of may be collected)
        self.started.set()
        try:
            await self._never.wait()
        except asyncio.CancelledError:
            await asyncio.to_thread(time.sleep, 0.2)  # the undo's own work, off the loop
            self.unwound.set()
            raise


async def test_a_stopping_worker_lets_a_runtime_being_opened_undo_itself_first(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a worker stopped while its housekeeping is still opening the runtime
    broker, _actors, holder = setup(_bare_settings(data_dir))
    opening = _SlowToUnwind()
    monkeypatch.setattr(holder, "get", opening)
    worker = EmbeddedWorker(broker, threads=1)
    worker.start()
    assert await asyncio.to_thread(opening.started.wait, 20)
    # When it stops
    await asyncio.to_thread(worker.stop, timeout_ms=10_000)
    # Then the opening was cancelled and finished its undo before the loop closed (a
    # database call abandoned there posted its result to a closed loop: a traceback)
    assert opening.unwound.is_set()


@pytest.mark.parametrize("close_fails", [False, True], ids=["closed", "close-failed"])
async def test_a_stopping_worker_cancels_what_else_runs_on_its_loop_and_lets_it_unwind(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, close_fails: bool
) -> None:
    # Given a task of its own left running on the worker's event loop (and, for one case,
    # a runtime that fails to close: a database gone at exit)
    broker, _actors, holder = setup(_bare_settings(data_dir))
    if close_fails:

        async def failing_close() -> None:
            raise ConnectionError("the database went away")

        monkeypatch.setattr(holder, "close", failing_close)
    worker = EmbeddedWorker(broker, threads=1)
    worker.start()
    thread = get_event_loop_thread()
    assert thread is not None
    stray = _SlowToUnwind()
    asyncio.run_coroutine_threadsafe(stray(), thread.loop)
    assert await asyncio.to_thread(stray.started.wait, 20)
    # When the worker stops
    await asyncio.to_thread(worker.stop, timeout_ms=10_000)
    # Then that task was cancelled and unwound before the loop closed
    assert stray.unwound.is_set()
