"""Remote sandboxes reach the gateway over the network with a per-session token in their proxy
URL: a live token names its session, anything else is answered 407."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest

from sandbox_client.gateway import Caller, CertificateAuthority, EgressRecord, Gateway, Rules

LIVE = "live-token-Zb1"


@dataclass
class Audit:
    records: list[EgressRecord] = field(default_factory=list)

    async def __call__(self, record: EgressRecord) -> None:
        self.records.append(record)


async def _resolve(token: str, tool_use_id: str) -> Caller | None:
    if token != LIVE:
        return None
    return Caller("s-remote", "C-INC", tool_use_id=lambda: tool_use_id or None)


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[str, Audit]]:
    audit = Audit()
    gateway = Gateway(Rules(), CertificateAuthority.create(), {}, audit)
    server = await gateway.serve_tokens("127.0.0.1", 0, _resolve)
    yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}", audit
    await gateway.aclose()


async def _get(proxy: str) -> httpx.Response:
    async with httpx.AsyncClient(proxy=proxy, trust_env=False) as client:
        return await client.get("http://metrics.internal/api")


async def test_a_live_token_names_its_session_and_the_tool_use_in_the_user_name(
    gateway: tuple[str, Audit],
) -> None:
    address, audit = gateway
    response = await _get(f"http://toolu_9:{LIVE}@{address}")
    assert response.status_code == 403  # authenticated; no rule for the host
    (record,) = audit.records
    assert (record.session_id, record.tool_use_id) == ("s-remote", "toolu_9")


@pytest.mark.parametrize("credentials", ["", "toolu_9:revoked-or-guessed@"])
async def test_no_token_or_a_dead_one_is_answered_407(
    gateway: tuple[str, Audit], credentials: str
) -> None:
    address, audit = gateway
    response = await _get(f"http://{credentials}{address}")
    assert response.status_code == 407
    assert "proxy credentials" in response.text
    assert audit.records == []


async def test_the_407_carries_its_reason_phrase(gateway: tuple[str, Audit]) -> None:
    host, _, port = gateway[0].partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET http://metrics.internal/api HTTP/1.1\r\nHost: metrics.internal\r\n\r\n")
    await writer.drain()
    status = await reader.readline()
    writer.close()
    assert status == b"HTTP/1.1 407 Proxy Authentication Required\r\n"
