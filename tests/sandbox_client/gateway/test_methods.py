"""A read-only rule stays read-only: the gateway judges the method a server would act on,
overrides included (headers and ``_method`` parameters).

Through the real gateway, to a real upstream that records what reached it.
"""

from __future__ import annotations

import doctest
import tracemalloc

import pytest

from sandbox_client.gateway import effective_method, methods
from sandbox_client.gateway.methods import AmbiguousMethod, Unjudgeable
from tests.sandbox_client.gateway.echo import HOST, Echo, Front, front, raw

TOKEN = "tok-methods-c81a2f07"


def _rules(echo: Echo) -> str:
    return (
        "rules:\n"
        f"  - name: api\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
        "    paths: [/api/]\n    inject: {type: bearer, token: {env: API_TOKEN}}\n"
        f"  - name: forms\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
        "    paths: [/forms/]\n    methods: [GET, POST]\n"
        "    inject: {type: bearer, token: {env: API_TOKEN}}\n"
    )


async def _send(
    gw: Front, echo: Echo, verb: str, target: str, extra: str = "", body: bytes = b""
) -> int:
    head = f"{verb} {target} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n{extra}"
    if body or verb == "POST":
        head += f"Content-Length: {len(body)}\r\n"
    response = await raw(
        gw, head.encode() + b"\r\n" + body, connect=f"{HOST}:{echo.https_port}", method=verb
    )
    return response.status


OVERRIDES = [
    ("GET", "/api/x", "X-HTTP-Method-Override: DELETE\r\n", b""),
    ("GET", "/api/x", "x-http-method-override: delete\r\n", b""),
    ("GET", "/api/x", "X-HtTp-MeThOd-OvErRiDe:  Delete \r\n", b""),
    ("GET", "/api/x", "X-HTTP-Method: PUT\r\n", b""),
    ("GET", "/api/x", "X-Method-Override: PATCH\r\n", b""),
    ("HEAD", "/api/x", "X-HTTP-Method-Override: DELETE\r\n", b""),
    ("GET", "/api/x", "X-HTTP-Method-Override: GET, DELETE\r\n", b""),
    ("GET", "/api/x", "X-HTTP-Method-Override: GET\r\nX-HTTP-Method-Override: DELETE\r\n", b""),
    ("GET", "/api/x", "X_HTTP_METHOD_OVERRIDE: DELETE\r\n", b""),
    ("GET", "/api/x?a=1;_method=DELETE", "", b""),
    ("GET", "/api/x?_method=DELETE", "", b""),
    ("GET", "/api/x?%5Fmethod=delete", "", b""),
    ("GET", "/api/x?%5fMETHOD=Delete", "", b""),
    ("GET", "/api/x?a=1&_method=PUT&b=2", "", b""),
    ("GET", "/api/x?_method=DEL%45TE", "", b""),
    ("POST", "/forms/x", "Content-Type: application/x-www-form-urlencoded\r\n", b"_method=DELETE"),
    (
        "POST",
        "/forms/x",
        "Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n",
        b"a=1&%5Fmethod=put",
    ),
    ("POST", "/forms/x", "", b"_method=PATCH"),
    ("POST", "/forms/x", "Content-Type: application/x-www-form-urlencoded\r\n", b"a=1;_method=PUT"),
    (
        "POST",
        "/forms/x",
        "Content-Type: application/x-www-form-urlencoded\r\n",
        b"_method=+DELETE+",
    ),
    (
        "POST",
        "/forms/x",
        "Content-Type: multipart/form-data; boundary=zz\r\n",
        b'--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--zz--\r\n',
    ),
    ("POST", "/api/x", "X-HTTP-Method-Override: GET\r\n", b""),
    ("POST", "/forms/x", "X-HTTP-Method-Override: DELETE\r\n", b""),
]


@pytest.mark.parametrize(("verb", "target", "headers", "body"), OVERRIDES)
async def test_an_override_to_a_method_the_rule_does_not_allow_is_refused(
    echo: Echo, verb: str, target: str, headers: str, body: bytes
) -> None:
    # Given rules that allow GET/HEAD on /api/ and GET/POST on /forms/
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        # When a request's verb is allowed but it asks for another method by an override
        status = await _send(gw, echo, verb, target, headers, body)
    # Then it was refused, and nothing reached the upstream
    assert status == 403
    assert echo.seen == []


async def test_a_refusal_names_the_override(echo: Echo) -> None:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        head = f"GET /api/x HTTP/1.1\r\nHost: {HOST}\r\nX-HTTP-Method-Override: DELETE\r\n\r\n"
        response = await raw(gw, head.encode(), connect=f"{HOST}:{echo.https_port}")
    assert response.status == 403
    assert "DELETE is not allowed to localhost (only GET, HEAD, POST)" in response.text
    assert "a GET asking for DELETE by a method override" in response.text
    assert gw.audit[0].method == "DELETE"


async def test_overrides_that_disagree_are_refused(echo: Echo) -> None:
    rules = _rules(echo).replace("methods: [GET, POST]", "methods: [GET, POST, PUT, DELETE]")
    async with front(echo, rules, {"API_TOKEN": TOKEN}) as gw:
        head = (
            f"POST /forms/x?_method=PUT HTTP/1.1\r\nHost: {HOST}\r\n"
            "X-HTTP-Method-Override: DELETE\r\nContent-Length: 0\r\n\r\n"
        )
        response = await raw(gw, head.encode(), connect=f"{HOST}:{echo.https_port}")
    assert response.status == 403
    assert "several methods at once: DELETE, PUT" in response.text
    assert echo.seen == []


async def test_a_request_without_an_override_or_with_its_own_verb_passes(echo: Echo) -> None:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        statuses = [
            await _send(gw, echo, "GET", "/api/x?method=DELETE&x_method=PUT"),
            await _send(gw, echo, "GET", "/api/x", "X-HTTP-Method-Override: GET\r\n"),
            await _send(
                gw, echo, "POST", "/forms/x", "Content-Type: application/json\r\n", b'{"a": 1}'
            ),
        ]
    assert statuses == [200, 200, 200]
    assert [s.method for s in echo.seen] == ["GET", "GET", "POST"]


async def test_an_override_a_rule_allows_is_judged_a_change_for_approval(echo: Echo) -> None:
    # Given a credential rule that allows DELETE, and a gateway that asks for approval
    rules = _rules(echo).replace("methods: [GET, POST]", "methods: [GET, POST, DELETE]")
    asked: list[str] = []

    async def approved(session_id: str, tool_use_id: str) -> bool:
        asked.append(tool_use_id)
        return False

    async with front(echo, rules, {"API_TOKEN": TOKEN}, approved=approved) as gw:
        # When a GET asks for DELETE by an override, outside any approved call
        status = await _send(gw, echo, "GET", "/forms/x", "X-HTTP-Method-Override: DELETE\r\n")
    # Then it is a change from no approved call's own process (it carries no call's
    # credential, so there is no call to ask about): refused, as a GET would not be
    assert status == 403
    assert asked == []
    assert echo.seen == []


async def test_inside_a_connect_to_an_allow_rule_methods_and_overrides_are_checked(
    echo: Echo,
) -> None:
    # Given an allow rule (no credential, not a tunnel): the gateway terminates its TLS too
    rules = f"rules:\n  - name: open\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
    async with front(echo, rules, {}) as gw:
        # When the sandbox sends a DELETE, a GET overridden to DELETE, and OPTIONS *
        statuses = [
            await _send(gw, echo, "DELETE", "/x"),
            await _send(gw, echo, "GET", "/x", "X-HTTP-Method-Override: DELETE\r\n"),
            await _send(gw, echo, "OPTIONS", "*"),
        ]
    # Then each was refused inside the tunnel, and nothing reached the upstream
    assert statuses == [403, 403, 403]
    assert echo.seen == []


def test_effective_method_is_the_override_for_others_to_call() -> None:
    assert effective_method("GET", [("X-HTTP-Method-Override", "delete")]) == "DELETE"
    assert effective_method("get") == "GET"
    with pytest.raises(AmbiguousMethod):
        effective_method("GET", [(b"x-http-method", b"PUT")], "_method=DELETE")


def test_the_methods_examples_hold() -> None:
    result = doctest.testmod(methods)
    assert result.attempted > 0
    assert result.failed == 0


FORM = [(b"content-type", b"application/x-www-form-urlencoded")]


@pytest.mark.parametrize(
    ("query", "body"),
    [
        ("_%6Dethod=DELETE", b""),
        ("", b"a=1&%5F%6d%65%74%68%6f%64=delete"),
        ("", b"_metho%64=DELETE"),
    ],
)
def test_an_override_whose_name_is_percent_encoded_in_any_letter_is_seen(
    query: str, body: bytes
) -> None:
    # A server decodes a parameter's name before it looks for ``_method``
    assert effective_method("POST", FORM, query, body) == "DELETE"


def test_a_form_body_is_judged_without_holding_a_pair_list_of_it() -> None:
    # Given a 2 MiB form body of tiny pairs, one of them an override
    body = b"_method=GET&" + b"ab&" * (2 * 1024 * 1024 // 3)
    # When the gateway looks in it for a _method
    tracemalloc.start()
    try:
        found = effective_method("POST", FORM, "", body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Then it finds it, holding a fraction of the body (a list of every pair was ~50 times)
    assert found == "GET"
    assert peak < len(body), f"peak {peak} bytes for a {len(body)}-byte body"


@pytest.mark.parametrize(
    ("headers", "body", "why"),
    [
        (
            [(b"content-type", b"application/x-www-form-urlencoded, a/b1, a/b2, a/b3, a/b4")],
            b"_method=GET",
            "5 content types",
        ),
        (FORM, b"&".join([b"_method=GET"] * 17), "more than 16 _method parameters"),
        (
            [(b"content-type", b"multipart/form-data; boundary=zz")],
            b"_method" + b"--zz\r\n\r\nx\r\n" * 258,
            "a multipart body of more than 256 parts",
        ),
        (
            [(b"content-type", b"multipart/form-data; boundary=zz")],
            b"--zz\r\nX-Pad: " + b"a" * 17_000 + b"\r\n\r\n_method\r\n--zz--\r\n",
            "a multipart part's head over 16384 bytes",
        ),
    ],
)
def test_a_request_shaped_to_be_costly_to_judge_is_refused(
    headers: list[tuple[bytes, bytes]], body: bytes, why: str
) -> None:
    # A content type repeated, a parameter named again and again, parts without end: each
    # parse cost the shared event loop seconds; such a request is refused instead
    with pytest.raises(Unjudgeable, match=why):
        effective_method("POST", headers, "", body)
