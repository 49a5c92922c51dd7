"""A credential goes only over verified TLS unless its rule says ``allow_plaintext: true``.

Through the real gateway, to a real upstream that records what reached it.
"""

from __future__ import annotations

import pytest

from sandbox_client.gateway import REDACTED, Outcome, Rules
from tests.sandbox_client.gateway.echo import HOST, Echo, front, raw

TOKEN = "tok-plaintext-7d2e91c4"


def _credential_rule(echo: Echo, extra: str = "") -> str:
    return (
        "rules:\n  - name: api\n"
        f"    hosts: [{HOST}]\n    ports: [{echo.https_port}, {echo.http_port}]\n"
        "    inject: {type: bearer, token: {env: API_TOKEN}}\n" + extra
    )


async def test_a_credential_rule_refuses_plain_http_and_the_secret_never_leaves(echo: Echo) -> None:
    async with front(echo, _credential_rule(echo), {"API_TOKEN": TOKEN}) as gw:
        # Given a credential rule covering a port that speaks plain HTTP
        # When the sandbox asks for http:// on it (as an attacker would, to read the secret)
        plain = await raw(
            gw, f"GET http://{HOST}:{echo.http_port}/x HTTP/1.1\r\nHost: a\r\n\r\n".encode()
        )
        # and for https:// on the TLS port
        tls = await raw(
            gw,
            f"GET /x HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode(),
            connect=f"{HOST}:{echo.https_port}",
        )
    # Then the plain request was refused saying how to send it, and never reached the upstream
    assert plain.status == 403
    assert "sends its secret over https only" in plain.text
    assert f"use https://{HOST}:{echo.http_port}/x" in plain.text
    assert [s.headers["Authorization"] for s in echo.seen] == [f"Bearer {TOKEN}"]
    assert tls.status == 200
    assert TOKEN not in tls.text
    assert [r.outcome for r in gw.audit] == [Outcome.BLOCKED, Outcome.INJECTED]


async def test_http_to_the_tls_port_of_a_credential_rule_is_refused(echo: Echo) -> None:
    # Given the example: http://host:443/, the TLS port reached in clear
    async with front(echo, _credential_rule(echo), {"API_TOKEN": TOKEN}) as gw:
        request = f"GET http://{HOST}:{echo.https_port}/ HTTP/1.1\r\nHost: a\r\n\r\n"
        response = await raw(gw, request.encode())
    # Then it is refused before any connection: nothing reached the upstream
    assert response.status == 403
    assert echo.seen == []


async def test_allow_plaintext_lets_a_credential_go_over_http(echo: Echo) -> None:
    rules = _credential_rule(echo, "    allow_plaintext: true\n")
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        response = await raw(
            gw, f"GET http://{HOST}:{echo.http_port}/x HTTP/1.1\r\nHost: a\r\n\r\n".encode()
        )
    assert response.status == 200
    assert f"Bearer {REDACTED.decode()}" in response.text
    assert echo.seen[0].headers["Authorization"] == f"Bearer {TOKEN}"


async def test_plain_http_falls_to_a_later_allow_rule_without_the_secret(echo: Echo) -> None:
    # Given a credential rule and, after it, an allow rule for the same host
    rules = _credential_rule(echo) + (
        f"  - name: open\n    hosts: [{HOST}]\n    ports: [{echo.http_port}]\n"
    )
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        # When the sandbox asks for http:// with its own guess at a credential
        request = (
            f"GET http://{HOST}:{echo.http_port}/x HTTP/1.1\r\nHost: a\r\n"
            "Authorization: Bearer guessed\r\n\r\n"
        )
        response = await raw(gw, request.encode())
    # Then the allow rule passed it as sent: the rule's secret was not added
    assert response.status == 200
    assert echo.seen[0].headers["Authorization"] == "Bearer guessed"
    assert gw.audit[0].rule == "open"
    assert gw.audit[0].outcome is Outcome.ALLOWED


async def test_connect_to_a_plain_port_of_a_credential_rule_never_sends_the_secret(
    echo: Echo,
) -> None:
    # Given a credential rule on a port that speaks plain HTTP
    async with front(echo, _credential_rule(echo), {"API_TOKEN": TOKEN}) as gw:
        # When the sandbox CONNECTs to it and sends its request inside TLS to the gateway
        response = await raw(
            gw,
            f"GET /x HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode(),
            connect=f"{HOST}:{echo.http_port}",
        )
    # Then the gateway's TLS to the upstream failed, so nothing was sent in clear
    assert response.status == 502
    assert echo.seen == []


async def test_an_https_url_sent_to_the_plain_proxy_port_is_not_forwarded(echo: Echo) -> None:
    # Given a client that sends GET https://… without CONNECT (asking the proxy to do TLS)
    async with front(echo, _credential_rule(echo), {"API_TOKEN": TOKEN}) as gw:
        request = f"GET https://{HOST}:{echo.https_port}/x HTTP/1.1\r\nHost: a\r\n\r\n"
        response = await raw(gw, request.encode())
    assert response.status == 400
    assert echo.seen == []


def test_allow_plaintext_is_refused_on_a_rule_without_a_credential() -> None:
    text = "rules:\n  - name: open\n    hosts: [h]\n    allow_plaintext: true\n"
    with pytest.raises(ValueError, match="allow_plaintext is for credential rules"):
        Rules.parse(text)
