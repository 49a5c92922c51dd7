"""Test support for the step tests: drive ``advance`` the way the durable layer does.

``SessionRun`` holds one session's checkpoint and collaborators (a real ``FileStore``,
the real ``AnthropicModel`` against ``FakeAnthropicAPI``, real local sandboxes) and
steps it: ``step`` is one ``advance``, ``run`` steps until the session waits, posting
each answer the way the driver does (clear ``answer``). ``save`` records every
mid-step commit (the tool intents), so a test can take the checkpoint a crashed
worker would have left behind.

The request checks (``valid_transcript``, ``prefix_stable``) work on what the fake
API received, so they see the exact bytes the model would see. This module does not
import pytest: ``bench/prompt_cache.py`` uses it too.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness import (
    DEFAULT_MODEL,
    AgentSpawner,
    AnthropicModel,
    ApprovalGate,
    Checkpoint,
    Collaborators,
    Event,
    Inbound,
    Limits,
    McpServers,
    Next,
    Recall,
    Requester,
    SandboxWorkspaces,
    StepResult,
    WorkspaceSource,
    advance,
)
from memory_store import FileStore
from sandbox_client import LocalConfig, LocalProvider, SandboxManager
from tests.fakes.anthropic_api import RecordedRequest
from tests.harness.tool_support import open_store

ORG = "T-STEP"
CHANNEL = "C-INCIDENT"
Between = Callable[[int], Awaitable[None]]


class NoSleep:
    """Stands in for ``asyncio.sleep`` in the model's backoff: records, returns at once."""

    def __init__(self) -> None:
        self.delays_s: list[float] = []

    async def __call__(self, delay_s: float) -> None:
        self.delays_s.append(delay_s)


def make_model(base_url: str, **overrides: Any) -> AnthropicModel:
    """The real adapter against the fake API, with backoff that does not wait."""
    options: dict[str, Any] = {
        "api_key": "sk-test",
        "model": DEFAULT_MODEL,
        "base_url": base_url,
        "max_attempts": 4,
        "sleep": NoSleep(),
    }
    return AnthropicModel(**(options | overrides))


@dataclass
class Saves:
    """The ``save`` callable: records each mid-step commit (checkpoint, events)."""

    commits: list[tuple[Checkpoint, tuple[Event, ...]]] = field(default_factory=list)

    async def __call__(self, cp: Checkpoint, events: Sequence[Event]) -> None:
        self.commits.append((cp, tuple(events)))

    def last_checkpoint(self) -> Checkpoint:
        """The checkpoint of the latest mid-step commit (a tool intent)."""
        return self.commits[-1][0]


@dataclass
class Kit:
    """What every session of a test shares: the store, sandbox access, and the models
    it made (closed by ``aclose``)."""

    store: FileStore
    workspaces: WorkspaceSource
    models: list[AnthropicModel] = field(default_factory=list)

    def session(
        self,
        base_url: str,
        *,
        session_id: str = "s-main",
        limits: Limits | None = None,
        mcp: McpServers | None = None,
        **model_options: Any,
    ) -> SessionRun:
        """A new session whose model talks to the fake API at ``base_url`` (with the MCP
        servers ``mcp``, if any)."""
        model = make_model(base_url, **model_options)
        self.models.append(model)
        cp = new_checkpoint(session_id)
        return SessionRun(cp, self.store, model, self.workspaces, limits or Limits(), mcp=mcp)

    async def aclose(self) -> None:
        """Close every model's HTTP connections."""
        for model in self.models:
            await model.aclose()


@contextlib.asynccontextmanager
async def open_kit(data_dir: Path, workspaces: WorkspaceSource | None = None) -> AsyncIterator[Kit]:
    """A ``Kit`` over a fresh SQLite store under ``data_dir``.

    ``workspaces`` None: sandbox access that is never used (no jail starts until a
    sandbox tool runs, and the sessions of such tests run none).
    """
    manager = SandboxManager(LocalProvider(LocalConfig(state_dir=data_dir / "sbx")))
    async with open_store(None, data_dir) as store:
        kit = Kit(store, workspaces or SandboxWorkspaces(manager))
        try:
            yield kit
        finally:
            await kit.aclose()
            await manager.aclose()


def new_checkpoint(session_id: str, *, user: str = "U-ALICE", name: str = "Alice") -> Checkpoint:
    """A fresh session in the test org and incident channel."""
    return Checkpoint(session_id, ORG, CHANNEL, Requester(user, name))


@dataclass
class SessionRun:
    """One session stepped by ``advance`` (see the module docstring)."""

    cp: Checkpoint
    store: FileStore
    model: AnthropicModel
    workspaces: WorkspaceSource
    limits: Limits = field(default_factory=Limits)
    mcp: McpServers | None = None
    saves: Saves = field(default_factory=Saves)
    spawner: AgentSpawner | None = None
    events: list[Event] = field(default_factory=list)
    approvals: ApprovalGate | None = None
    answers: list[str] = field(default_factory=list)
    recall: Recall | None = None

    def deps(self) -> Collaborators:
        """The collaborators of one step."""
        return Collaborators(
            self.store,
            self.model,
            self.workspaces,
            self.saves,
            self.limits,
            mcp=self.mcp,
            agents=self.spawner,
            approvals=self.approvals,
            recall=self.recall,
        )

    async def step(self, inbox: Sequence[Inbound] = ()) -> StepResult:
        """One ``advance``; the result's checkpoint becomes the session's."""
        result = await advance(self.cp, self.deps(), inbox)
        self.cp = result.checkpoint
        self.events.extend(result.events)
        if self.cp.answer is not None:  # the durable layer's post step
            self.answers.append(self.cp.answer)
            self.cp = replace(self.cp, answer=None, best_effort=False)
        return result

    async def run(
        self, inbox: Sequence[Inbound] = (), *, between: Between | None = None, max_steps: int = 300
    ) -> None:
        """Step until the session waits; ``between(i)`` runs after step ``i`` (0-based)."""
        for index in range(max_steps):
            result = await self.step(inbox if index == 0 else ())
            if result.next is Next.WAIT:
                return
            if between is not None:
                await between(index)
        raise AssertionError(f"the session did not wait within {max_steps} steps")

    def of_kind(self, kind: type[Event]) -> list[Any]:
        """The events of one class, in order."""
        return [e for e in self.events if isinstance(e, kind)]


# ------------------------------------------------------------- request checks


def without_cache_control(message: dict[str, Any]) -> str:
    """A request message as canonical JSON with every block's ``cache_control`` removed.

    The adapter moves the rolling breakpoint to the last message on every request, so
    the same message carries ``cache_control`` in request n and not in request n+1;
    the cache keys on the content, and so does this comparison.
    """
    blocks = [
        {k: v for k, v in block.items() if k != "cache_control"} for block in message["content"]
    ]
    return json.dumps({**message, "content": blocks}, sort_keys=True, ensure_ascii=False)


def static_prefix(request: RecordedRequest) -> bytes:
    """The raw bytes before ``messages``: model settings, tools, system (breakpoints kept)."""
    return request.raw[: request.raw.index(b'"messages":[')]


def prefix_stable(before: RecordedRequest, after: RecordedRequest) -> bool:
    """True when ``after`` repeats ``before``: same static bytes, messages extended only."""
    if static_prefix(before) != static_prefix(after):
        return False
    old = [without_cache_control(m) for m in before.messages]
    new = [without_cache_control(m) for m in after.messages]
    return new[: len(old)] == old


def transcript_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Why the API would refuse this ``messages`` array; empty when it is valid.

    Anthropic docs, "Handle tool calls": roles alternate starting with ``user``; every
    ``tool_use`` of an assistant message is answered by a ``tool_result`` in the next
    user message, whose tool results come first; no ``tool_result`` answers nothing.
    """
    problems: list[str] = []
    for index, message in enumerate(messages):
        expected = "user" if index % 2 == 0 else "assistant"
        if message["role"] != expected:
            problems.append(f"message {index} is {message['role']}, expected {expected}")
    for index, message in enumerate(messages):
        if message["role"] != "user":
            continue
        asked = _tool_use_ids(messages[index - 1]) if index else []
        blocks = message["content"]
        answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        leading = [b["tool_use_id"] for b in blocks[: len(answered)] if b["type"] == "tool_result"]
        if sorted(answered) != sorted(asked):
            problems.append(f"message {index} answers {answered}, asked were {asked}")
        if leading != answered:
            problems.append(f"message {index} has text before its tool results")
    if messages and messages[-1]["role"] == "assistant" and _tool_use_ids(messages[-1]):
        problems.append("the last assistant message has unanswered tool_use blocks")
    return problems


def _tool_use_ids(message: dict[str, Any]) -> list[str]:
    return [b["id"] for b in message["content"] if b["type"] == "tool_use"]


def texts_of(message: dict[str, Any]) -> list[str]:
    """The text of each block of a request message (tool results included)."""
    out = []
    for block in message["content"]:
        out.append(block["text"] if block["type"] == "text" else str(block.get("content", "")))
    return out
