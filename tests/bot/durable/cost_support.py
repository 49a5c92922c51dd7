"""Support for the cost tests: metered drivers over PostgreSQL and the fake Messages API.

``Metered`` holds one store (PostgreSQL), the real ``AnthropicModel`` against the fake,
the model-call ledger and a dict of pending tokens; ``driver(limits)`` is one worker's
``StepDriver`` with those limits; ``run_until_idle`` steps a session until it waits.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from bot.durable.crash_points import Crasher, no_crash
from bot.durable.driver import StepDriver
from bot.metrics import StepOutcome
from harness import (
    DEFAULT_MODEL,
    AnthropicModel,
    Checkpoint,
    Event,
    IncidentRecord,
    Limits,
    Requester,
    SandboxWorkspaces,
    Usage,
    default_prices,
)
from memory_store import Database, FileStore, ModelCallLog, SessionKey, SessionStore

DEADLINE_S = 10.0


class Answers:
    """A ``ThreadPoster`` keeping every answer posted, by session."""

    def __init__(self) -> None:
        self.posted: dict[str, list[str]] = {}

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        self.posted.setdefault(session_id, []).append(markdown)
        return f"{len(self.posted[session_id])}.0"

    async def show_progress(
        self,
        *,
        session_id: str,
        channel_id: str,
        thread_ts: str,
        checkpoint: Checkpoint,
        events: Sequence[Event],
    ) -> None:
        return None


async def no_wait(_: float) -> None:
    """The model's back-off sleep, skipped (the fake needs no pause between attempts)."""


@dataclass
class Metered:
    """Drivers over one PostgreSQL store, model, ledger and queue (a dict of tokens)."""

    db: Database
    sessions: SessionStore
    files: FileStore
    ledger: ModelCallLog
    model: AnthropicModel
    manager: Any
    org: str = field(default_factory=lambda: f"T{uuid.uuid4().hex[:10]}")
    channel: str = "C0COST"
    answers: Answers = field(default_factory=Answers)
    pending: dict[str, str] = field(default_factory=dict)
    sandbox_dir: Path | None = None

    def driver(
        self,
        limits: Limits | None = None,
        crash: Crasher = no_crash,
        record: IncidentRecord | None = None,
    ) -> StepDriver:
        async def enqueue(session_id: str, token: str) -> None:
            self.pending[session_id] = token

        unlimited = Limits(max_steps=10**6, max_session_tokens=10**12, loop_repeats=10**6)
        return StepDriver(
            sessions=self.sessions,
            files=self.files,
            model=self.model,
            workspaces=SandboxWorkspaces(self.manager),
            poster=self.answers,
            enqueue=enqueue,
            worker_id=f"test:{uuid.uuid4().hex[:6]}",
            limits=limits or unlimited,
            crash=crash,
            ledger=self.ledger,
            record=record,
        )

    def key(self, session_id: str) -> SessionKey:
        return SessionKey(self.org, self.channel, session_id)

    async def open(
        self, session_id: str, text: str = "checkout-api 500s, look", source_ts: str | None = None
    ) -> None:
        cp = Checkpoint(session_id, self.org, self.channel, Requester("U1"))
        opened = await self.sessions.open_or_join(
            self.key(session_id),
            requester_id="U1",
            initial_checkpoint=cp.to_json(),
            text=text,
            source_ts=source_ts or f"{time.time():.6f}",
            session_id=session_id,
        )
        assert opened.token is not None
        self.pending[session_id] = opened.token

    async def reply(self, session_id: str, text: str) -> None:
        token = await self.sessions.add_input(
            session_id, user_id="U2", text=text, source_ts=f"{time.time():.6f}"
        )
        assert token is not None
        self.pending[session_id] = token

    async def run_until_idle(self, driver: StepDriver, session_id: str) -> None:
        """Run wake-ups until none is pending; a step that raises is run again (its
        retry), waiting (with a deadline) for its released lease to lapse."""
        deadline = time.monotonic() + DEADLINE_S * 3
        while (token := self.pending.pop(session_id, None)) is not None:
            assert time.monotonic() < deadline, "the session never went idle"
            try:
                outcome = await driver.run(session_id, token)
            except Crash:
                self.pending[session_id] = token
                continue
            if outcome is StepOutcome.SKIPPED:  # the crashed claim's lease has not lapsed
                self.pending[session_id] = token
                await asyncio.sleep(0.005)  # polling a condition, with the deadline above


class Crash(Exception):
    """A worker's death, simulated in process at a crash point."""


def crash_once_at(point_name: str, step: int) -> Crasher:
    """A crasher that "kills" the worker at ``point_name`` of step ``step``, first attempt."""

    def crash(point_reached: Any, *, session_id: str, step: int, attempt: int) -> None:
        if point_reached.value == point_name and step == wanted and attempt == 0:
            raise Crash(point_name)

    wanted = step
    return crash


def served_usage(answered: Sequence[dict[str, Any]]) -> Usage:
    """The summed usage of the fake's answered messages."""
    total = Usage()
    for message in answered:
        total = total + Usage.from_dict(message["usage"])
    return total


def served_cost_nanousd(answered: Sequence[dict[str, Any]]) -> list[int]:
    """Each answered message's cost (price table, its model), in order."""
    prices = default_prices()
    return [prices.cost(m["model"], Usage.from_dict(m["usage"])).nanousd for m in answered]


def dollars(nanousd: int) -> Decimal:
    return Decimal(nanousd) / 10**9


async def open_metered(database_url: str, fake_url: str, state_dir: Any) -> Metered:
    from sandbox_client import LocalConfig, LocalProvider, SandboxManager

    db = Database.from_url(database_url, data_dir=state_dir)
    await db.migrate()
    # Unix socket paths must stay short: not under tmp_path (long under pytest-xdist)
    sandbox_dir = Path(tempfile.mkdtemp(prefix="wr-cost-"))
    manager = SandboxManager(LocalProvider(LocalConfig(state_dir=sandbox_dir)))
    model = AnthropicModel(api_key="sk-test", model=DEFAULT_MODEL, base_url=fake_url, sleep=no_wait)
    return Metered(
        db,
        SessionStore(db),
        FileStore(db),
        ModelCallLog(db),
        model,
        manager,
        sandbox_dir=sandbox_dir,
    )


async def close_metered(metered: Metered) -> None:
    await metered.model.aclose()
    await metered.manager.provider.destroy_all()  # no jail outlives the test
    await metered.manager.aclose()
    await metered.db.dispose()
    if metered.sandbox_dir is not None:
        shutil.rmtree(metered.sandbox_dir, ignore_errors=True)
