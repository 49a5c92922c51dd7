"""``exec`` in one request: the local server gets or starts a process by name
(``PUT /process/{name}``); a server without that call is asked the old way."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from sandbox_client import (
    ClientOptions,
    LocalProvider,
    ProcessStatus,
    SandboxClient,
    SandboxHandle,
)

COUNT = "echo run >> /workspace/runs-{name}; cat /workspace/runs-{name} | wc -l"


@pytest.fixture
async def raw(sandbox: SandboxHandle) -> AsyncIterator[httpx.AsyncClient]:
    """Plain HTTP to the module's sandbox (as the host: over its Unix socket)."""
    transport = httpx.AsyncHTTPTransport(uds=sandbox.socket_path)
    async with httpx.AsyncClient(base_url="http://sandbox", transport=transport) as client:
        yield client


async def test_put_starts_a_new_name_and_answers_a_known_one_without_running_it_again(
    raw: httpx.AsyncClient,
) -> None:
    body = {"command": COUNT.format(name="put"), "waitForCompletion": True, "timeout": 10}
    # When the same name is put twice
    first = await raw.put("/process/toolu_put", json=body)
    second = await raw.put("/process/toolu_put", json=body)
    # Then it ran once: the second answer is the first run's record
    assert first.status_code == second.status_code == 200
    assert first.json()["stdout"].strip() == "1"
    assert second.json() == first.json()


async def test_put_streams_a_running_process_to_its_end(raw: httpx.AsyncClient) -> None:
    headers = {"Accept": "text/event-stream"}
    started = await raw.post(
        "/process", json={"name": "toolu_long", "command": "sleep 0.3; echo late"}
    )
    assert started.json()["status"] == "running"
    # When the running name is put (a worker re-attaching after a crash)
    body = {"command": "echo never", "waitForCompletion": True}
    async with raw.stream("PUT", "/process/toolu_long", json=body, headers=headers) as reply:
        lines = [json.loads(line) async for line in reply.aiter_lines() if line]
    # Then the stream follows the running one to its end; the body's command never ran
    result = json.loads(lines[-1]["data"])
    assert lines[-1]["type"] == "result"
    assert (result["status"], result["stdout"]) == ("completed", "late\n")


async def test_put_without_a_name_is_refused(raw: httpx.AsyncClient) -> None:
    response = await raw.put("/process/", json={"command": "true"})
    assert response.status_code == 400


class Logged(httpx.AsyncBaseTransport):
    """A transport that notes each request's method and path, then sends it on."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.seen: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(f"{request.method} {request.url.path}")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_exec_sends_one_request_to_the_local_server(
    provider: LocalProvider, sandbox: SandboxHandle
) -> None:
    # Given a client as the local provider makes them (get-or-start on)
    async with provider.connect(sandbox) as made:
        assert made.options.get_or_start
    logged = Logged(httpx.AsyncHTTPTransport(uds=sandbox.socket_path))
    options = ClientOptions(get_or_start=True)
    async with SandboxClient(
        "http://sandbox", sandbox_id=sandbox.sandbox_id, transport=logged, options=options
    ) as client:
        # When it runs a command
        record = await client.exec("toolu_one", "echo one", timeout_s=10)
    # Then one request started it and brought its result
    assert record.stdout == "one\n"
    assert logged.seen == ["PUT /process/toolu_one"]


class OlderServer:
    """A data plane that predates ``PUT /process/{name}`` (and Blaxel's): 404 for it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        key = f"{request.method} {request.url.path}"
        self.seen.append(key)
        if request.method in ("PUT", "GET"):
            return httpx.Response(404, json={"error": "process not found"})
        name = json.loads(request.content)["name"]
        record = {"name": name, "pid": "7", "status": "completed", "exitCode": 0, "stdout": ""}
        event = {"type": "result", "data": json.dumps(record)}
        return httpx.Response(200, content=json.dumps(event).encode() + b"\n")


async def test_a_server_without_get_or_start_is_asked_the_old_way_from_then_on() -> None:
    server = OlderServer()
    options = ClientOptions(get_or_start=True, max_attempts=1)
    async with SandboxClient(
        "http://sandbox", sandbox_id="old", transport=httpx.MockTransport(server), options=options
    ) as client:
        first = await client.exec("toolu_a", "true", timeout_s=5)
        second = await client.exec("toolu_b", "true", timeout_s=5)
    assert first.status is second.status is ProcessStatus.COMPLETED
    assert server.seen == [
        "PUT /process/toolu_a",  # 404: an older server
        "GET /process/toolu_a",  # so: look the name up...
        "POST /process",  # ...then start it
        "GET /process/toolu_b",  # and the next call goes that way at once
        "POST /process",
    ]
