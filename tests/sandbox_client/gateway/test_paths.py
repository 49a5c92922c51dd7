"""A rule's path prefix holds: the gateway matches and forwards one normal form of the path,
and refuses what servers could still read in different ways.

Through the real gateway, to a real upstream that records the target it received; requests
are written as raw bytes, so no client library tidies the path first.
"""

from __future__ import annotations

import doctest

import pytest

from sandbox_client.gateway import Rules, paths
from tests.sandbox_client.gateway.echo import HOST, Echo, Front, front, raw

TOKEN = "tok-paths-3b9f0e51"


def _rules(echo: Echo) -> str:
    """A credential rule for /public/ over https, and the same over http (allow_plaintext)."""
    return (
        "rules:\n"
        f"  - name: public\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
        "    paths: [/public/]\n    inject: {type: bearer, token: {env: API_TOKEN}}\n"
        f"  - name: public-plain\n    hosts: [{HOST}]\n    ports: [{echo.http_port}]\n"
        "    paths: [/public/]\n    inject: {type: bearer, token: {env: API_TOKEN}}\n"
        "    allow_plaintext: true\n"
    )


async def _inside_tls(gw: Front, echo: Echo, target: str, version: str = "1.1") -> int:
    head = f"GET {target} HTTP/{version}\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
    response = await raw(gw, head.encode(), connect=f"{HOST}:{echo.https_port}")
    return response.status


async def _absolute(gw: Front, echo: Echo, path: str, version: str = "1.1") -> int:
    head = f"GET http://{HOST}:{echo.http_port}{path} HTTP/{version}\r\nHost: {HOST}\r\n\r\n"
    return (await raw(gw, head.encode())).status


ESCAPES = [
    "/public/../private",
    "/public/./../private",
    "/public/%2e%2e/private",
    "/public/%2E%2E/private",
    "/public/.%2e/private",
    "/public/%2e./private",
    "/%70ublic/../private",
    "/public/..%2fprivate",
    "/public/..%2Fprivate",
    "/public/..%5cprivate",
    "/public/..\\private",
    "/public/..;/private",
    "/public;x=1/../private",
    "/public/%3b/../private",
    "/public/%252e%252e/private",
    "/public/%25%32%65%25%32%65/private",
    "/public/%252fprivate",
    "/public/%c0%ae%c0%ae/private",
    "/public/%e0%80%ae%e0%80%ae/private",
    "/public/%u002e%u002e/private",
    "/public/%00/../private",
    "/public/%0d%0aX-Injected:%201",
    "/public/x#/../../private",
    "/public/%",
    "/public/%EF%BC%8E%EF%BC%8E%EF%BC%8Fprivate",
    "/public/%ef%bc%8e%ef%bc%8e/private",
    "/public/%E2%80%A4%E2%80%A4/private",
    "/public/%C0%AF../private",
    "/public/..%c0%af/private",
]


@pytest.mark.parametrize("path", ESCAPES)
async def test_a_path_that_leaves_the_prefix_or_reads_two_ways_is_refused(
    echo: Echo, path: str
) -> None:
    # Given a credential rule for /public/ only
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        # When the path climbs out of it, or hides how it would climb, in origin form inside
        # TLS, in absolute form inside TLS, in absolute form over plain http, and as HTTP/1.0
        statuses = [
            await _inside_tls(gw, echo, path),
            await _inside_tls(gw, echo, f"https://{HOST}:{echo.https_port}{path}"),
            await _absolute(gw, echo, path),
            await _absolute(gw, echo, path, version="1.0"),
        ]
    # Then each was refused, and nothing (no credential) reached the upstream
    assert statuses == [403, 403, 403, 403]
    assert echo.seen == []


@pytest.mark.parametrize(
    ("path", "forwarded"),
    [
        ("/public/a/./b/../c", "/public/a/c"),
        ("/public/a/%2e%2E/c", "/public/c"),
        ("/%70ublic/%7Euser", "/public/~user"),
        ("/public/a%3fb%2a", "/public/a%3Fb%2A"),
        ("/public//x", "/public//x"),
        ("/public/q?path=../../etc&x=%2e%2e%2f", "/public/q?path=../../etc&x=%2e%2e%2f"),
    ],
)
async def test_the_upstream_gets_the_normal_form_the_gateway_matched(
    echo: Echo, path: str, forwarded: str
) -> None:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        status = await _inside_tls(gw, echo, path)
    assert status == 200
    assert [s.target for s in echo.seen] == [forwarded]  # the query is passed as sent
    assert gw.audit[0].path.split("?")[0] == forwarded.split("?")[0]


async def test_a_refusal_says_what_is_ambiguous(echo: Echo) -> None:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        head = f"GET /public/..%2fprivate HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
        response = await raw(gw, head.encode(), connect=f"{HOST}:{echo.https_port}")
    assert response.status == 403
    assert "the path '/public/..%2fprivate' is ambiguous: an encoded / (%2F)" in response.text
    assert "send it in one plain form" in response.text


async def test_an_absolute_target_for_another_host_inside_a_tunnel_is_refused(echo: Echo) -> None:
    # Given a CONNECT to the rule's host, then a request naming another host in absolute form
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        head = f"GET https://elsewhere.example/public/x HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
        response = await raw(gw, head.encode(), connect=f"{HOST}:{echo.https_port}")
    assert response.status == 403
    assert "a request path starts with /" in response.text
    assert echo.seen == []


async def test_a_host_header_naming_another_host_does_not_reach_the_upstream(
    echo: Echo,
) -> None:
    # Given requests whose Host header names another host than the target (or the CONNECT)
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        inside = "GET /public/x HTTP/1.1\r\nHost: evil.example\r\n\r\n"
        await raw(gw, inside.encode(), connect=f"{HOST}:{echo.https_port}")
        plain = (
            f"GET http://{HOST}:{echo.http_port}/public/x HTTP/1.1\r\nHost: evil.example\r\n\r\n"
        )
        await raw(gw, plain.encode())
    # Then the upstream saw the host the gateway judged, not the header's
    assert [s.headers["Host"] for s in echo.seen] == [
        f"{HOST}:{echo.https_port}",
        f"{HOST}:{echo.http_port}",
    ]


async def test_a_body_holding_a_second_request_is_sent_as_one_body(echo: Echo) -> None:
    # Given a chunked POST whose body is a request for a path outside the rule (smuggling)
    rules = _rules(echo).replace(
        "    paths: [/public/]\n", "    paths: [/public/]\n    methods: [GET, POST]\n", 1
    )
    smuggled = f"GET /private HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    chunk = f"{len(smuggled):x}\r\n".encode() + smuggled + b"\r\n0\r\n\r\n"
    head = (
        f"POST /public/x HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        response = await raw(gw, head + chunk, connect=f"{HOST}:{echo.https_port}")
    # Then the upstream received one request, with the bytes as its body
    assert response.status == 200
    assert [(s.target, s.body) for s in echo.seen] == [("/public/x", smuggled)]


async def test_both_content_length_and_chunked_are_not_forwarded(echo: Echo) -> None:
    rules = _rules(echo).replace(
        "    paths: [/public/]\n", "    paths: [/public/]\n    methods: [GET, POST]\n", 1
    )
    head = (
        f"POST /public/x HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 4\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /private HTTP/1.1\r\n\r\n"
    ).encode()
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        await raw(gw, head, connect=f"{HOST}:{echo.https_port}")
    assert all(s.target == "/public/x" for s in echo.seen)


async def test_an_upper_case_scheme_or_no_path_in_absolute_form_is_read_the_same(
    echo: Echo,
) -> None:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        climbing = (
            f"GET HTTP://{HOST}:{echo.http_port}/public/../private HTTP/1.1\r\nHost: a\r\n\r\n"
        )
        bare = f"GET http://{HOST}:{echo.http_port}?x=1 HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
        statuses = [(await raw(gw, line.encode())).status for line in (climbing, bare)]
    # Then the climb is refused and the bare authority is the root, outside /public/
    assert statuses == [403, 403]
    assert echo.seen == []


async def test_a_connect_inside_a_terminated_connection_is_refused(echo: Echo) -> None:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        inner = "CONNECT elsewhere.example:443 HTTP/1.1\r\nHost: elsewhere.example\r\n\r\n"
        response = await raw(gw, inner.encode(), connect=f"{HOST}:{echo.https_port}")
    assert response.status == 403
    assert echo.seen == []


async def test_a_rules_path_prefix_is_matched_in_its_normal_form(echo: Echo) -> None:
    # Given a rule whose prefix is written with an escape of an unreserved character
    rules = (
        f"rules:\n  - name: home\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
        "    paths: [/%7Euser/]\n"
    )
    async with front(echo, rules, {}) as gw:
        head = f"GET /~user/notes HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
        response = await raw(gw, head.encode(), connect=f"{HOST}:{echo.https_port}")
    assert response.status == 200
    assert [s.target for s in echo.seen] == ["/~user/notes"]


def test_an_ambiguous_path_prefix_in_a_rule_is_refused() -> None:
    text = "rules:\n  - name: p\n    hosts: [h]\n    paths: [/public/..%2f]\n"
    with pytest.raises(ValueError, match=r"line 4: .*an encoded / \(%2F\)"):
        Rules.parse(text)


def test_the_paths_examples_hold() -> None:
    result = doctest.testmod(paths)
    assert result.attempted > 0
    assert result.failed == 0
