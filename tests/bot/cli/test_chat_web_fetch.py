"""``warroom chat`` end to end with WebFetch: the fake model calls it, the page comes from a
real HTTPS server on loopback through the chat worker's egress gateway (its rules file), and
the small model's answer goes back to the agent."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from sandbox_client.gateway import CertificateAuthority
from tests.bot.cli_support import start, warroom_env
from tests.conftest import require_bwrap

HOST = "127.0.0.2"  # inside a jail 127.0.0.1 and localhost are not proxied
PAGE = "<html><body><h1>Runbook</h1><p>Restart the <b>payments</b> worker first.</p></body></html>"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="wr-cwf-"))  # jail socket paths stay under 108 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def site(data_dir: Path) -> AsyncIterator[tuple[int, Path]]:
    """An HTTPS page server with its own CA: (port, the CA's certificate file)."""
    authority = CertificateAuthority.create("runbook test CA")

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/runbook", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    context: ssl.SSLContext = authority.server_context(HOST)
    tcp = web.TCPSite(runner, HOST, 0, ssl_context=context)
    await tcp.start()
    port: int = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    ca_file = data_dir / "site-ca.pem"
    ca_file.write_bytes(authority.cert_pem())
    yield port, ca_file
    await runner.cleanup()


@pytest.mark.slow
async def test_chat_runs_webfetch_through_the_gateway_and_the_agent_gets_the_small_models_answer(
    data_dir: Path, site: tuple[int, Path]
) -> None:
    require_bwrap()
    port, ca_file = site
    rules = data_dir / "egress.yml"
    rules.write_text(f"rules:\n  - name: runbooks\n    hosts: [{HOST}]\n    ports: [{port}]\n")
    url = f"http://{HOST}:{port}/runbook"

    def model(request: RecordedRequest) -> Reply:
        said = json.dumps(request.messages)
        if request.body["model"] == "claude-haiku-5-5":  # the small model reads the page
            if "# Runbook" in said and "**payments**" in said:
                return Reply.text("Restart payments first.")
            return Reply.text("Nothing about restarts.")
        if "tool_result" not in said:
            return Reply.tool("WebFetch", {"url": url, "prompt": "What to restart first?"})
        if "Restart payments first." in said:
            return Reply.text("The runbook says: restart payments first.")
        return Reply.text("The fetch failed.")

    async with FakeAnthropicAPI(model, api_key="fake-key") as fake:
        env = warroom_env(
            data_dir / "data",
            ANTHROPIC_API_KEY="fake-key",
            ANTHROPIC_BASE_URL=fake.base_url,
            WARROOM_EGRESS_RULES=str(rules),
            WARROOM_EGRESS_UPSTREAM_CA=str(ca_file),
        )
        chat = await start("chat", env=env, cwd=data_dir, stdin=True)
        stdout, stderr = await asyncio.wait_for(chat.communicate(b"payments is down\n"), 120)

    assert chat.returncode == 0, stderr.decode()
    assert "warroom> The runbook says: restart payments first." in stdout.decode()
    models = [r.body["model"] for r in fake.requests]
    assert models.count("claude-haiku-5-5") == 1
