"""The session's sandbox for one step: ``Workspace`` over ``sandbox_client``.

``SandboxWorkspaces.open(checkpoint)`` gives the tools a ``SessionWorkspace`` that
provisions, resumes or replaces the session's sandbox on first use in the step
(``SandboxManager.ensure``), never before: a step that touches no sandbox path costs
no sandbox. After the step the harness reads back the (possibly new) handle and
what the model must be told when the sandbox was replaced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol

from harness.loop.checkpoint import Checkpoint
from harness.loop.events import Event, Notice
from harness.sandbox.workspace import (
    CommandResult,
    NewSandbox,
    WorkspaceFileNotFound,
    WorkspaceIsADirectory,
    WorkspaceRefused,
    WorkspaceUnavailable,
)
from sandbox_client import (
    FileNotFound,
    InvalidPath,
    IsADirectory,
    Loss,
    ProcessRecord,
    RequestRejected,
    SandboxClient,
    SandboxError,
    SandboxHandle,
    SandboxManager,
    SetupStep,
)


class EgressBinder(Protocol):
    """Routes a sandbox's outbound requests to the egress gateway, on behalf of one command.

    Called before each command runs, with the sandbox it runs in and the ``tool_use`` it runs
    for, so that the gateway attributes every request to its session and ``tool_use``
    (docs/architecture.md §11). Cheap when nothing changed since the last call.
    """

    async def __call__(
        self, handle: SandboxHandle, *, session_id: str, channel_id: str, tool_use_id: str
    ) -> Mapping[str, str]:
        """Serve ``handle``'s egress for this command; returns variables to add to the
        command's environment (a remote sandbox's proxy URL), often none."""


class SandboxWorkspaces:
    """Hands each step a lazily-ensured workspace on the session's sandbox.

    Args:
        manager: the process's sandbox manager (provider, idle suspension).
        setup: the deployment's workspace set-up, replayed on every new sandbox.
        egress: binds the sandbox to the egress gateway before each command (None: no
            gateway; the sandbox reaches nothing, or the host's network).
    """

    def __init__(
        self,
        manager: SandboxManager,
        setup: Sequence[SetupStep] = (),
        egress: EgressBinder | None = None,
    ) -> None:
        self.manager = manager
        self.setup = tuple(setup)
        self.egress = egress

    def open(self, cp: Checkpoint, *, on_new_sandbox: NewSandbox | None = None) -> SessionWorkspace:
        """The workspace of ``cp``'s session for one step (see ``WorkspaceSource.open``)."""
        workspace = SessionWorkspace(self.manager, self.setup, cp.sandbox, on_new_sandbox)
        if self.egress is not None:
            workspace.route_egress(self.egress, session_id=cp.session_id, channel_id=cp.channel_id)
        return workspace


class SessionWorkspace:
    """``harness.Workspace`` over one session's sandbox (see the module docstring)."""

    def __init__(
        self,
        manager: SandboxManager,
        setup: Sequence[SetupStep],
        handle_json: str | None,
        on_new_sandbox: NewSandbox | None = None,
    ) -> None:
        self._manager = manager
        self._setup = setup
        self._on_new_sandbox = on_new_sandbox
        self._handle = SandboxHandle.from_json(handle_json) if handle_json else None
        self._client: SandboxClient | None = None
        self._losses: list[Loss] = []
        self._egress: tuple[EgressBinder, str, str] | None = None

    def route_egress(self, egress: EgressBinder, *, session_id: str, channel_id: str) -> None:
        """Bind the sandbox to the gateway before each command, for this session."""
        self._egress = (egress, session_id, channel_id)

    async def _ensure(self) -> SandboxClient:
        if self._client is None:
            with _mapped(""):
                result = await self._manager.ensure(self._handle, self._setup)
            is_new = result.handle != self._handle
            self._handle, self._client = result.handle, result.client
            if result.lost is not None and (result.replaced or result.lost.failed_steps):
                self._losses.append(result.lost)
            if is_new and self._on_new_sandbox is not None:
                await self._on_new_sandbox()
        return self._client

    async def exec(self, name: str, command: str, *, timeout_s: float) -> CommandResult:
        """Get-or-start ``command`` as process ``name``; see ``Workspace.exec``.

        When the command's shell has exited, what it left running in its process group
        (``sleep 100 &``, ``nohup x &``) is killed: nothing outlives its call.
        """
        client = await self._ensure()
        env: Mapping[str, str] = {}
        if self._egress is not None and self._handle is not None:
            egress, session_id, channel_id = self._egress
            env = await egress(
                self._handle, session_id=session_id, channel_id=channel_id, tool_use_id=name
            )
        with _mapped(""):
            record = await client.exec(name, command, timeout_s=timeout_s, env=env)
            if record.finished:
                await _end_leftovers(client, name)
        return _result(record)

    async def lookup(self, name: str, *, timeout_s: float) -> CommandResult | None:
        """The outcome of process ``name`` if this sandbox still knows it (after a crash)."""
        if self._handle is None:
            return None
        client = await self._ensure()
        if self._losses:  # a replaced sandbox knows nothing of earlier processes
            return None
        with _mapped(""):
            record = await client.wait(name, timeout_s=timeout_s)
            if record is not None and not record.finished:
                await client.kill(name)
                record = await client.wait(name, timeout_s=5.0)
            elif record is not None:
                await _end_leftovers(client, name)
        return None if record is None else _result(record)

    async def read_file(self, path: str) -> bytes:
        """A sandbox file's bytes.

        Raises WorkspaceFileNotFound, WorkspaceIsADirectory, WorkspaceRefused (a path
        the sandbox does not serve, a file over its read limit).
        """
        client = await self._ensure()
        with _mapped(path, refusals=True):
            return await client.read_file(path)

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a sandbox file. Raises WorkspaceIsADirectory, WorkspaceRefused."""
        client = await self._ensure()
        with _mapped(path, refusals=True):
            await client.write_file(path, data)

    def handle_json(self) -> str | None:
        """The handle to store with the session (new when the sandbox was replaced)."""
        return None if self._handle is None else self._handle.to_json()

    def notices(self) -> tuple[str, ...]:
        """What the model must be told at its next step (sandbox replaced, set-up failed)."""
        return tuple(loss.describe() for loss in self._losses)

    def events(self) -> tuple[Event, ...]:
        """Log events for the same (the thread is told in plain words)."""
        return tuple(
            Notice(topic="sandbox_replaced", text=loss.describe()) for loss in self._losses
        )


@contextmanager
def _mapped(path: str, *, refusals: bool = False) -> Iterator[None]:
    """The one translation of ``sandbox_client`` errors into the workspace's own.

    ``FileNotFound`` and ``IsADirectory`` name ``path``. With ``refusals`` (file calls), a
    path the sandbox will not serve or a request it rejects is ``WorkspaceRefused``: permanent,
    told to the model. Every other sandbox error means the sandbox could not do it now
    (``WorkspaceUnavailable``, which the step may retry).
    """
    try:
        yield
    except FileNotFound as exc:
        raise WorkspaceFileNotFound(path) from exc
    except IsADirectory as exc:
        raise WorkspaceIsADirectory(path) from exc
    except InvalidPath as exc:
        if not refusals:
            raise WorkspaceUnavailable(str(exc)) from exc
        raise WorkspaceRefused(path, exc.reason) from exc
    except RequestRejected as exc:
        if not refusals:
            raise WorkspaceUnavailable(str(exc)) from exc
        raise WorkspaceRefused(path, exc.message) from exc
    except SandboxError as exc:
        raise WorkspaceUnavailable(str(exc)) from exc


async def _end_leftovers(client: SandboxClient, name: str) -> None:
    """SIGKILL what is left in the process group of finished process ``name``.

    Best effort, raises nothing: the command's result is already known, and a sandbox
    that refuses (the record was forgotten) or does not answer must not turn a
    finished call into a failed step.
    """
    with contextlib.suppress(SandboxError):
        await client.kill(name)


def _result(record: ProcessRecord) -> CommandResult:
    return CommandResult(
        exit_code=record.exit_code,
        stdout=record.stdout,
        stderr=record.stderr,
        timed_out=record.timed_out,
    )
