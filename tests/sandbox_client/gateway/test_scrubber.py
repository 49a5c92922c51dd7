"""The secret does not come back in a reply in the forms an upstream plausibly echoes it in:
base64 at any alignment (both alphabets), hex, JSON and HTML escapes, percent escapes in any
case, and inside a gzip body, also when split between reads.

Through the real gateway, to a real upstream that echoes the credential it received in one
form per path; and the scrubber alone, split at every byte.
"""

from __future__ import annotations

import asyncio
import base64
import doctest
import gzip
import io
import json
import re
import zlib
from collections.abc import Callable
from urllib.parse import quote

import pytest
from aiohttp import web

from sandbox_client.gateway import REDACTED, Scrubber, SecretForms, replies, scrubber
from tests.sandbox_client.gateway.echo import HOST, Echo, Reply, front, raw

TOKEN = "tok/7Qz+e9_kM2b~L=x"
SECRET = TOKEN.encode()


def _pct_lower(text: str) -> str:
    return re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(text, safe=""))


FORMS: dict[str, Callable[[bytes], bytes]] = {
    "as is": lambda s: s,
    "base64 at 0": lambda s: base64.b64encode(s + b"!"),
    "base64 at 1": lambda s: base64.b64encode(b"a" + s + b"!"),
    "base64 at 2": lambda s: base64.b64encode(b"ab" + s + b"!?"),
    "url-safe base64 at 0": lambda s: base64.urlsafe_b64encode(s),
    "url-safe base64 at 1": lambda s: base64.urlsafe_b64encode(b"{" + s + b"}"),
    "url-safe base64 at 2": lambda s: base64.urlsafe_b64encode(b"{}" + s),
    "base64 of a basic header": lambda s: base64.b64encode(b"user:" + s),
    "base64, JSON-escaped": lambda s: (
        json.dumps(base64.b64encode(b"a" + s).decode()).replace("/", "\\/").encode()
    ),
    "hex": lambda s: s.hex().encode(),
    "HEX": lambda s: s.hex().upper().encode(),
    "JSON \\/": lambda s: json.dumps({"t": s.decode()}).replace("/", "\\/").encode(),
    "JSON \\u": lambda s: "".join(f"\\u{ord(c):04x}" for c in s.decode()).encode(),
    "JSON \\U": lambda s: "".join(f"\\u{ord(c):04X}" for c in s.decode()).encode(),
    "percent, lower case": lambda s: _pct_lower(s.decode()).encode(),
    "percent, every byte": lambda s: "".join(f"%{b:02x}" for b in s).encode(),
    "percent, twice": lambda s: quote(quote(s.decode(), safe=""), safe="").encode(),
    "HTML decimal": lambda s: "".join(f"&#{b};" for b in s).encode(),
    "HTML hex": lambda s: "".join(f"&#x{b:x};" for b in s).encode(),
    "HTML named": lambda s: (
        s.replace(b"/", b"&sol;").replace(b"+", b"&plus;").replace(b"=", b"&equals;")
    ),
    "\\x escapes": lambda s: "".join(f"\\x{b:02x}" for b in s).encode(),
    "mixed escapes": lambda s: b"tok%2f7Qz\\u002be9_kM2b~L&#61;x",
}


@pytest.mark.parametrize("form", FORMS)
def test_the_scrubber_finds_each_form_split_at_every_byte(form: str) -> None:
    body = b"<<" + FORMS[form](SECRET) + b">>"
    forms = SecretForms.of([SECRET])
    for cut in range(1, len(body)):
        scrubbing = Scrubber(forms)
        out = scrubbing.feed(body[:cut]) + scrubbing.feed(body[cut:]) + scrubbing.flush()
        assert REDACTED in out, (form, cut, out)
        assert FORMS[form](SECRET) not in out


def _reflect(form: Callable[[bytes], bytes]) -> Reply:
    async def reply(request: web.Request) -> web.StreamResponse:
        sent = request.headers["Authorization"].removeprefix("Bearer ").encode()
        response = web.StreamResponse()
        await response.prepare(request)
        echoed = b"you sent: " + form(sent) + b" (end)"
        for start in range(0, len(echoed), 7):  # small writes: the gateway reads in pieces
            await response.write(echoed[start : start + 7])
        await response.write_eof()
        return response

    return reply


def _rules(echo: Echo) -> str:
    return (
        f"rules:\n  - name: api\n    hosts: [{HOST}]\n    ports: [{echo.https_port}]\n"
        "    inject: {type: bearer, token: {env: API_TOKEN}}\n"
    )


async def _get(echo: Echo, path: str) -> bytes:
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        head = f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
        response = await raw(gw, head.encode(), connect=f"{HOST}:{echo.https_port}")
    assert response.status == 200
    assert echo.seen[0].headers["Authorization"] == f"Bearer {TOKEN}"
    return response.body


async def test_every_form_the_upstream_echoes_is_scrubbed_through_the_gateway(echo: Echo) -> None:
    for index, form in enumerate(FORMS.values()):
        echo.replies[f"/form/{index}"] = _reflect(form)
    bodies = [await _get(echo, f"/form/{index}") for index in range(len(FORMS))]
    for name, form, body in zip(FORMS, FORMS.values(), bodies, strict=True):
        assert form(SECRET) not in body, name
        assert REDACTED in body, name
        assert body.startswith(b"you sent: "), name
        assert body.endswith(b" (end)"), name


def _gzip_reply(body: bytes, headers: dict[str, str] | None = None) -> Reply:
    async def reply(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers=headers or {"Content-Type": "application/gzip"})
        await response.prepare(request)
        for start in range(0, len(body), 5):
            await response.write(body[start : start + 5])
        await response.write_eof()
        return response

    return reply


async def test_a_gzip_body_is_scrubbed_and_stays_gzip(echo: Echo) -> None:
    # Given an upstream answering a gzip file (no content-encoding) holding the secret
    plain = b"log line 1\nAuthorization: Bearer " + SECRET + b"\nlog line 3\n" * 200
    echo.replies["/logs.gz"] = _gzip_reply(gzip.compress(plain))
    # When the sandbox downloads it through the gateway
    body = await _get(echo, "/logs.gz")
    # Then it is still a gzip file, and the secret inside was removed
    inflated = gzip.decompress(body)
    assert SECRET not in inflated
    assert inflated == plain.replace(SECRET, REDACTED)


async def test_a_gzip_body_of_several_members_is_scrubbed_in_each(echo: Echo) -> None:
    members = gzip.compress(b"first member\n") + gzip.compress(b"then " + SECRET + b"\n")
    echo.replies["/two.gz"] = _gzip_reply(members)
    inflated = gzip.decompress(await _get(echo, "/two.gz"))
    assert inflated == b"first member\nthen " + REDACTED + b"\n"


async def test_a_gzip_body_inside_a_gzip_content_encoding_is_scrubbed(echo: Echo) -> None:
    inner = gzip.compress(b"secret: " + base64.b64encode(b"x" + SECRET))
    echo.replies["/double"] = _gzip_reply(gzip.compress(inner), {"Content-Encoding": "gzip"})
    inflated = gzip.decompress(await _get(echo, "/double"))
    assert base64.b64encode(b"x" + SECRET)[2:-2] not in inflated
    assert REDACTED in inflated


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS], ids=["zlib", "raw"])
async def test_a_deflate_content_encoding_is_undone_whether_zlib_or_raw(
    echo: Echo, wbits: int
) -> None:
    compressor = zlib.compressobj(wbits=wbits)
    body = compressor.compress(b"token=" + SECRET) + compressor.flush()
    echo.replies["/deflate"] = _gzip_reply(body, {"Content-Encoding": "deflate"})
    assert await _get(echo, "/deflate") == b"token=" + REDACTED


async def test_a_corrupt_gzip_body_is_cut_before_anything_unscrubbed(echo: Echo) -> None:
    # Given a gzip body whose compressed data breaks off after the secret
    whole = gzip.compress(b"a" * 5000 + SECRET + b"b" * 5000)
    echo.replies["/broken.gz"] = _gzip_reply(whole[: len(whole) // 2] + b"\x00" * 64)
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        head = f"GET /broken.gz HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
        response = await raw(gw, head.encode(), connect=f"{HOST}:{echo.https_port}")
    # Then the reply was cut off: what reached the sandbox, inflated as far as it goes,
    # holds no secret
    assert response.status in (0, 200)
    inflated = zlib.decompressobj(wbits=31).decompress(response.body)
    assert SECRET not in inflated


async def test_a_secret_in_a_gzip_files_name_does_not_survive(echo: Echo) -> None:
    # Given a gzip body whose header names the file after the secret (RFC 1952 FNAME)
    holder = io.BytesIO()
    with gzip.GzipFile(filename=TOKEN.replace("/", "_"), mode="wb", fileobj=holder) as out:
        out.write(b"contents")
    echo.replies["/named.gz"] = _gzip_reply(holder.getvalue())
    body = await _get(echo, "/named.gz")
    assert TOKEN.replace("/", "_").encode() not in body
    assert gzip.decompress(body) == b"contents"


async def test_a_secret_in_the_reason_phrase_or_a_header_name_does_not_reach_the_sandbox(
    echo: Echo,
) -> None:
    async def reply(request: web.Request) -> web.StreamResponse:
        sent = request.headers["Authorization"].removeprefix("Bearer ")
        headers = {f"X-{sent.encode().hex()}": "1", "X-Seen": sent}
        return web.Response(status=401, reason=f"Invalid token {sent}", headers=headers)

    echo.replies["/reason"] = reply
    async with front(echo, _rules(echo), {"API_TOKEN": TOKEN}) as gw:
        head = f"GET /reason HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n"
        reader, writer = await asyncio.open_connection(*gw.address)
        writer.write(f"CONNECT {HOST}:{echo.https_port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        await writer.start_tls(gw.trust, server_hostname=HOST)
        writer.write(head.encode())
        answer = await reader.read(-1)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 401 Invalid token " + REDACTED)
    assert SECRET not in answer
    assert SECRET.hex().encode() not in answer.lower()
    assert b"x-seen: " + REDACTED.lower() in answer.lower()


def test_the_scrubbers_examples_hold() -> None:
    for module in (scrubber, replies):
        result = doctest.testmod(module)
        assert result.failed == 0
    assert doctest.testmod(scrubber).attempted > 0
