"""``BlaxelProvider``: sandboxes on Blaxel, whose data plane is the same SBX/1.

Control plane facts (Blaxel's API and ``blaxel-ai/sdk-python``): ``POST
/v0/sandboxes?createIfNotExist=true`` with ``{"metadata": {"name"}, "spec": {"runtime":
{"image", "memory", "envs"}, "region"}}``; ``GET`` and ``DELETE /v0/sandboxes/{name}``;
headers ``X-Blaxel-Authorization: Bearer <key>`` and ``X-Blaxel-Workspace``. A record
has ``status`` (``DEPLOYED``, ``DEPLOYING``, ``FAILED``, ``TERMINATED``, …), ``state``
(``RUNNING`` or ``STANDBY``), ``errors`` (infrastructure failures; ``fatal`` ones moved it
to FAILED) and ``metadata.url`` (the data plane). No suspend call exists: a sandbox goes
to standby about 15 s after its last connection closes and any request wakes it; the
first request after standby is known to fail sometimes, hence ``resume`` retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import httpx

from sandbox_client.client import SandboxClient
from sandbox_client.errors import (
    ProtocolError,
    ProvisionFailed,
    SandboxCannotStart,
    SandboxGone,
    SandboxUnavailable,
)
from sandbox_client.records import Health, SandboxHandle, SandboxUsage
from sandbox_client.transport import ClientOptions
from sandbox_client.wire import error_message

GONE_STATUSES = frozenset({"FAILED", "TERMINATED", "DELETING", "DEACTIVATED", "DEACTIVATING"})
STARTING_STATUSES = frozenset({"DEPLOYING", "BUILDING", "UPLOADING", "BUILT"})
PASSING_4XX = frozenset({408, 409, 425, 429})
"""Refusals of a sandbox creation that may pass (timeout, conflict, too early, rate)."""


@dataclass(frozen=True)
class BlaxelConfig:
    """Access to one Blaxel workspace.

    Attributes:
        api_key: the workspace's API key (never enters a sandbox; not in ``repr``).
        workspace: the workspace name.
        env: the only environment variables a sandbox gets (settings decide).
        resume_attempts, resume_backoff_s: health probes when resuming (doubling pause).
        client: data-plane client options; keep-alive is off so sandboxes can go to
            standby.
    """

    api_key: str = field(repr=False)
    workspace: str
    api_url: str = "https://api.blaxel.ai/v0"
    run_url: str = "https://run.blaxel.ai"
    image: str = "blaxel/base-image:latest"
    memory_mb: int = 4096
    region: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    request_timeout_s: float = 30.0
    resume_attempts: int = 6
    resume_backoff_s: float = 0.25
    client: ClientOptions = field(
        default_factory=lambda: ClientOptions(request_timeout_s=30.0, keepalive_connections=False)
    )


class BlaxelProvider:
    """Sandboxes on Blaxel. ``transport`` replaces the network (tests use
    ``httpx.MockTransport``) for both the control and the data plane."""

    kind = "blaxel"

    def __init__(
        self, config: BlaxelConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self._transport = transport
        self._api = httpx.AsyncClient(
            base_url=config.api_url,
            headers=self._auth_headers(),
            transport=transport,
            timeout=config.request_timeout_s,
        )

    def _auth_headers(self) -> dict[str, str]:
        return {
            "X-Blaxel-Authorization": f"Bearer {self.config.api_key}",
            "X-Blaxel-Workspace": self.config.workspace,
        }

    async def aclose(self) -> None:
        """Close the control-plane connections."""
        await self._api.aclose()

    def connect(self, handle: SandboxHandle) -> SandboxClient:
        """A data-plane client for ``handle.url`` with the workspace's auth headers."""
        return SandboxClient(
            handle.url,
            sandbox_id=handle.sandbox_id,
            transport=self._transport,
            headers=self._auth_headers(),
            options=self.config.client,
        )

    async def provision(self, sandbox_id: str) -> SandboxHandle:
        """Create the sandbox (or get it, ``createIfNotExist``) and wait until it answers.

        Raises:
            SandboxCannotStart: Blaxel refused the request itself (a 4xx other than
                408, 409, 425 or 429: the key, the workspace, the image), as it will again.
            ProvisionFailed: Blaxel failed (5xx, or those four), or the sandbox never
                answered; the next try may work.
        """
        response = await self._call(
            sandbox_id, "POST", "/sandboxes", params={"createIfNotExist": "true"},
            json=self._create_body(sandbox_id),
        )  # fmt: skip
        if response.status_code >= 300:
            reason = f"HTTP {response.status_code}: {error_message(response.content)}"
            if 400 <= response.status_code < 500 and response.status_code not in PASSING_4XX:
                raise SandboxCannotStart(sandbox_id, reason)
            raise ProvisionFailed(sandbox_id, reason)
        handle = self._handle(sandbox_id, self._record(sandbox_id, response))
        try:
            await self._probe(handle)
        except SandboxUnavailable as exc:
            raise ProvisionFailed(sandbox_id, exc.reason) from exc
        return handle

    def _create_body(self, sandbox_id: str) -> dict[str, Any]:
        runtime: dict[str, Any] = {"image": self.config.image, "memory": self.config.memory_mb}
        if self.config.env:
            runtime["envs"] = [{"name": k, "value": v} for k, v in self.config.env.items()]
        spec: dict[str, Any] = {"runtime": runtime}
        if self.config.region:
            spec["region"] = self.config.region
        return {"metadata": {"name": sandbox_id}, "spec": spec}

    def _handle(self, sandbox_id: str, record: dict[str, Any]) -> SandboxHandle:
        metadata = record.get("metadata") or {}
        url = (
            metadata.get("url")
            or f"{self.config.run_url}/{self.config.workspace}/sandboxes/{sandbox_id}"
        )
        return SandboxHandle(provider=self.kind, sandbox_id=sandbox_id, url=str(url).rstrip("/"))

    async def list_sandboxes(self, *, older_than_s: float = 0.0) -> tuple[SandboxHandle, ...]:
        """None: Blaxel sandboxes are not reaped from here (Blaxel's own TTL ends them)."""
        return ()

    async def usage(self, handle: SandboxHandle) -> SandboxUsage:
        """Nothing known: Blaxel's API reports no limit hits."""
        return SandboxUsage()

    async def health(self, handle: SandboxHandle) -> Health:
        """From the control plane's record: 404 or a dead status → GONE; standby →
        SUSPENDED; deploying → STARTING; deployed → READY.

        Raises:
            SandboxUnavailable: the control plane did not answer (or answered 5xx).
        """
        response = await self._call(handle.sandbox_id, "GET", f"/sandboxes/{handle.sandbox_id}")
        if response.status_code == 404:
            return Health.GONE
        return health_of(self._record(handle.sandbox_id, response))

    async def resume(self, handle: SandboxHandle) -> None:
        """Wake the sandbox by probing ``GET /health`` until it answers.

        Raises:
            SandboxGone: the control plane says it is gone.
            SandboxUnavailable: it did not answer after ``resume_attempts`` probes.
        """
        if await self.health(handle) is Health.GONE:
            raise SandboxGone(handle.sandbox_id, "Blaxel no longer has it")
        await self._probe(handle)

    async def _probe(self, handle: SandboxHandle) -> None:
        options = replace(self.config.client, max_attempts=1)
        backoff_s = self.config.resume_backoff_s
        failure: SandboxUnavailable | None = None
        async with SandboxClient(
            handle.url, sandbox_id=handle.sandbox_id, transport=self._transport,
            headers=self._auth_headers(), options=options,
        ) as client:  # fmt: skip
            for _ in range(self.config.resume_attempts):
                try:
                    await client.health()
                    return
                except SandboxUnavailable as exc:
                    failure = exc
                await asyncio.sleep(backoff_s)
                backoff_s *= 2
        assert failure is not None
        raise failure

    async def suspend(self, handle: SandboxHandle) -> None:
        """Nothing to do: Blaxel puts a sandbox on standby ~15 s after its last
        connection closes (the manager closes its client when it suspends)."""

    async def destroy(self, handle: SandboxHandle) -> None:
        """Delete the sandbox (a sandbox already gone is fine).

        Raises:
            SandboxUnavailable: the control plane did not answer, or refused.
        """
        response = await self._call(handle.sandbox_id, "DELETE", f"/sandboxes/{handle.sandbox_id}")
        if response.status_code >= 300 and response.status_code != 404:
            reason = f"delete: HTTP {response.status_code}: {error_message(response.content)}"
            raise SandboxUnavailable(handle.sandbox_id, reason)

    async def _call(self, sandbox_id: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._api.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            reason = f"Blaxel control plane: {type(exc).__name__}: {exc}"
            raise SandboxUnavailable(sandbox_id, reason) from exc
        if response.status_code >= 500:
            reason = f"Blaxel control plane: HTTP {response.status_code}"
            raise SandboxUnavailable(sandbox_id, reason)
        return response

    @staticmethod
    def _record(sandbox_id: str, response: httpx.Response) -> dict[str, Any]:
        try:
            record = response.json()
        except ValueError as exc:
            raise ProtocolError(sandbox_id, "the sandbox record is not JSON") from exc
        if not isinstance(record, dict):
            raise ProtocolError(sandbox_id, "the sandbox record is not an object")
        return record


def health_of(record: Mapping[str, Any]) -> Health:
    """Health from a Blaxel sandbox record's ``status``, ``state`` and ``errors``."""
    errors = record.get("errors") or []
    if any(isinstance(e, Mapping) and e.get("fatal") for e in errors):
        return Health.GONE
    status = str(record.get("status") or "").upper()
    if status in GONE_STATUSES:
        return Health.GONE
    if status in STARTING_STATUSES or not status:
        return Health.STARTING
    if str(record.get("state") or "").upper() == "STANDBY":
        return Health.SUSPENDED
    return Health.READY
