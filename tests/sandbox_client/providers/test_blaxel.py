"""The Blaxel provider and the SBX/1 client against Blaxel's recorded response shapes.

There is no network here: ``httpx.MockTransport`` plays Blaxel's control plane and a
sandbox's data plane from the files in ``data/``. A live round trip runs only when
``BL_API_KEY`` and ``BL_WORKSPACE`` are set.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox_client import (
    BlaxelConfig,
    BlaxelProvider,
    Health,
    OutputChunk,
    ProcessStatus,
    SandboxGone,
    SandboxHandle,
)

DATA = Path(__file__).parents[1] / "data"
API_HOST = "api.blaxel.ai"
SANDBOX_HOST = "sbx-sbx-demo-x7k2q9.us-pdx-1.bl.run"
CONFIG = BlaxelConfig(api_key="bl-fake-key", workspace="acme", env={"TEAM": "payments"})
Handler = Callable[[httpx.Request], httpx.Response]


def recorded(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def sandbox_record(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = recorded("blaxel_sandbox.json")
    record.update(changes)
    return record


class FakeBlaxel:
    """Answers like Blaxel, records every request."""

    def __init__(self, sandbox: dict[str, Any] | None, data_plane: Handler | None = None) -> None:
        self.sandbox = sandbox
        self.requests: list[httpx.Request] = []
        self._data_plane = data_plane or (
            lambda request: httpx.Response(200, json={"status": "ok"})
        )

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.host == SANDBOX_HOST:
            return self._data_plane(request)
        assert request.url.host == API_HOST
        assert request.url.path.startswith("/v0/sandboxes")
        if request.method == "POST":
            self.sandbox = sandbox_record()
        if self.sandbox is None:
            return httpx.Response(404, json=recorded("blaxel_not_found.json"))
        if request.method == "DELETE":
            deleted, self.sandbox = self.sandbox, None
            return httpx.Response(200, json={**deleted, "status": "DELETING"})
        return httpx.Response(200, json=self.sandbox)

    def provider(self) -> BlaxelProvider:
        return BlaxelProvider(CONFIG, transport=httpx.MockTransport(self))


HANDLE = SandboxHandle(provider="blaxel", sandbox_id="sbx-demo", url=f"https://{SANDBOX_HOST}")


async def test_provision_asks_to_create_if_missing_with_the_workspace_headers() -> None:
    fake = FakeBlaxel(None)
    provider = fake.provider()

    handle = await provider.provision("sbx-demo")
    await provider.aclose()

    create = fake.requests[0]
    assert (create.method, create.url.path) == ("POST", "/v0/sandboxes")
    assert create.url.params["createIfNotExist"] == "true"
    assert create.headers["X-Blaxel-Authorization"] == "Bearer bl-fake-key"
    assert create.headers["X-Blaxel-Workspace"] == "acme"
    body = json.loads(create.content)
    assert body["metadata"] == {"name": "sbx-demo"}
    assert body["spec"]["runtime"]["envs"] == [{"name": "TEAM", "value": "payments"}]
    assert handle == HANDLE
    probe = fake.requests[1]
    assert (probe.url.host, probe.url.path) == (SANDBOX_HOST, "/health")
    assert probe.headers["X-Blaxel-Authorization"] == "Bearer bl-fake-key"


@pytest.mark.parametrize(
    ("record", "health"),
    [
        (sandbox_record(), Health.READY),
        (sandbox_record(state="STANDBY"), Health.SUSPENDED),
        (sandbox_record(status="DEPLOYING", state=None), Health.STARTING),
        (sandbox_record(status="TERMINATED"), Health.GONE),
        (recorded("blaxel_sandbox_failed.json"), Health.GONE),
        (None, Health.GONE),
    ],
    ids=["deployed", "standby", "deploying", "terminated", "failed-fatal", "not-found"],
)
async def test_health_comes_from_the_records_status_state_and_errors(
    record: dict[str, Any] | None, health: Health
) -> None:
    provider = FakeBlaxel(record).provider()

    assert await provider.health(HANDLE) is health
    await provider.aclose()


async def test_resume_retries_when_the_first_request_after_standby_fails() -> None:
    attempts: list[int] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        if len(attempts) == 1:
            raise httpx.ConnectError("connection reset while waking up", request=request)
        if len(attempts) == 2:
            return httpx.Response(503, json={"error": "waking up"})
        return httpx.Response(200, json={"status": "ok"})

    config = BlaxelConfig(api_key="k", workspace="acme", resume_backoff_s=0.001)
    provider = BlaxelProvider(
        config, transport=httpx.MockTransport(FakeBlaxel(sandbox_record(state="STANDBY"), flaky))
    )

    await provider.resume(HANDLE)
    await provider.suspend(HANDLE)  # no call: Blaxel goes to standby by itself
    await provider.aclose()

    assert len(attempts) == 3


async def test_resume_of_a_deleted_sandbox_says_it_is_gone() -> None:
    provider = FakeBlaxel(None).provider()

    with pytest.raises(SandboxGone):
        await provider.resume(HANDLE)
    await provider.aclose()


async def test_destroy_deletes_and_accepts_a_sandbox_already_gone() -> None:
    fake = FakeBlaxel(sandbox_record())
    provider = fake.provider()

    await provider.destroy(HANDLE)
    await provider.destroy(HANDLE)
    await provider.aclose()

    assert [(r.method, r.url.path) for r in fake.requests] == [
        ("DELETE", "/v0/sandboxes/sbx-demo")
    ] * 2


def blaxel_data_plane(request: httpx.Request) -> httpx.Response:
    """Blaxel's sandbox API for one command and two files, from the recorded shapes."""
    path = request.url.raw_path.decode()
    if request.method == "GET" and path == "/process/toolu_01ABC":
        return httpx.Response(404, json={"error": "process not found"})
    if request.method == "POST" and path == "/process":
        assert request.headers["accept"] == "text/event-stream"
        stream = (DATA / "blaxel_exec_stream.ndjson").read_bytes()
        return httpx.Response(200, content=stream, headers={"content-type": "application/x-ndjson"})
    if request.method == "GET" and path == "/process/toolu_02DEF":
        return httpx.Response(200, json=recorded("blaxel_process_running.json"))
    if request.method == "GET" and path == "/filesystem//workspace/report.txt":
        assert request.headers["accept"] == "application/octet-stream"
        headers = {"content-disposition": 'attachment; filename="report.txt"'}
        return httpx.Response(200, content=b"all good\n", headers=headers)
    if request.method == "PUT" and path == "/filesystem//workspace/out.bin":
        assert b'name="file"' in request.content
        assert b"\x00\xff" in request.content
        return httpx.Response(200, json={"message": "Binary file uploaded successfully"})
    return httpx.Response(404, json={"error": f"unexpected {request.method} {path}"})


async def test_the_sbx_client_runs_a_command_on_blaxels_streamed_shape() -> None:
    fake = FakeBlaxel(sandbox_record(), blaxel_data_plane)
    provider = fake.provider()
    chunks: list[OutputChunk] = []

    async with provider.connect(HANDLE) as client:
        record = await client.exec(
            "toolu_01ABC", "kubectl get pods", timeout_s=30, on_output=chunks.append
        )
        running = await client.get_process("toolu_02DEF")
    await provider.aclose()

    assert record.status is ProcessStatus.FAILED
    assert record.exit_code == 1
    assert record.pid == 4242
    assert record.started_at == datetime(2025, 6, 1, 10, 6, tzinfo=UTC)
    assert record.stderr == "warning: 1 pod restarting\n"
    assert chunks[1] == OutputChunk("stderr", "warning: 1 pod restarting")
    sent = json.loads(next(r for r in fake.requests if r.method == "POST").content)
    assert sent == {
        "command": "kubectl get pods",
        "name": "toolu_01ABC",
        "workingDir": "/workspace",
        "env": {},
        "waitForCompletion": True,
        "timeout": 30,
    }
    assert running is not None
    assert running.exit_code is None
    assert running.completed_at is None


async def test_files_go_through_blaxels_double_slash_paths() -> None:
    provider = FakeBlaxel(sandbox_record(), blaxel_data_plane).provider()

    async with provider.connect(HANDLE) as client:
        assert await client.read_file("/workspace/report.txt") == b"all good\n"
        await client.write_file("/workspace/out.bin", b"\x00\xff")
    await provider.aclose()


def test_the_api_key_never_shows_in_the_config() -> None:
    assert "bl-fake-key" not in repr(CONFIG)


@pytest.mark.skipif(
    not (os.environ.get("BL_API_KEY") and os.environ.get("BL_WORKSPACE")),
    reason="live Blaxel test: set BL_API_KEY and BL_WORKSPACE to run it",
)
async def test_a_live_blaxel_sandbox_runs_a_command_and_is_deleted() -> None:
    config = BlaxelConfig(api_key=os.environ["BL_API_KEY"], workspace=os.environ["BL_WORKSPACE"])
    provider = BlaxelProvider(config)
    handle = await provider.provision(f"warroom-test-{uuid.uuid4().hex[:8]}")
    try:
        assert await provider.health(handle) in (Health.READY, Health.SUSPENDED)
        async with provider.connect(handle) as client:
            record = await client.exec("live-echo", "echo hello from blaxel", timeout_s=60)
        assert record.stdout == "hello from blaxel\n"
    finally:
        await provider.destroy(handle)
        await provider.aclose()
