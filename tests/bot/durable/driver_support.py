"""Support for the step driver tests: drivers (one per simulated worker) over one store.

``Workers`` holds a migrated store, the real ``AnthropicModel`` against the fake
Messages API (``script``: ``TodoWrite`` until asked to summarise) and a queue that is
a dict of pending tokens; ``driver(name)`` is one worker's ``StepDriver``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.durable.driver import StepDriver, ThreadPoster
from bot.durable.shared_transcripts import SharedTranscripts
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.metrics import StepOutcome
from harness import (
    DEFAULT_MODEL,
    AnthropicModel,
    Checkpoint,
    Event,
    Limits,
    Message,
    Requester,
    SandboxWorkspaces,
)
from memory_store import Database, FileStore, SessionKey, SessionStore
from sandbox_client import LocalConfig, LocalProvider, SandboxManager

ORG, CHANNEL = "T0TRANSCRIPT", "C0TRANSCRIPT"
TODOS = {"todos": [{"content": "Check pods", "status": "in_progress", "activeForm": "Checking"}]}
COMPACTING = "will be compacted"


def script(request: RecordedRequest) -> Reply:
    """Summarise when asked to; otherwise update the todo list (a step that never ends)."""
    last = json.dumps(request.messages[-1])
    if COMPACTING in last:
        return Reply.text("Summary: the pods were checked.")
    return Reply.tool("TodoWrite", TODOS)


class QuietThread:
    """A ``ThreadPoster`` that posts nothing (these tests never answer)."""

    async def post_answer(
        self, *, key: str, session_id: str, channel_id: str, thread_ts: str, markdown: str
    ) -> str:
        return "0.0"

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


@dataclass
class Workers:
    """Drivers sharing one store, model and queue (a dict of pending tokens)."""

    sessions: SessionStore
    files: FileStore
    model: AnthropicModel
    workspaces: SandboxWorkspaces
    limits: Limits
    pending: dict[str, str] = field(default_factory=dict)
    enqueued: list[str] = field(default_factory=list)

    def driver(
        self,
        name: str,
        poster: ThreadPoster | None = None,
        shared: SharedTranscripts | None = None,
    ) -> StepDriver:
        async def enqueue(session_id: str, token: str) -> None:
            self.pending[session_id] = token
            self.enqueued.append(token)

        return StepDriver(
            sessions=self.sessions,
            files=self.files,
            model=self.model,
            workspaces=self.workspaces,
            poster=poster or QuietThread(),
            enqueue=enqueue,
            worker_id=f"test:0:{name}",
            limits=self.limits,
            shared=shared,
        )

    async def open(
        self,
        session_id: str,
        messages: tuple[Message, ...] = (),
        *,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        cp = checkpoint or Checkpoint(session_id, ORG, CHANNEL, Requester("U1"), messages=messages)
        opened = await self.sessions.open_or_join(
            SessionKey(ORG, CHANNEL, session_id),
            requester_id="U1",
            initial_checkpoint=cp.to_json(),
            text="pods are down",
            source_ts="1.0",
            session_id=session_id,
        )
        assert opened.token is not None
        self.pending[session_id] = opened.token

    async def step(self, driver: StepDriver, session_id: str) -> int:
        """One step; returns the bytes the store wrote for it."""
        before = self.sessions.io.written_bytes
        outcome = await driver.run(session_id, self.pending.pop(session_id))
        assert outcome is StepOutcome.STEPPED
        return self.sessions.io.written_bytes - before

    async def stored(self, session_id: str) -> list[Message]:
        return [Message.from_json(m) for m in await self.sessions.transcript(session_id)]


async def open_workers(
    fake: FakeAnthropicAPI, data_dir: Path, **limits: Any
) -> tuple[Workers, Database, SandboxManager]:
    db = Database.from_url(None, data_dir=data_dir)
    await db.migrate()
    manager = SandboxManager(LocalProvider(LocalConfig(state_dir=data_dir / "sbx")))
    model = AnthropicModel(api_key="sk-test", model=DEFAULT_MODEL, base_url=fake.base_url)
    unlimited = Limits(max_steps=10**6, max_session_tokens=10**12, loop_repeats=10**6)
    workers = Workers(
        SessionStore(db),
        FileStore(db),
        model,
        SandboxWorkspaces(manager),
        replace(unlimited, **limits),
    )
    return workers, db, manager
