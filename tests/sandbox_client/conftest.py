"""Fixtures for real local sandboxes (bubblewrap jails running the SBX/1 server).

Provisioning costs about a tenth of a second, so one sandbox (``sandbox``) is shared by
a test module; tests that change a sandbox's life (freeze, kill, replace) make their
own with ``provision``. A sandbox is a detached process tree, not tied to an event
loop: sync fixtures make and destroy them with ``asyncio.run``, and each test connects
its own client on its own loop.

Without ``bwrap`` the tests skip with a loud reason, or fail when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sandbox_client import (
    ClientOptions,
    LocalConfig,
    LocalProvider,
    SandboxClient,
    SandboxHandle,
)
from tests.conftest import require_bwrap

CAP_BYTES = 256 * 1024


@pytest.fixture(scope="session")
def state_dir() -> Iterator[Path]:
    """A short directory for sandbox state (Unix socket paths must stay < 108 bytes)."""
    require_bwrap()
    path = Path(tempfile.mkdtemp(prefix="wr-sbx-"))
    yield path
    # a test that failed half-way may have left a jail: end it too
    asyncio.run(LocalProvider(LocalConfig(state_dir=path)).destroy_all())
    shutil.rmtree(path, ignore_errors=True)


def local_config(state_dir: Path, **overrides: object) -> LocalConfig:
    """The test configuration: no network, small output cap, short keepalive."""
    settings: dict[str, object] = {
        "state_dir": state_dir,
        "network": "none",
        "max_output_bytes": CAP_BYTES,
        "keepalive_s": 0.5,
        "client": ClientOptions(request_timeout_s=5.0, stream_idle_timeout_s=5.0),
    }
    settings.update(overrides)
    return LocalConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def provider(state_dir: Path) -> LocalProvider:
    """The shared local provider (freezer detected)."""
    return LocalProvider(local_config(state_dir))


@pytest.fixture(scope="module")
def sandbox(provider: LocalProvider, request: pytest.FixtureRequest) -> Iterator[SandboxHandle]:
    """One sandbox shared by the tests of a module."""
    name = f"m-{request.module.__name__.rsplit('.', 1)[-1].replace('_', '-')}"[:60]
    handle = asyncio.run(provider.provision(name))
    yield handle
    asyncio.run(provider.destroy(handle))


@pytest.fixture
async def client(provider: LocalProvider, sandbox: SandboxHandle) -> AsyncIterator[SandboxClient]:
    """A client of the module's sandbox, on this test's loop."""
    async with provider.connect(sandbox) as sandbox_client:
        yield sandbox_client


@pytest.fixture
async def fresh(
    provider: LocalProvider, request: pytest.FixtureRequest
) -> AsyncIterator[SandboxHandle]:
    """A sandbox of this test's own (destroyed afterwards)."""
    name = f"t-{request.node.name}"[:50].replace("[", "-").replace("]", "").replace("_", "-")
    handle = await provider.provision(name)
    yield handle
    await provider.destroy(handle)


async def wait_for(condition: object, timeout_s: float = 30.0, what: str = "condition") -> None:
    """Poll ``condition()`` (sync or async) until true; fail after ``timeout_s``."""
    assert callable(condition)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.005)
