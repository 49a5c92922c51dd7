"""WebFetch through the real egress gateway: a bubblewrap jail's ``curl``, a worker's gateway
built from its settings, an HTTPS upstream with its own CA on loopback, the fake Messages API
as the small model, and the model-call ledger in the database."""

from __future__ import annotations

import json
import shutil
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import SecretStr

from bot.durable.wiring import make_provider, make_small_model
from bot.egress import WorkerEgress
from bot.fakes.anthropic_api import FakeAnthropicAPI, RecordedRequest, Reply
from bot.metrics import Metrics
from bot.settings import Settings
from harness import AnthropicModel, Checkpoint, MeteredModel, Requester, SandboxWorkspaces
from harness.tools.contract import ToolContext
from harness.tools.toolbox import run_tool
from memory_store import Database, FileStore, ModelCallLog, SessionKey
from sandbox_client import SandboxManager
from sandbox_client.gateway import CertificateAuthority
from tests.conftest import require_bwrap

HOST = "127.0.0.2"  # inside a jail 127.0.0.1 and localhost are not proxied
OTHER = "127.0.0.3"  # no rule names it
SECRET = "web-token-8f02c1d5"
SESSION = "s-webfetch"
PAGE = (
    "<html><head><title>Status</title><style>p {color: red}</style></head><body>"
    "<h1>Checkout status</h1><p>The <b>checkout-api</b> is degraded since 14:02.</p>"
    f"<script>var leaked = '{SECRET}';</script>"
    "<ul><li>pods: 3/5 ready</li></ul></body></html>"
)


@dataclass
class Upstream:
    port: int = 0
    ca_file: Path | None = None
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, auth


@dataclass
class Scene:
    upstream: Upstream
    ctx: ToolContext
    fake: FakeAnthropicAPI
    ledger: ModelCallLog


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="wr-wf-"))  # jail socket paths stay under 108 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def upstream(data_dir: Path) -> AsyncIterator[Upstream]:
    up = Upstream()
    authority = CertificateAuthority.create("upstream test CA")

    async def page(request: web.Request) -> web.Response:
        up.seen.append((request.method, request.path, request.headers.get("Authorization", "")))
        if request.path == "/moved":
            raise web.HTTPFound("/status")
        if request.path == "/away":
            raise web.HTTPMovedPermanently(f"https://{OTHER}:{up.port}/status")
        if request.path == "/missing":
            raise web.HTTPNotFound()
        if request.path == "/big":  # 1.5 MB
            return web.Response(text="<p>" + "incident " * 170_000, content_type="text/html")
        auth = request.headers.get("Authorization", "")
        return web.Response(text=PAGE + f"<p>auth: {auth}</p>", content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    context: ssl.SSLContext = authority.server_context(HOST)
    site = web.TCPSite(runner, HOST, 0, ssl_context=context)
    await site.start()
    up.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    up.ca_file = data_dir / "upstream-ca.pem"
    up.ca_file.write_bytes(authority.cert_pem())
    yield up
    await runner.cleanup()


def reader(request: RecordedRequest) -> Reply:
    """The small model: answers from the page it was given (says what it saw)."""
    text = json.dumps(request.messages)
    if "Checkout status" in text and "3/5 ready" in text:
        return Reply.text("checkout-api is degraded since 14:02; 3/5 pods ready.")
    return Reply.text("The page does not say.")


@pytest.fixture
async def scene(
    data_dir: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Scene]:
    require_bwrap()
    monkeypatch.setenv("WEB_TOKEN", SECRET)
    rules = data_dir / "egress.yml"
    rules.write_text(
        "rules:\n"
        f"  - name: status\n    hosts: [{HOST}]\n    ports: [{upstream.port}]\n"
        "    inject: {type: bearer, token: {env: WEB_TOKEN}}\n"
    )
    async with FakeAnthropicAPI(reader, api_key="fake-key") as fake:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]  # pydantic-settings' init option
            data_dir=data_dir,
            egress_rules=rules,
            egress_upstream_ca=upstream.ca_file,
            anthropic_api_key=SecretStr("fake-key"),
            anthropic_base_url=fake.base_url,
        )
        db = Database.from_url(None, data_dir=data_dir)
        await db.migrate()
        egress = await WorkerEgress.open(settings, db, Metrics())
        assert egress is not None
        small = make_small_model(settings)
        assert small is not None
        provider = make_provider(settings)
        manager = SandboxManager(provider)
        cp = Checkpoint(SESSION, "T1", "C1", Requester("U1"))
        ledger = ModelCallLog(db)
        try:
            workspace = SandboxWorkspaces(manager, (), egress).open(cp)
            metered = MeteredModel(small, ledger, SESSION, SessionKey("T1", "C1", SESSION))
            ctx = ToolContext.for_session(
                cp, FileStore(db), workspace, "toolu_wf1", small_model=metered
            )
            yield Scene(upstream, ctx, fake, ledger)
        finally:
            await manager.aclose()
            await provider.destroy_all()  # type: ignore[attr-defined]  # the local provider
            await egress.aclose()
            await small.aclose()
            await db.dispose()


@pytest.mark.slow
async def test_a_page_is_fetched_through_the_gateway_converted_and_answered_by_the_small_model(
    scene: Scene,
) -> None:
    # Given a rule for the status host, which adds a credential; and an http:// URL
    url = f"http://{HOST}:{scene.upstream.port}/moved"

    outcome = await run_tool("WebFetch", {"url": url, "prompt": "How is checkout?"}, scene.ctx)

    # Then the small model's answer is the result
    assert not outcome.is_error, outcome.content
    assert outcome.content == "checkout-api is degraded since 14:02; 3/5 pods ready."
    # fetched over https (upgraded), the same-host redirect followed, the credential added
    assert [(m, p) for m, p, _ in scene.upstream.seen] == [("GET", "/moved"), ("GET", "/status")]
    assert scene.upstream.seen[-1][2] == f"Bearer {SECRET}"
    # the small model read markdown: no tags, no script, the credential scrubbed
    (request,) = scene.fake.requests
    assert request.body["model"] == "claude-haiku-5-5"
    read = request.messages[0]["content"][0]["text"]
    assert "# Checkout status" in read
    assert "**checkout-api**" in read
    assert "* pods: 3/5" in read
    assert "<p>" not in read
    assert "color: red" not in read
    assert SECRET not in read
    assert "How is checkout?" in read
    # and the call is on the ledger, priced
    spend = await scene.ledger.session(SESSION)
    assert (spend.calls, spend.unpriced_calls) == (1, 0)
    assert spend.cost_nanousd > 0


@pytest.mark.slow
async def test_a_url_no_rule_allows_gets_the_gateways_refusal(scene: Scene) -> None:
    url = f"https://{OTHER}:{scene.upstream.port}/status"

    outcome = await run_tool("WebFetch", {"url": url, "prompt": "status?"}, scene.ctx)

    assert outcome.is_error
    assert outcome.content.startswith("<tool_use_error>Blocked by the warroom egress gateway:")
    assert OTHER in outcome.content
    assert scene.fake.requests == []  # no model call for a page never fetched


@pytest.mark.slow
async def test_a_redirect_to_another_host_is_reported_not_followed(scene: Scene) -> None:
    url = f"https://{HOST}:{scene.upstream.port}/away"

    outcome = await run_tool("WebFetch", {"url": url, "prompt": "status?"}, scene.ctx)

    assert not outcome.is_error
    assert outcome.content.startswith(
        "REDIRECT DETECTED: The URL redirects to a location that was not fetched automatically."
    )
    assert f'    - url: "https://{OTHER}:{scene.upstream.port}/status"' in outcome.content
    assert [p for _, p, _ in scene.upstream.seen] == ["/away"]


@pytest.mark.slow
async def test_an_error_status_is_said_as_claude_code_says_it(scene: Scene) -> None:
    url = f"https://{HOST}:{scene.upstream.port}/missing"

    outcome = await run_tool("WebFetch", {"url": url, "prompt": "status?"}, scene.ctx)

    assert not outcome.is_error  # Claude Code 2.1.336: a result, the body not read
    assert outcome.content.startswith("The server returned HTTP 404 Not Found.\n\n")
    assert scene.fake.requests == []  # no model call for a body never read


@pytest.mark.slow
async def test_a_large_page_is_cut_with_notes_and_offset_reads_on(scene: Scene) -> None:
    url = f"https://{HOST}:{scene.upstream.port}/big"

    first = await run_tool("WebFetch", {"url": url, "prompt": "gist?"}, scene.ctx)
    args = {"url": url, "prompt": "gist?", "offset": 950_000}
    later = await run_tool("WebFetch", args, replace(scene.ctx, tool_use_id="toolu_wf2"))

    assert not first.is_error, first.content
    assert not later.is_error, later.content
    head, tail = (r.messages[0]["content"][0]["text"] for r in scene.fake.requests)
    assert len(head) < 101_000
    assert "[Page cut: only its first 1000000 bytes were read.]" in tail
    # The answer says what it did not read, as Claude Code 2.1.336 does
    assert "[WebFetch note: this page's text is " in first.content
    assert "covers only characters 0 to 100000; the final " in first.content
    assert first.content.endswith("call WebFetch again with the same url and offset: 100000.]")


@pytest.mark.slow
async def test_a_url_is_one_request_of_curl_never_shell_nor_a_glob(scene: Scene) -> None:
    # Given URLs carrying shell syntax, a curl glob and a curl option
    base = f"https://{HOST}:{scene.upstream.port}"
    urls = (
        f"{base}/a$(touch${{IFS}}pwned)'`touch${{IFS}}pwned2`",
        f"{base}/g[1-3]",
        "-K/etc/passwd https://x.io",
    )
    for n, url in enumerate(urls):
        ctx = replace(scene.ctx, tool_use_id=f"toolu_wf_url{n}")
        await run_tool("WebFetch", {"url": url, "prompt": "p"}, ctx)

    # Then each of the first two reached the server once, as a path; the third is no URL
    paths = [p for _, p, _ in scene.upstream.seen]
    assert paths == ["/a$(touch${IFS}pwned)'`touch${IFS}pwned2`", "/g[1-3]"]
    listing = await scene.ctx.workspace.exec("ls", "ls -a /workspace", timeout_s=30)
    assert "pwned" not in listing.stdout


@pytest.mark.slow
async def test_a_small_model_the_api_refuses_is_a_tool_error_not_a_crash(scene: Scene) -> None:
    # Given a WARROOM_SMALL_MODEL the API does not know
    unknown = AnthropicModel(
        api_key="fake-key", model="claude-nope-9", base_url=scene.fake.base_url, max_attempts=1
    )
    ctx = replace(scene.ctx, small_model=unknown)
    url = f"https://{HOST}:{scene.upstream.port}/status"
    try:
        outcome = await run_tool("WebFetch", {"url": url, "prompt": "p"}, ctx)
    finally:
        await unknown.aclose()

    assert outcome.is_error
    assert "The model reading the page refused the request" in outcome.content
