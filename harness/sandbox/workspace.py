"""The session's sandbox, as the tools see it: run a command, read and write a file.

``Workspace`` is the seam between the tools and ``sandbox_client``: the composition
root adapts a sandbox to it (docs/architecture.md §8), tests may run a real local one.
Paths are absolute sandbox paths (the working directory is ``/workspace``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from harness.errors import (
    WorkspaceCannotStart,
    WorkspaceError,
    WorkspaceFileNotFound,
    WorkspaceIsADirectory,
    WorkspaceRefused,
    WorkspaceUnavailable,
)
from harness.loop.checkpoint import Checkpoint
from harness.loop.events import Event

__all__ = [
    "BackgroundWorkspace",
    "CommandResult",
    "NewSandbox",
    "StepWorkspace",
    "Workspace",
    "WorkspaceSource",
    "WorkspaceCannotStart",
    "WorkspaceError",
    "WorkspaceFileNotFound",
    "WorkspaceIsADirectory",
    "WorkspaceRefused",
    "WorkspaceUnavailable",
]


@dataclass(frozen=True)
class CommandResult:
    """What a finished (or timed-out) command produced.

    Attributes:
        exit_code: the process's exit status; None when it was killed or timed out.
        stdout: standard output, decoded as UTF-8 (undecodable bytes replaced).
        stderr: standard error, decoded the same way.
        timed_out: True when the deadline passed and the process was killed (or, with
            ``running``, left running).
        running: True when the deadline passed and the process was left running
            (``BackgroundWorkspace.exec_or_detach``).
        started_at, ended_at: when the process started and ended, as the sandbox
            recorded them (aware UTC, whole seconds over SBX/1); None when it does not
            say, or (``ended_at``) while it runs. What times a command whose outcome a
            later call found (``lookup`` after a crash) from its real start to its end.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    running: bool = False
    started_at: datetime | None = None
    ended_at: datetime | None = None


class Workspace(Protocol):
    """The sandbox operations the tools need.

    Contract:
        * ``exec`` is idempotent by ``name``: a second call with a name the sandbox
          already knows returns that process's result (waiting for it when it still
          runs) instead of starting the command again. Tools pass the ``tool_use`` id.
        * ``exec`` enforces ``timeout_s`` itself (kills the process group on expiry)
          and reports it as ``timed_out=True``; it never raises for a failing command.
        * ``lookup`` finds a process started earlier under ``name`` (crash recovery);
          None when the sandbox does not know it (never run, or the sandbox was replaced).
        * Infrastructure failures raise ``WorkspaceUnavailable``; the step is retried.
        * A sandbox that will not start until a person fixes the host raises
          ``WorkspaceCannotStart`` before anything ran; never retried.
        * A file call the sandbox refuses for good (a path outside the roots it serves,
          a file over its read limit) raises ``WorkspaceRefused``; never retried.
        * ``exec`` ends what the command left running in its process group when the
          command's shell exits (``sleep 100 &``): nothing outlives its call.
    """

    async def exec(self, name: str, command: str, *, timeout_s: float) -> CommandResult:
        """Run ``command`` with ``bash -c`` in ``/workspace``; wait at most ``timeout_s``."""
        ...

    async def lookup(self, name: str, *, timeout_s: float) -> CommandResult | None:
        """The result of the process named ``name``, waiting at most ``timeout_s`` for it."""
        ...

    async def read_file(self, path: str) -> bytes:
        """A file's bytes.

        Raises WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused.
        """
        ...

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file, creating parent directories.

        Raises WorkspaceIsADirectory when ``path`` is a directory, WorkspaceRefused
        when the sandbox does not serve ``path``.
        """
        ...


@runtime_checkable
class BackgroundWorkspace(Protocol):
    """A workspace that can leave a process running after the call (``run_in_background``).

    Contract:
        * ``start`` is get-or-start by ``name``, like ``exec``: a name the sandbox
          knows is not started again. It returns at once, with the id of the sandbox
          the process runs in (the handle is ``StepWorkspace.handle_json``).
        * ``kill`` ends the process group of ``name``; False when the sandbox does not
          know ``name``.
        * ``exec_or_detach`` is ``Workspace.exec`` (get-or-start, streamed, as fast), except
          at ``timeout_s``: the process is left running (``running=True``), followed from
          then on like a started one; with the sandbox's id, like ``start``.
        * Failures raise like ``Workspace.exec``.
    """

    async def start(self, name: str, command: str) -> str:
        """Start ``command`` with ``bash -c`` in ``/workspace`` as process ``name``."""
        ...

    async def kill(self, name: str) -> bool:
        """SIGKILL the process group of ``name``."""
        ...

    async def exec_or_detach(
        self, name: str, command: str, *, timeout_s: float
    ) -> tuple[CommandResult, str]:
        """Run ``command`` like ``exec``; at ``timeout_s`` leave it running instead.
        Returns the result and the id of the sandbox it ran (runs) in."""
        ...

    def handle_json(self) -> str | None:
        """The sandbox handle (JSON), once the sandbox was ensured."""
        ...


class StepWorkspace(Workspace, Protocol):
    """A ``Workspace`` for one step, plus what the step records about the sandbox after it.

    The sandbox is provisioned, resumed or replaced lazily, on the first call that
    needs it; a step that touches no sandbox path costs no sandbox.
    """

    def handle_json(self) -> str | None:
        """The sandbox handle to keep in the checkpoint (new when it was replaced)."""
        ...

    def notices(self) -> tuple[str, ...]:
        """What the model must be told at its next step (e.g. the sandbox was replaced)."""
        ...

    def events(self, name: Callable[[str], str] | None = None) -> tuple[Event, ...]:
        """Log events for the same, told to people: ``name`` says what a sandbox process
        ran (its name is a ``tool_use`` id)."""
        ...


NewSandbox = Callable[[], Awaitable[None]]


class WorkspaceSource(Protocol):
    """Gives each step the workspace of its session's sandbox."""

    def open(self, cp: Checkpoint, *, on_new_sandbox: NewSandbox | None = None) -> StepWorkspace:
        """The workspace of ``cp``'s session for one step (no I/O until first use).

        ``on_new_sandbox`` is awaited when the step got a sandbox other than
        ``cp.sandbox`` (a first one, or a replacement), before anything runs in it, so
        the caller can record the new handle: a worker that dies mid-tool must leave
        behind the sandbox its process runs in (docs/architecture.md §5).
        """
        ...
