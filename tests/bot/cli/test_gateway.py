"""``warroom gateway``: the egress gateway for remote sandboxes, as its own process."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from bot.egress import gateway_dir
from bot.settings import Settings
from memory_store import Database, EgressLog, EgressTokens
from sandbox_client.gateway import CallCredentials, CertificateAuthority
from tests.bot.cli_support import Output, finish, start, warroom_env
from tests.memory_store.test_egress import live_session
from tests.ports import free_port as _free_port


@pytest.mark.slow
async def test_the_gateway_serves_live_tokens_and_refuses_revoked_ones(tmp_path: Path) -> None:
    # Given a rules file, a database, and two sessions' tokens (one revoked)
    rules = tmp_path / "egress.yml"
    rules.write_text("rules:\n  - name: status\n    hosts: [status.internal]\n")
    data = tmp_path / "data"
    db = Database.from_url(None, data_dir=data)
    await db.migrate()
    tokens = EgressTokens(db)
    await live_session(db, "s-live")
    untagged = await tokens.issue("s-live", "C-1")  # as issued before tokens had a tag
    port = _free_port()
    env = warroom_env(
        data, WARROOM_EGRESS_RULES=str(rules), WARROOM_GATEWAY_LISTEN=f"127.0.0.1:{port}"
    )
    # And the deployment's CA, which the workers share with the gateway (as their key)
    settings = Settings(_env_file=None, data_dir=data)  # type: ignore[call-arg]
    authority = CertificateAuthority.load_or_create(gateway_dir(settings))
    calls = CallCredentials.derived_from(authority.key)
    live = await tokens.issue("s-live", "C-1", sign=calls.signed_token)  # as workers do
    dead = await tokens.issue("s-dead", "C-1", sign=calls.signed_token)
    await tokens.revoke("s-dead")
    forged = live[:-2] + ("AA" if not live.endswith("AA") else "BB")
    # When the gateway runs as its own process
    gateway = await start("gateway", env=env, cwd=tmp_path)
    assert gateway.stderr is not None
    await Output(gateway.stderr).until(lambda text: "egress gateway listening" in text)
    statuses = []
    try:
        for userinfo in (
            calls.userinfo("s-live", "toolu_7", password_prefix=f"{live}."),  # a worker's
            f"toolu_8:{live}",  # a call id named, without its credential
            f"toolu_9:{live}.{calls.issue('s-live', 'toolu_8')}",  # another call's credential
            calls.userinfo("s-dead", "toolu_1", password_prefix=f"{dead}."),  # revoked
            calls.userinfo("s-live", "toolu_5", password_prefix=f"{forged}."),  # a wrong tag
            calls.userinfo("s-live", "toolu_6", password_prefix=f"{untagged}."),  # no tag
        ):
            async with httpx.AsyncClient(
                proxy=f"http://{userinfo}@127.0.0.1:{port}", trust_env=False
            ) as client:
                statuses.append((await client.get("http://status.internal:9/")).status_code)
    finally:
        gateway.send_signal(signal.SIGTERM)
        code = await finish(gateway)
    # Then the live token's requests were decided by the rules (port 9 has no rule: 403) and
    # audited under the call its credential proves, or none; a credential not the named
    # call's, a revoked token, and one whose tag is not the deployment's never got that
    # far; a token from before tags is still served (its session began before the upgrade)
    assert statuses == [403, 403, 407, 407, 407, 403]
    entries = await EgressLog(db).recent("s-live")
    assert [(e.tool_use_id, e.status) for e in entries] == [
        ("toolu_7", 403),
        (None, 403),
        (None, 407),
        ("toolu_6", 403),
    ]
    assert await EgressLog(db).recent("s-dead") == []
    assert code == 0
    await db.dispose()


@pytest.mark.slow
async def test_on_sigterm_the_gateway_finishes_the_request_in_flight_then_exits_0(
    tmp_path: Path,
) -> None:
    # Given an upstream that holds its answer until told, allowed by a rule
    arrived, release = asyncio.Event(), asyncio.Event()

    async def slow(_: web.Request) -> web.Response:
        arrived.set()
        await release.wait()
        return web.Response(text="late but whole")

    app = web.Application()
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    upstream_port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", upstream_port).start()
    rules = tmp_path / "egress.yml"
    rules.write_text(
        f"rules:\n  - name: slow\n    hosts: [127.0.0.1]\n    ports: [{upstream_port}]\n"
    )
    data = tmp_path / "data"
    db = Database.from_url(None, data_dir=data)
    await db.migrate()
    await live_session(db, "s-live")
    token = await EgressTokens(db).issue("s-live", "C-1")
    port = _free_port()
    env = warroom_env(
        data, WARROOM_EGRESS_RULES=str(rules), WARROOM_GATEWAY_LISTEN=f"127.0.0.1:{port}"
    )
    gateway = await start("gateway", env=env, cwd=tmp_path)
    assert gateway.stderr is not None
    log = Output(gateway.stderr)
    await log.until(lambda text: "egress gateway listening" in text)
    try:
        async with httpx.AsyncClient(
            proxy=f"http://toolu_1:{token}@127.0.0.1:{port}", trust_env=False, timeout=30
        ) as client:
            request = asyncio.ensure_future(client.get(f"http://127.0.0.1:{upstream_port}/slow"))
            await asyncio.wait_for(arrived.wait(), 30)
            # When SIGTERM comes while the request is upstream
            gateway.send_signal(signal.SIGTERM)
            await log.until(lambda text: "egress gateway stopping" in text)
            release.set()
            response = await request
        code = await finish(gateway)
    finally:
        if gateway.returncode is None:
            gateway.kill()
        await runner.cleanup()
        await db.dispose()
    # Then the request got its whole answer, and the gateway stopped as a service does: 0
    assert (response.status_code, response.text) == (200, "late but whole")
    assert code == 0
