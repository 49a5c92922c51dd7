"""The ``SandboxProvider`` protocol: what every sandbox backend offers the lifecycle manager."""

from __future__ import annotations

from typing import Protocol

from sandbox_client.client import SandboxClient
from sandbox_client.records import Health, SandboxHandle, SandboxUsage


class SandboxProvider(Protocol):
    """Creates, suspends, resumes and destroys sandboxes, and connects clients to them.

    Contract:
        * Handles are plain values (``SandboxHandle.to_json``): a provider built in
          another process, given a stored handle, reaches the same sandbox; its
          ``health`` says ``GONE`` when the sandbox died meanwhile.
        * ``provision(id)`` is idempotent: a live sandbox with that id is returned as is.
        * ``suspend`` makes the sandbox cost nothing while the agent thinks; requests
          to a suspended sandbox may hang rather than fail, so ``resume`` first.
          ``resume`` returns once the sandbox answers; on a ``GONE`` sandbox it raises
          ``SandboxGone``.
        * ``destroy`` ends every process of the sandbox and frees its storage; it is
          idempotent (destroying a gone sandbox is not an error).
        * No call holds a lock or a connection after it returns; ``connect`` returns a
          client the caller must ``aclose``.
        * Errors: ``ProvisionFailed`` (``SandboxCannotStart`` when no sandbox will start
          until someone fixes the host or the account), ``SandboxGone``,
          ``SandboxUnavailable``.
    """

    kind: str

    async def provision(self, sandbox_id: str) -> SandboxHandle:
        """Create (or find) the sandbox ``sandbox_id`` and return once it answers."""
        ...

    async def resume(self, handle: SandboxHandle) -> None:
        """Thaw / wake the sandbox; return when it answers."""
        ...

    async def suspend(self, handle: SandboxHandle) -> None:
        """Freeze / let the sandbox go to standby."""
        ...

    async def destroy(self, handle: SandboxHandle) -> None:
        """End the sandbox and everything in it."""
        ...

    async def health(self, handle: SandboxHandle) -> Health:
        """READY, SUSPENDED, STARTING or GONE."""
        ...

    async def list_sandboxes(self, *, older_than_s: float = 0.0) -> tuple[SandboxHandle, ...]:
        """The sandboxes this provider can reach that were made over ``older_than_s``
        ago, live or dead but not yet destroyed (for reaping orphans)."""
        ...

    async def usage(self, handle: SandboxHandle) -> SandboxUsage:
        """The sandbox's limits and how often it hit them (fields it cannot tell are
        None); never raises."""
        ...

    def connect(self, handle: SandboxHandle) -> SandboxClient:
        """A data-plane client for the sandbox (no I/O until it is used)."""
        ...

    async def aclose(self) -> None:
        """Release the provider's own connections (sandboxes are not affected)."""
        ...
