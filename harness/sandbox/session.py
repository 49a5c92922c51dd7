"""The session's sandbox for one step: ``Workspace`` over ``sandbox_client``.

``SandboxWorkspaces.open(checkpoint)`` gives the tools a ``SessionWorkspace`` that
provisions, resumes or replaces the session's sandbox on first use in the step
(``SandboxManager.use``), never before: a step that touches no sandbox path costs
no sandbox. After the step the harness reads back the (possibly new) handle and
what the model must be told when the sandbox was replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol

from harness.loop.checkpoint import Checkpoint
from harness.loop.events import Event, Notice, NoticeTopic
from harness.sandbox.workspace import (
    CommandResult,
    NewSandbox,
    WorkspaceCannotStart,
    WorkspaceFileNotFound,
    WorkspaceIsADirectory,
    WorkspaceRefused,
    WorkspaceUnavailable,
)
from sandbox_client import (
    EnsureResult,
    FileNotFound,
    InvalidPath,
    IsADirectory,
    Loss,
    ProcessNotFound,
    ProcessRecord,
    RequestRejected,
    SandboxCannotStart,
    SandboxClient,
    SandboxError,
    SandboxHandle,
    SandboxManager,
    SetupStep,
)

BUSY_MARGIN_S = 60.0
"""A command's use of its sandbox is counted for its timeout plus this (then a crashed
worker's use stops blocking suspension)."""
FILE_BUSY_S = 120.0
"""The same for a file read or write."""


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
        manager: the process's sandbox manager (provider, shared idle policy).
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
        workspace = SessionWorkspace(
            self.manager, self.setup, cp.sandbox, on_new_sandbox, session_id=cp.session_id
        )
        if self.egress is not None:
            workspace.route_egress(self.egress, session_id=cp.session_id, channel_id=cp.channel_id)
        return workspace


class SessionWorkspace:
    """``harness.Workspace`` over one session's sandbox (see the module docstring).

    Each operation is one ``SandboxManager.use``: counted in the shared ledger while it
    runs, so no worker suspends or destroys the sandbox under it.
    """

    def __init__(
        self,
        manager: SandboxManager,
        setup: Sequence[SetupStep],
        handle_json: str | None,
        on_new_sandbox: NewSandbox | None = None,
        *,
        session_id: str | None = None,
    ) -> None:
        self._manager = manager
        self._setup = setup
        self._on_new_sandbox = on_new_sandbox
        self._session_id = session_id
        self._handle = SandboxHandle.from_json(handle_json) if handle_json else None
        self._losses: list[Loss] = []
        self._egress: tuple[EgressBinder, str, str] | None = None

    def route_egress(self, egress: EgressBinder, *, session_id: str, channel_id: str) -> None:
        """Bind the sandbox to the gateway before each command, for this session."""
        self._egress = (egress, session_id, channel_id)

    @contextlib.asynccontextmanager
    async def _use(self, busy_s: float) -> AsyncIterator[SandboxClient]:
        """The sandbox's client for one operation; SandboxCannotStart ->
        WorkspaceCannotStart, any other SandboxError -> WorkspaceUnavailable."""
        try:
            async with self._manager.use(
                self._handle, self._setup, session_id=self._session_id, busy_s=busy_s
            ) as result:
                await self._took(result)
                yield result.client
        except SandboxCannotStart as exc:
            raise WorkspaceCannotStart(exc.reason) from exc
        except SandboxError as exc:
            raise WorkspaceUnavailable(str(exc)) from exc

    async def _took(self, result: EnsureResult) -> None:
        is_new = result.handle != self._handle
        self._handle = result.handle
        if result.lost is not None and (result.replaced or result.lost.failed_steps):
            self._losses.append(result.lost)
        if is_new and self._on_new_sandbox is not None:
            await self._on_new_sandbox()

    async def _egress_env(self, name: str) -> Mapping[str, str]:
        if self._egress is None or self._handle is None:
            return {}
        egress, session_id, channel_id = self._egress
        return await egress(
            self._handle, session_id=session_id, channel_id=channel_id, tool_use_id=name
        )

    async def exec(
        self, name: str, command: str, *, timeout_s: float, detach: bool = False
    ) -> CommandResult:
        """Get-or-start ``command`` as process ``name``; see ``Workspace.exec``.

        When the command's shell has exited, what it left running in its process group
        (``sleep 100 &``, ``nohup x &``) is killed: nothing outlives its call. The sandbox
        limits the command hit (memory, processes, disk) end its standard error. With
        ``detach``, a command still running at ``timeout_s`` is left running
        (``running=True``; see ``exec_or_detach``).
        """
        async with self._use(busy_s=timeout_s + BUSY_MARGIN_S) as client:
            assert self._handle is not None
            env = await self._egress_env(name)
            before = await self._manager.usage(self._handle)
            record = await client.exec(
                name, command, timeout_s=timeout_s, env=env, detach_at_deadline=detach
            )
            if record.finished:
                await _end_leftovers(client, name)
            after = await self._manager.usage(self._handle)
        hits = after.hits_since(before, failed=record.exit_code != 0)
        return _result(record, hits, detached=detach and not record.finished)

    async def exec_or_detach(
        self, name: str, command: str, *, timeout_s: float
    ) -> tuple[CommandResult, str]:
        """``exec``, but a command still running at ``timeout_s`` is left running
        (``running=True``) for the background watcher, with the id of its sandbox; see
        ``BackgroundWorkspace``."""
        result = await self.exec(name, command, timeout_s=timeout_s, detach=True)
        assert self._handle is not None  # exec ensured the sandbox
        return result, self._handle.sandbox_id

    async def start(self, name: str, command: str) -> str:
        """Start ``command`` as process ``name`` and return at once (get-or-start, so a
        redone call starts nothing new); see ``BackgroundWorkspace.start``."""
        async with self._use(busy_s=FILE_BUSY_S) as client:
            assert self._handle is not None
            env = await self._egress_env(name)
            try:
                await client.start(name, command, env=env)
            except RequestRejected as exc:
                raise WorkspaceRefused("/workspace", exc.message) from exc
            return self._handle.sandbox_id

    async def kill(self, name: str) -> bool:
        """SIGKILL process ``name``'s group; False when the sandbox does not know it."""
        if self._handle is None:
            return False
        async with self._use(busy_s=FILE_BUSY_S) as client:
            try:
                await client.kill(name)
            except ProcessNotFound:
                return False
        return True

    async def lookup(self, name: str, *, timeout_s: float) -> CommandResult | None:
        """The outcome of process ``name`` if this sandbox still knows it (after a crash)."""
        if self._handle is None:
            return None
        async with self._use(busy_s=timeout_s + BUSY_MARGIN_S) as client:
            if self._losses:  # a replaced sandbox knows nothing of earlier processes
                return None
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
        async with self._use(busy_s=FILE_BUSY_S) as client:
            with _refusals(path):
                return await client.read_file(path)

    async def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a sandbox file. Raises WorkspaceIsADirectory, WorkspaceRefused
        (a path the sandbox does not serve; ``/workspace`` full: the reason names the limit)."""
        async with self._use(busy_s=FILE_BUSY_S) as client:
            try:
                with _refusals(path):
                    await client.write_file(path, data)
            except WorkspaceRefused as exc:
                raise WorkspaceRefused(path, await self._why(exc.reason)) from exc

    async def _why(self, message: str) -> str:
        """``message``, and the workspace's size when it says no space was left."""
        if os.strerror(errno.ENOSPC) not in message or self._handle is None:
            return message
        size_bytes = (await self._manager.usage(self._handle)).workspace_max_bytes
        if size_bytes is None:
            return message
        return (
            f"No space left on /workspace: the file does not fit in the sandbox's "
            f"{size_bytes // (1024 * 1024)} MiB workspace; nothing was written."
        )

    def handle_json(self) -> str | None:
        """The handle to store with the session (new when the sandbox was replaced)."""
        return None if self._handle is None else self._handle.to_json()

    def notices(self) -> tuple[str, ...]:
        """What the model must be told at its next step (sandbox replaced, set-up failed)."""
        return tuple(loss.describe() for loss in self._losses)

    def events(self, name: Callable[[str], str] | None = None) -> tuple[Event, ...]:
        """Log events for the same, for people: each lost process named by ``name``
        (what it ran), not by its id."""
        return tuple(
            Notice(topic=NoticeTopic.SANDBOX_REPLACED, text=loss.describe(name=name))
            for loss in self._losses
        )


@contextmanager
def _refusals(path: str) -> Iterator[None]:
    """The one translation of a file call's refusals: ``FileNotFound`` and ``IsADirectory``
    name ``path``; a path the sandbox will not serve or a request it rejects is
    ``WorkspaceRefused`` (permanent, told to the model). Other sandbox errors pass on to
    ``_use``, which makes them ``WorkspaceUnavailable`` (the step may retry)."""
    try:
        yield
    except FileNotFound as exc:
        raise WorkspaceFileNotFound(path) from exc
    except IsADirectory as exc:
        raise WorkspaceIsADirectory(path) from exc
    except InvalidPath as exc:
        raise WorkspaceRefused(path, exc.reason) from exc
    except RequestRejected as exc:
        raise WorkspaceRefused(path, exc.message) from exc


async def _end_leftovers(client: SandboxClient, name: str) -> None:
    """SIGKILL what is left in the process group of finished process ``name``.

    Best effort, raises nothing: the command's result is already known, and a sandbox
    that refuses (the record was forgotten) or does not answer must not turn a
    finished call into a failed step.
    """
    with contextlib.suppress(SandboxError):
        await client.kill(name)


def _result(
    record: ProcessRecord, limits_hit: tuple[str, ...] = (), *, detached: bool = False
) -> CommandResult:
    """The tools' view of ``record``; the sandbox limits it hit, one sentence each, end
    its standard error (the model is told why a command was killed or failed)."""
    stderr = record.stderr
    if limits_hit:
        stderr = "\n".join((stderr.rstrip("\n"), *limits_hit)).lstrip("\n") + "\n"
    return CommandResult(
        exit_code=record.exit_code,
        stdout=record.stdout,
        stderr=stderr,
        timed_out=record.timed_out,
        running=detached,
        started_at=record.started_at,
        ended_at=record.completed_at,
    )
