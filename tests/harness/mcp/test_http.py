"""Streamable HTTP servers, against the real server-everything listening on a port: tools listed
and called through the pooled client, a server that goes down and comes back, configured headers
(``${VAR}`` expanded) on every request."""

from __future__ import annotations

import pytest

from harness.mcp.errors import McpUnavailable
from harness.mcp.servers import ServerState
from tests.harness.mcp.support import Relay, config_text, http_everything, running, until


async def test_an_http_server_lists_and_calls_its_tools() -> None:
    async with (
        http_everything() as web,
        running(config_text(web={"type": "http", "url": web.url})) as servers,
    ):
        assert servers.states()["web"] == (ServerState.UP, "")
        names = [t.name for t in servers.tools()]
        assert "mcp__web__echo" in names
        assert names == sorted(names)
        echo = await servers.call("mcp__web__echo", {"message": "checkout is slow"})
        assert (echo.text, echo.is_error) == ("Echo: checkout is slow", False)
        total = await servers.call("mcp__web__get-sum", {"a": 2, "b": 40})
        assert "42" in total.text


async def test_an_http_server_that_goes_down_is_left_out_then_comes_back() -> None:
    async with http_everything() as web:
        text = config_text(web={"type": "http", "url": web.url})
        async with running(text, health_interval_s=0.5) as servers:
            # Given the server is up and its tools offered
            assert servers.tools()
            # When the server process dies
            await web.kill()
            # Then the health check marks it down and its tools leave the list
            await until(lambda: servers.states()["web"][0] is ServerState.DOWN, "web is down")
            assert servers.tools() == ()
            with pytest.raises(McpUnavailable, match="server is down"):
                await servers.call("mcp__web__echo", {"message": "x"})
            # And when it starts again on the same port, it is reconnected
            await web.start()
            await until(lambda: servers.states()["web"][0] is ServerState.UP, "web is back")
            again = await servers.call("mcp__web__echo", {"message": "back"})
            assert again.text == "Echo: back"


async def test_a_call_to_a_server_that_restarted_reconnects_it() -> None:
    async with http_everything() as web:
        text = config_text(web={"type": "http", "url": web.url})
        async with running(text, health_interval_s=3600) as servers:
            # Given the server restarted between two calls (its session with us is gone)
            await web.kill()
            await web.start()
            # When a call reaches the new process, it is refused as unavailable, not run
            with pytest.raises(McpUnavailable, match="connection lost"):
                await servers.call("mcp__web__echo", {"message": "x"})
            # Then a new session is opened and the next call works
            await until(lambda: servers.states()["web"][0] is ServerState.UP, "web is back")
            assert (await servers.call("mcp__web__echo", {"message": "ok"})).text == "Echo: ok"


async def test_configured_headers_with_variables_reach_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "s3cret-token")
    async with http_everything() as web, Relay(web.port) as relay:
        text = config_text(
            web={
                "type": "http",
                "url": relay.url,
                "headers": {"Authorization": "Bearer ${MCP_TEST_TOKEN}", "X-Org": "${ORG:-acme}"},
            }
        )
        async with running(text) as servers:
            await servers.call("mcp__web__echo", {"message": "hello"})
    sent = bytes(relay.sent).lower()
    assert sent.count(b"authorization: bearer s3cret-token") >= 2  # listing and the call
    assert b"x-org: acme" in sent
    assert b"${mcp_test_token}" not in sent
