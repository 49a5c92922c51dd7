"""A rule for a service on the worker's own host (``localhost``, ``127.0.0.1``): reached through
a real jail, the worker's gateway and a real HTTP server on the host's loopback.

Inside a jail the loopback is the jail's own, so a request to ``localhost`` must go through
the gateway (left out of ``NO_PROXY``) for a rule naming it to work at all.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import SecretStr

from bot.durable.wiring import make_provider
from bot.egress import WorkerEgress
from bot.metrics import Metrics
from bot.settings import Settings
from harness import Checkpoint, Requester, SandboxWorkspaces
from memory_store import Database, EgressLog
from sandbox_client import SandboxManager
from tests.conftest import require_bwrap


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A short directory: jail socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="wr-lo-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def local_service() -> AsyncIterator[int]:
    """An HTTP server on the host's 127.0.0.1 (a service a user tests against); its port."""

    async def health(request: web.Request) -> web.Response:
        return web.Response(text=f"ok from the host: {request.method} {request.path}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", health)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server  # aiohttp exposes the bound port only through the server
    assert server is not None
    port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
    try:
        yield port
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
async def test_a_rule_for_a_loopback_host_reaches_the_service_on_the_workers_host(
    data_dir: Path, local_service: int, host: str
) -> None:
    require_bwrap()
    if shutil.which("curl") is None:
        pytest.fail("curl is needed inside the jail (apt-get install curl)")
    # Given a rule for a service on the worker's loopback
    rules = data_dir / "egress.yml"
    rules.write_text(f"rules:\n  - name: dev\n    hosts: [{host}]\n    ports: [{local_service}]\n")
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
        data_dir=data_dir,
        egress_rules=rules,
        anthropic_api_key=SecretStr("sk-ant-test"),
    )
    db = Database.from_url(None, data_dir=data_dir)
    await db.migrate()
    egress = await WorkerEgress.open(settings, db, Metrics())
    assert egress is not None
    provider = make_provider(settings)
    manager = SandboxManager(provider)
    workspaces = SandboxWorkspaces(manager, (), egress)
    cp = Checkpoint(session_id="s-lo", org_id="T1", channel_id="C-INC", requester=Requester("U1"))
    try:
        # When the agent's Bash command curls it, as a person would
        workspace = workspaces.open(cp)
        url = f"http://{host}:{local_service}/health"
        result = await workspace.exec("toolu_lo", f"curl -sS {shlex.quote(url)}", timeout_s=30)
        # and a port no rule names on the same host
        other = await workspace.exec(
            "toolu_lo2", f"curl -s http://{host}:{local_service + 1}/", timeout_s=30
        )
    finally:
        await manager.aclose()
        await provider.destroy_all()  # type: ignore[attr-defined]  # the local provider
        await egress.aclose()
    # Then the service answered, through the gateway (audited under the call)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "ok from the host: GET /health"
    # and the other port was refused by the gateway, saying why
    assert f"no rule allows {host}:{local_service + 1}" in other.stdout
    entries = await EgressLog(db).recent("s-lo")
    assert {(e.tool_use_id, e.rule, e.outcome) for e in entries} == {
        ("toolu_lo", "dev", "allowed"),
        ("toolu_lo2", None, "blocked"),
    }
    await db.dispose()
