"""Test support for the tool tests: a real store, a real jailed workspace, a session driver.

``JailWorkspace`` is a test double of the ``Workspace`` protocol (not of our code):
it runs each command for real with ``bash -c`` inside a bubblewrap jail whose
``/workspace`` is a temporary directory, so commands and ripgrep see the same
absolute paths the model uses.

``SessionDriver`` plays the harness's part for one session: it gives every call a
fresh ``tool_use`` id, keeps the read-state the tools return (as the checkpoint
would), and runs the per-step change notices.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness import (
    Checkpoint,
    CommandResult,
    ReadRecord,
    Recall,
    Requester,
    Todo,
    ToolContext,
    ToolOutcome,
    Workspace,
    WorkspaceFileNotFound,
    WorkspaceIsADirectory,
    change_notices,
    run_tool,
)
from memory_store import BackgroundTasks, Database, FileStore

WORKSPACE = "/workspace"


@contextlib.asynccontextmanager
async def open_store(url: str | None, data_dir: Path) -> AsyncIterator[FileStore]:
    """A migrated ``FileStore`` over ``url`` (None: SQLite under ``data_dir``)."""
    db = Database.from_url(url, data_dir=data_dir, pool_size=2, max_overflow=2)
    await db.migrate()
    try:
        yield FileStore(db)
    finally:
        await db.dispose()


def _jail_args(root: Path) -> list[str]:
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--clearenv"]
    args += ["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", WORKSPACE]
    args += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for link in ("bin", "lib", "lib64", "sbin"):
        if Path("/", link).is_symlink():
            args += ["--symlink", os.readlink(Path("/", link)), f"/{link}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    args += ["--bind", str(root), WORKSPACE, "--chdir", WORKSPACE]
    return args


@dataclass
class JailWorkspace:
    """A ``Workspace`` whose ``/workspace`` is ``root`` on this machine (see module doc)."""

    root: Path
    ran: dict[str, CommandResult] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)

    async def exec(self, name: str, command: str, *, timeout_s: float) -> CommandResult:
        if name in self.ran:
            return self.ran[name]
        self.started.append(command)
        proc = await asyncio.create_subprocess_exec(
            *_jail_args(self.root),
            "bash",
            "-c",
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            result = CommandResult(None, "", "", timed_out=True)
        else:
            result = CommandResult(proc.returncode, out.decode(errors="replace"), err.decode())
        self.ran[name] = result
        return result

    async def lookup(self, name: str, *, timeout_s: float) -> CommandResult | None:
        return self.ran.get(name)

    def host_path(self, path: str) -> Path:
        if not (path == WORKSPACE or path.startswith(WORKSPACE + "/")):
            raise WorkspaceFileNotFound(path)
        return self.root / path[len(WORKSPACE) :].lstrip("/")

    async def read_file(self, path: str) -> bytes:
        host = self.host_path(path)
        if host.is_dir():
            raise WorkspaceIsADirectory(path)
        if not host.is_file():
            raise WorkspaceFileNotFound(path)
        return host.read_bytes()

    async def write_file(self, path: str, data: bytes) -> None:
        host = self.host_path(path)
        if host.is_dir():
            raise WorkspaceIsADirectory(path)
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_bytes(data)


@dataclass
class SessionDriver:
    """One agent session calling tools the way the step loop does (see module doc)."""

    store: FileStore
    workspace: Workspace
    org_id: str
    channel_id: str = "C-INCIDENT"
    session_id: str = field(default_factory=lambda: f"s-{uuid.uuid4().hex[:8]}")
    read_state: dict[str, ReadRecord] = field(default_factory=dict)
    agent_may_write_skills: bool = False
    last_tool_use_id: str = ""
    tasks: BackgroundTasks | None = None
    cwd: str = "/workspace"
    todos: tuple[Todo, ...] = ()
    recall: Recall | None = None

    def context(self, tool_use_id: str | None = None) -> ToolContext:
        """The context for a call; a fresh ``tool_use`` id unless one is given."""
        self.last_tool_use_id = tool_use_id or f"toolu_{uuid.uuid4().hex[:16]}"
        return ToolContext(
            store=self.store,
            workspace=self.workspace,
            org_id=self.org_id,
            channel_id=self.channel_id,
            session_id=self.session_id,
            actor="agent",
            tool_use_id=self.last_tool_use_id,
            read_state=dict(self.read_state),
            agent_may_write_skills=self.agent_may_write_skills,
            tasks=self.tasks,
            cwd=self.cwd,
            todos=self.todos,
            recall=self.recall,
        )

    async def call(self, name: str, tool_input: dict[str, Any], **ids: str) -> ToolOutcome:
        """Run one tool call and keep the read-state it returns."""
        outcome = await run_tool(name, tool_input, self.context(ids.get("tool_use_id")))
        self.read_state.update(outcome.read_updates)
        self.cwd = outcome.cwd or self.cwd
        self.todos = self.todos if outcome.todos is None else outcome.todos
        return outcome

    @property
    def jail(self) -> JailWorkspace:
        """The workspace as the ``JailWorkspace`` the sandbox tests give (its host root)."""
        assert isinstance(self.workspace, JailWorkspace), self.workspace
        return self.workspace

    def checkpoint(self) -> Checkpoint:
        """The session's checkpoint as far as the tools and notices are concerned."""
        return Checkpoint(
            session_id=self.session_id,
            org_id=self.org_id,
            channel_id=self.channel_id,
            requester=Requester("U-REQ"),
            read_state=dict(self.read_state),
        )

    async def next_step_notices(self) -> list[str]:
        """What the next model call would be told about changed files."""
        texts, updates = await change_notices(self.store, self.checkpoint())
        self.read_state.update(updates)
        return texts

    def compact(self) -> None:
        """What compaction does to the read-state: every read becomes partial."""
        self.read_state = {p: replace(r, full=False) for p, r in self.read_state.items()}


STATE_CURRENT = " (file state is current in your context \u2014 no need to Read it back)"
"""The suffix of Write's and Edit's confirmations (Claude Code 2.1.336)."""


def error_text(outcome: ToolOutcome) -> str:
    """The text inside ``<tool_use_error>…</tool_use_error>`` (asserts the wrapping)."""
    assert outcome.is_error, outcome.content
    assert outcome.content.startswith("<tool_use_error>"), outcome.content
    assert outcome.content.endswith("</tool_use_error>"), outcome.content
    return outcome.content[len("<tool_use_error>") : -len("</tool_use_error>")]
