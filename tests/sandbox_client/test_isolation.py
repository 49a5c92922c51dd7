"""What a sandbox cannot see or reach: secrets, the host network, the system, the
virtual mounts."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sandbox_client import LocalProvider, SandboxClient

from .conftest import local_config

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-fake-0123456789",
    "SLACK_BOT_TOKEN": "xoxb-fake-0123456789",
    "DATABASE_URL": "postgresql://warroom:fake-password@127.0.0.1:5432/warroom",
}


@pytest.fixture
def listener() -> Iterator[int]:
    """A real TCP server on the host's loopback; yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
async def secret_env_client(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SandboxClient]:
    """A sandbox provisioned while the test process holds (fake) secrets."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    provider = LocalProvider(local_config(state_dir, env={"TEAM": "payments"}))
    handle = await provider.provision("secrets")
    try:
        async with provider.connect(handle) as client:
            yield client
    finally:
        await provider.destroy(handle)


async def test_the_sandbox_environment_holds_only_what_settings_allow(
    secret_env_client: SandboxClient,
) -> None:
    record = await secret_env_client.exec("env", "env; cat /proc/1/environ", timeout_s=10)

    assert "TEAM=payments" in record.stdout
    for name, value in SECRETS.items():
        assert name not in record.stdout
        assert value not in record.stdout


def _connect(port: int) -> str:
    return f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"


async def test_with_network_none_the_sandbox_cannot_reach_host_ports(
    client: SandboxClient, listener: int
) -> None:
    record = await client.exec("reach-listener", _connect(listener), timeout_s=10)
    database = await client.exec("reach-database", _connect(5432), timeout_s=10)

    assert record.exit_code != 0
    assert "connected" not in record.stdout
    assert database.exit_code != 0
    assert "connected" not in database.stdout


async def test_with_network_host_the_same_port_is_reachable(state_dir: Path, listener: int) -> None:
    provider = LocalProvider(local_config(state_dir, network="host"))
    handle = await provider.provision("hostnet")
    try:
        async with provider.connect(handle) as client:
            record = await client.exec("reach", _connect(listener), timeout_s=10)
    finally:
        await provider.destroy(handle)

    assert record.stdout == "connected\n"


async def test_virtual_mounts_are_read_only_notes_pointing_at_the_file_tools(
    client: SandboxClient,
) -> None:
    listing = await client.exec(
        "virtual", "ls -A /memory /skills /incident /incidents", timeout_s=10
    )
    note = await client.exec("note", "cat /skills/README-warroom.txt", timeout_s=10)
    past = await client.exec("past", "cat /incidents/README-warroom.txt", timeout_s=10)
    write = await client.exec("virtual-write", "echo x > /memory/new.md", timeout_s=10)

    assert listing.stdout.count("README-warroom.txt") == 4
    assert "Read, Glob and Grep" in past.stdout
    assert "read-only" in past.stdout
    assert "Read, Write" in note.stdout
    assert "/skills" in note.stdout
    assert write.exit_code != 0
    assert "Read-only" in write.stderr


async def test_the_system_is_read_only_and_the_workspace_writable(client: SandboxClient) -> None:
    system = await client.exec("system-write", "touch /usr/evil", timeout_s=10)
    workspace = await client.exec(
        "workspace-write", "touch /workspace/fine && echo ok", timeout_s=10
    )

    assert system.exit_code != 0
    assert workspace.stdout == "ok\n"


async def test_the_sandbox_sees_only_its_own_processes(client: SandboxClient) -> None:
    record = await client.exec("pids", "ls /proc | grep -c '^[0-9]'", timeout_s=10)

    assert 0 < int(record.stdout) < 10  # init, server, shell, ls, grep: not the host's
    assert len(await asyncio.to_thread(_host_pids)) > int(record.stdout)


def _host_pids() -> list[str]:
    return [p.name for p in Path("/proc").iterdir() if p.name.isdigit()]
