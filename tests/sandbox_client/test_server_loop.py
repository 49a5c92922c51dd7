"""The jailed server's own event loop (``server/loop.py``): the asyncio shapes it relies on."""

from __future__ import annotations

import socket

import pytest

from sandbox_client.server.loop import (
    CancelledError,
    Event,
    IncompleteReadError,
    LimitOverrunError,
    Queue,
    Stream,
    loop,
    sleep,
    timeout,
)


def test_a_timeout_cancels_the_block_and_raises_timeout_error_and_the_task_goes_on() -> None:
    async def main() -> list[str]:
        seen = []
        try:
            async with timeout(0.01):
                await Event().wait()  # never set
        except TimeoutError:
            seen.append("timed out")
        async with timeout(1.0):  # a block that ends in time is not cancelled later
            await sleep(0)
        await sleep(0.02)
        seen.append("went on")
        return seen

    assert loop().run(main()) == ["timed out", "went on"]


def test_a_cancelled_task_stops_where_it_waits() -> None:
    async def waiter(queue: Queue) -> str:
        try:
            await queue.get()
        except CancelledError:
            return "never"
        return "got"

    async def main() -> tuple[bool, object]:
        queue = Queue()
        task = loop().create_task(waiter(queue))
        await sleep(0)
        task.cancel()
        await sleep(0)
        queue.put_nowait("late")
        return task.done(), task.result()

    assert loop().run(main()) == (True, "never")


def test_a_stream_reads_up_to_a_separator_within_its_limit() -> None:
    async def main() -> tuple[bytes, bytes, bytes]:
        near, far = socket.socketpair()
        stream = Stream(near, limit=16)
        far.sendall(b"GET / HTTP/1.1\r\n\r\nbody")
        head = await stream.readuntil(b"\r\n\r\n")
        body = await stream.readexactly(4)
        far.sendall(b"x" * 64)
        with pytest.raises(LimitOverrunError):
            await stream.readuntil(b"\n")
        far.close()
        with pytest.raises(IncompleteReadError) as ended:
            await stream.readexactly(1000)
        stream.close()
        return head, body, ended.value.partial

    head, body, partial = loop().run(main())
    assert (head, body) == (b"GET / HTTP/1.1\r\n\r\n", b"body")
    assert partial == b"x" * 64


def test_draining_to_a_peer_that_went_away_raises_connection_error() -> None:
    async def write_until_refused(stream: Stream) -> None:
        for _ in range(64):  # the first writes may still be taken by the kernel
            stream.write(b"x" * 65536)
            await stream.drain()

    async def main() -> None:
        near, far = socket.socketpair()
        stream = Stream(near, limit=1024)
        far.close()
        with pytest.raises(ConnectionError):
            await write_until_refused(stream)
        stream.close()
        await stream.wait_closed()

    loop().run(main())
