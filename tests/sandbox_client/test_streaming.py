"""Keepalives, dead streams and retries: how ``exec`` survives an unreliable connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from sandbox_client import (
    ClientOptions,
    LocalProvider,
    OutputChunk,
    ProcessStatus,
    SandboxClient,
    SandboxUnavailable,
)

from .conftest import local_config

SILENT = "echo before; sleep 0.8; echo after"
IDLE = ClientOptions(stream_idle_timeout_s=0.4, request_timeout_s=5.0)


@pytest.fixture
async def keepalive_client(
    state_dir: Path, request: pytest.FixtureRequest
) -> AsyncIterator[SandboxClient]:
    """A client (stream dead after 0.4 s of silence) of a sandbox whose keepalive period
    is the test's parameter."""
    keepalive_s: float = request.param
    provider = LocalProvider(local_config(state_dir, keepalive_s=keepalive_s, client=IDLE))
    handle = await provider.provision(f"keepalive-{int(keepalive_s * 1000)}")
    try:
        async with provider.connect(handle) as client:
            yield client
    finally:
        await provider.destroy(handle)


@pytest.mark.parametrize("keepalive_client", [0.1], indirect=True)
async def test_keepalives_keep_a_silent_command_streaming(keepalive_client: SandboxClient) -> None:
    chunks: list[OutputChunk] = []

    record = await keepalive_client.exec("silent", SILENT, timeout_s=10, on_output=chunks.append)

    assert record.stdout == "before\nafter\n"
    assert OutputChunk("stdout", "after\n") in chunks  # still streamed after the silence


@pytest.mark.parametrize("keepalive_client", [30.0], indirect=True)
async def test_without_keepalives_a_silent_stream_is_dead_and_the_result_is_polled(
    keepalive_client: SandboxClient,
) -> None:
    chunks: list[OutputChunk] = []

    record = await keepalive_client.exec("silent", SILENT, timeout_s=10, on_output=chunks.append)

    assert record.stdout == "before\nafter\n"  # the real outcome, found by polling
    assert chunks == [OutputChunk("stdout", "before\n")]  # the stream was given up


class FlakySandbox:
    """A data plane whose connections fail the first time each request is sent."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.started = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        key = f"{request.method} {request.url.path}"
        self.seen.append(key)
        if self.seen.count(key) == 1:
            raise httpx.ConnectError("connection refused", request=request)
        if key == "GET /process/toolu_9":
            if not self.started:
                return httpx.Response(404, json={"error": "process not found"})
            return httpx.Response(200, json=self._record())
        if key == "POST /process":
            self.started = True
            event = {"type": "result", "data": json.dumps(self._record())}
            return httpx.Response(200, content=json.dumps(event).encode() + b"\n")
        return httpx.Response(404, json={"error": "unexpected"})

    @staticmethod
    def _record() -> dict[str, object]:
        return {
            "name": "toolu_9",
            "pid": "9",
            "status": "completed",
            "exitCode": 0,
            "stdout": "ok\n",
        }


async def test_a_failed_start_is_looked_up_by_name_before_it_is_sent_again() -> None:
    fake = FlakySandbox()
    options = ClientOptions(retry_backoff_s=0.001)
    async with SandboxClient(
        "http://sandbox", sandbox_id="flaky", transport=httpx.MockTransport(fake), options=options
    ) as client:
        record = await client.exec("toolu_9", "echo ok", timeout_s=5)

    assert record.status is ProcessStatus.COMPLETED
    assert fake.seen == [
        "GET /process/toolu_9",  # refused, retried (idempotent)
        "GET /process/toolu_9",  # not known
        "POST /process",  # refused: never retried blindly...
        "GET /process/toolu_9",  # ...the name is looked up first
        "POST /process",
    ]


async def test_a_sandbox_that_never_answers_raises_after_bounded_tries() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    options = ClientOptions(retry_backoff_s=0.001, max_attempts=2)
    async with SandboxClient(
        "http://sandbox", sandbox_id="dead", transport=httpx.MockTransport(refuse), options=options
    ) as client:
        with pytest.raises(SandboxUnavailable) as caught:
            await client.read_file("/workspace/x")

    assert caught.value.sandbox_id == "dead"
    assert "ConnectError" in caught.value.reason
