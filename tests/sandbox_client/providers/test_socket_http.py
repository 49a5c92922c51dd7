"""The small HTTP/1.1 transport over a Unix socket, against a scripted server."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from sandbox_client.providers.local.socket_http import UnixSocketTransport

Reply = Callable[[bytes], bytes | None]  # request head+body -> raw reply (None: stay silent)


class Server:
    """A Unix-socket server answering each request with ``reply(request)``; it counts the
    connections and keeps each request as it read it."""

    def __init__(self, path: Path, reply: Reply) -> None:
        self.path = path
        self.reply = reply
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, str(self.path))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = self.reply(request)
                if answer is None:
                    await asyncio.Event().wait()  # silent until cancelled
                    return
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        writer.close()

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
        if self._server is not None:
            self._server.close()


@contextlib.asynccontextmanager
async def serving(reply: Reply) -> AsyncIterator[tuple[Server, httpx.AsyncClient]]:
    with tempfile.TemporaryDirectory(prefix="wr-http-") as directory:
        server = Server(Path(directory) / "s.sock", reply)
        await server.start()
        client = httpx.AsyncClient(
            base_url="http://sandbox",
            transport=UnixSocketTransport(str(server.path)),
            timeout=httpx.Timeout(2.0),
        )
        try:
            yield server, client
        finally:
            await client.aclose()
            await server.close()


def _length(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body


def _echo_body(request: bytes) -> bytes:
    return _length(request.split(b"\r\n\r\n", 1)[1])


async def test_a_request_goes_in_one_message_and_its_connection_is_kept() -> None:
    async with serving(_echo_body) as (server, client):
        # When two requests with bodies are sent one after the other
        first = await client.put("/process/a", json={"command": "true"})
        second = await client.post("/x", content=b"hello")
        # Then each is answered, both on one connection, with their bodies framed by length
        assert first.json() == {"command": "true"}
        assert second.content == b"hello"
        assert server.connections == 1
        assert server.requests[1].startswith(b"POST /x HTTP/1.1\r\n")
        assert b"Content-Length: 5\r\n" in server.requests[1]
        assert b"transfer-encoding" not in server.requests[1].lower()


async def test_a_chunked_reply_is_read_with_its_extensions_and_trailers() -> None:
    body = b'{"type":"result"}\n'
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\n" + body[:5] + b"\r\n"
        b"%x\r\n" % (len(body) - 5) + body[5:] + b"\r\n"
        b"0\r\nX-Trailer: 1\r\n\r\n"
    )
    async with serving(lambda request: chunked) as (server, client):
        async with client.stream("PUT", "/process/a") as response:
            got = b"".join([chunk async for chunk in response.aiter_bytes()])
        assert got == body
        assert (await client.get("/again")).content == body
        assert server.connections == 1  # read to its end: the connection was kept


async def test_a_reply_ended_by_closing_is_read_and_its_connection_not_reused() -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it"
    async with serving(lambda request: closing) as (server, client):
        assert (await client.get("/a")).content == b"all of it"
        assert (await client.get("/b")).content == b"all of it"
        assert server.connections == 2


async def test_a_kept_connection_the_server_closed_is_replaced() -> None:
    async with serving(_echo_body) as (server, client):
        await client.post("/a", content=b"1")
        # Given the server closed the idle connection
        server.writers[0].close()
        await server.writers[0].wait_closed()
        # When the next request is sent, it is answered on a new connection
        assert (await client.post("/b", content=b"2")).content == b"2"
        assert server.connections == 2


async def test_a_server_that_does_not_answer_times_out() -> None:
    async with serving(lambda request: None) as (_, client):
        with pytest.raises(httpx.ReadTimeout):
            await client.get("/health", timeout=httpx.Timeout(0.2))


async def test_a_cut_reply_is_a_protocol_error() -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nabc"
    async with serving(lambda request: cut) as (_, client):
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get("/a")


async def test_no_server_is_a_connect_error(tmp_path: Path) -> None:
    client = httpx.AsyncClient(transport=UnixSocketTransport(str(tmp_path / "none.sock")))
    async with client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://sandbox/health")
