"""Workspace files of a real local sandbox through the SBX/1 client."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import httpx
import pytest

from sandbox_client import (
    ClientOptions,
    DirEntry,
    FileNotFound,
    InvalidPath,
    IsADirectory,
    NotADirectory,
    ProtocolError,
    RequestRejected,
    SandboxClient,
    SandboxHandle,
)

ALL_BYTES = bytes(range(256)) * 4


async def test_written_bytes_read_back_identical_and_parents_are_created(
    client: SandboxClient,
) -> None:
    await client.write_file("/workspace/deep/er/all.bin", ALL_BYTES)

    assert await client.read_file("/workspace/deep/er/all.bin") == ALL_BYTES
    record = await client.exec("wc", "wc -c < deep/er/all.bin", timeout_s=10)
    assert record.stdout.strip() == str(len(ALL_BYTES))


async def test_a_command_sees_the_file_and_the_client_sees_its_files(client: SandboxClient) -> None:
    await client.exec("make-file", "mkdir -p made && echo made > made/by-shell.txt", timeout_s=10)

    assert await client.read_file("/workspace/made/by-shell.txt") == b"made\n"


async def test_list_dir_gives_subdirectories_then_files_with_sizes(client: SandboxClient) -> None:
    await client.write_file("/workspace/listing/a.txt", b"abc")
    await client.write_file("/workspace/listing/sub/b.txt", b"")

    entries = await client.list_dir("/workspace/listing")

    assert entries == (
        DirEntry("/workspace/listing/sub", "sub", is_dir=True),
        DirEntry("/workspace/listing/a.txt", "a.txt", is_dir=False, size_bytes=3),
    )


async def test_missing_files_and_wrong_kinds_raise_typed_errors(client: SandboxClient) -> None:
    await client.write_file("/workspace/kinds/file.txt", b"x")

    with pytest.raises(FileNotFound):
        await client.read_file("/workspace/kinds/missing.txt")
    with pytest.raises(IsADirectory):
        await client.read_file("/workspace/kinds")
    with pytest.raises(IsADirectory):
        await client.write_file("/workspace/kinds", b"x")
    with pytest.raises(NotADirectory):
        await client.list_dir("/workspace/kinds/file.txt")
    with pytest.raises(FileNotFound):
        await client.list_dir("/workspace/kinds/missing")


async def test_delete_removes_files_and_only_recursively_full_directories(
    client: SandboxClient,
) -> None:
    await client.write_file("/workspace/gone/a/b.txt", b"x")

    await client.delete_file("/workspace/gone/a/b.txt")
    with pytest.raises(FileNotFound):
        await client.read_file("/workspace/gone/a/b.txt")
    await client.write_file("/workspace/gone/a/c.txt", b"x")
    with pytest.raises(RequestRejected):
        await client.delete_file("/workspace/gone")
    await client.delete_file("/workspace/gone", recursive=True)
    with pytest.raises(FileNotFound):
        await client.delete_file("/workspace/gone")


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "/workspace/../etc/passwd",
        "relative.txt",
        "/workspace/bad\nname",
        "/memory/x",
    ],
)
async def test_paths_outside_the_workspace_are_refused_before_any_request(
    client: SandboxClient, path: str
) -> None:
    with pytest.raises(InvalidPath):
        await client.read_file(path)
    with pytest.raises(InvalidPath):
        await client.write_file(path, b"x")


async def test_the_server_refuses_paths_that_leave_the_workspace(
    client: SandboxClient, sandbox: SandboxHandle
) -> None:
    await client.exec("escape-link", "ln -sfn /etc /workspace/etc-link", timeout_s=10)

    with pytest.raises(InvalidPath):
        await client.read_file("/workspace/etc-link/passwd")
    transport = httpx.AsyncHTTPTransport(uds=sandbox.socket_path)
    async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as raw:
        absolute = await raw.get("/filesystem//etc/passwd")
        dotted = await raw.get("/filesystem/..%2F..%2Fetc%2Fpasswd")
    assert absolute.status_code == dotted.status_code == 400
    assert "outside" in absolute.json()["error"]
    await client.write_file("/workspace/still-usable.txt", b"yes")
    assert await client.read_file("/workspace/still-usable.txt") == b"yes"


async def test_a_range_read_gives_the_bytes_from_an_offset_and_the_file_size(
    client: SandboxClient,
) -> None:
    await client.write_file("/workspace/ranges/log.txt", b"0123456789")

    assert await client.read_range("/workspace/ranges/log.txt", 4) == (b"456789", 10)
    assert await client.read_range("/workspace/ranges/log.txt", -3) == (b"789", 10)
    assert await client.read_range("/workspace/ranges/log.txt", -30) == (b"0123456789", 10)
    assert await client.read_range("/workspace/ranges/log.txt", 10) == (b"", 10)
    assert await client.read_range("/workspace/ranges/log.txt", 2, 3) == (b"234", 10)
    assert await client.read_range("/workspace/ranges/log.txt", 8, 30) == (b"89", 10)
    with pytest.raises(ValueError, match="length"):
        await client.read_range("/workspace/ranges/log.txt", -3, 2)
    with pytest.raises(FileNotFound):
        await client.read_range("/workspace/ranges/missing.txt", 0)


async def test_a_file_past_the_read_limit_is_followed_in_range_reads(
    client: SandboxClient,
) -> None:
    # Given a file 1 MiB past the sandbox's read limit (32 MiB), whole reads refuse it
    limit = 32 * 1024 * 1024
    await client.exec(
        "big", "mkdir -p ranges && head -c 34603008 /dev/zero > ranges/big.bin", timeout_s=30
    )
    with pytest.raises(RequestRejected):
        await client.read_file("/workspace/ranges/big.bin")
    # When it is read in ranges from the start
    first, size = await client.read_range("/workspace/ranges/big.bin", 0)
    rest, _ = await client.read_range("/workspace/ranges/big.bin", len(first))
    tail, _ = await client.read_range("/workspace/ranges/big.bin", -10)
    # Then each read gives at most the limit, and together they give it all
    assert (len(first), size) == (limit, 34603008)
    assert len(first) + len(rest) == size
    assert tail == b"\0" * 10


async def test_a_server_that_ignores_ranges_is_read_whole_and_sliced() -> None:
    # Given a sandbox API that answers every GET with the whole file (200, no range)
    calls: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers.get("range"))
        return httpx.Response(
            200,
            content=b"0123456789",
            headers={"content-disposition": 'attachment; filename="log.txt"'},
        )

    transport = httpx.MockTransport(answer)
    async with SandboxClient("http://sandbox", sandbox_id="s", transport=transport) as client:
        # When a range is read
        data = await client.read_range("/workspace/log.txt", 6)
        bounded = await client.read_range("/workspace/log.txt", 2, 3)
    # Then it is the same slice a range-aware server gives
    assert (data, bounded) == ((b"6789", 10), (b"234", 10))
    assert calls[0] == "bytes=6-"
    assert "bytes=2-4" in calls


async def test_a_reply_longer_than_the_bound_is_refused_without_being_read_whole() -> None:
    # Given a sandbox server (a command can replace the jail's) streaming an endless body
    sent_chunks = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent_chunks
        while True:
            sent_chunks += 1
            yield b"x" * 65536

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("declared.txt"):  # says how long it is, up front
            return httpx.Response(200, headers={"content-length": str(10**12)}, content=b"")
        return httpx.Response(200, content=endless())

    options = ClientOptions(max_response_bytes=1024 * 1024)
    transport = httpx.MockTransport(answer)
    async with SandboxClient(
        "http://sandbox", sandbox_id="s", transport=transport, options=options
    ) as client:
        # When the worker reads a file from it, or one declared longer than the bound
        with pytest.raises(ProtocolError, match="more than 1048576 bytes"):
            await client.read_file("/workspace/endless.txt")
        with pytest.raises(ProtocolError, match="more than 1048576 bytes"):
            await client.read_file("/workspace/declared.txt")
    # Then it stopped reading just past the bound (and was not retried)
    assert sent_chunks == 1024 * 1024 // 65536 + 1


async def test_a_compressed_reply_is_decoded_once() -> None:
    # Given a sandbox API that compresses its replies
    def answer(request: httpx.Request) -> httpx.Response:
        body = gzip.compress(b"all good\n")
        headers = {"content-encoding": "gzip", "content-disposition": 'attachment; filename="r"'}
        return httpx.Response(200, headers=headers, content=body)

    transport = httpx.MockTransport(answer)
    async with SandboxClient("http://sandbox", sandbox_id="s", transport=transport) as client:
        # When a file is read, Then its bytes are the decoded ones
        assert await client.read_file("/workspace/report.txt") == b"all good\n"
