"""Running commands in a real local sandbox through the SBX/1 client."""

from __future__ import annotations

import asyncio
import tracemalloc

import httpx
import pytest

from sandbox_client import (
    OutputChunk,
    ProcessStatus,
    RequestRejected,
    SandboxClient,
    SandboxHandle,
)
from sandbox_client.providers.local import procfs

from .conftest import CAP_BYTES, wait_for

WAIT_FOR_GO = "while [ ! -e /workspace/{go} ]; do sleep 0.01; done"
# Counts the sandbox's processes whose command line matches a regex (write the regex so
# that it does not match itself, e.g. 'sleep 100[3]').
COUNT = "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | grep -c '{regex}'"


async def test_exec_returns_the_exit_code_and_separate_streams(client: SandboxClient) -> None:
    record = await client.exec("streams", "echo out; echo err >&2; exit 3", timeout_s=10)

    assert record.status is ProcessStatus.FAILED
    assert record.exit_code == 3
    assert record.stdout == "out\n"
    assert record.stderr == "err\n"
    assert record.logs == "out\nerr\n"
    assert record.working_dir == "/workspace"
    assert record.started_at is not None
    assert record.started_at.tzinfo is not None


async def test_exec_runs_bash_in_the_workspace_with_the_given_env(client: SandboxClient) -> None:
    record = await client.exec(
        "env-and-bash", 'echo "$BASH_VERSION|$PWD|$GREETING"', timeout_s=10, env={"GREETING": "hi"}
    )

    version, pwd, greeting = record.stdout.strip().split("|")
    assert version
    assert pwd == "/workspace"
    assert greeting == "hi"


async def test_exec_streams_output_to_the_callback_before_the_command_ends(
    client: SandboxClient,
) -> None:
    chunks: list[OutputChunk] = []
    command = f"echo first; {WAIT_FOR_GO.format(go='go-stream')}; echo second >&2"

    # Given a command that prints, then waits for a file
    task = asyncio.create_task(
        client.exec("streaming", command, timeout_s=20, on_output=chunks.append)
    )
    # Then its first line arrives while it is still running
    await wait_for(lambda: any("first" in c.text for c in chunks), what="first chunk")
    assert not task.done()
    # When the file appears it finishes, and stderr was streamed too
    await client.write_file("/workspace/go-stream", b"")
    record = await task
    assert record.exit_code == 0
    assert OutputChunk("stderr", "second\n") in chunks


async def test_exec_with_a_known_name_returns_the_first_result_without_running_again(
    client: SandboxClient,
) -> None:
    command = "echo ran >> /workspace/ran-once.txt; echo done"

    first = await client.exec("tool-use-once", command, timeout_s=10)
    again = await client.exec("tool-use-once", command, timeout_s=10)

    assert again == first
    assert await client.read_file("/workspace/ran-once.txt") == b"ran\n"


async def test_exec_of_a_running_name_reattaches_instead_of_starting_it_again(
    client: SandboxClient,
) -> None:
    command = f"echo ran >> /workspace/ran-attach.txt; {WAIT_FOR_GO.format(go='go-attach')}"

    # Given a command started under a name and still running
    first = asyncio.create_task(client.exec("tool-use-attach", command, timeout_s=20))
    await wait_for(lambda: client.get_process("tool-use-attach"), what="the process to start")
    # When the same name is executed again (a retried tool call)
    second = asyncio.create_task(client.exec("tool-use-attach", command, timeout_s=20))
    await client.write_file("/workspace/go-attach", b"")
    # Then both see the one run
    one, two = await asyncio.gather(first, second)
    assert one.exit_code == two.exit_code == 0
    assert one.pid == two.pid
    assert await client.read_file("/workspace/ran-attach.txt") == b"ran\n"


async def test_the_server_refuses_a_name_that_is_running(
    client: SandboxClient, sandbox: SandboxHandle
) -> None:
    command = WAIT_FOR_GO.format(go="go-reuse")
    task = asyncio.create_task(client.exec("reused-name", command, timeout_s=20))
    await wait_for(lambda: client.get_process("reused-name"), what="the process to start")

    transport = httpx.AsyncHTTPTransport(uds=sandbox.socket_path)
    async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as raw:
        response = await raw.post("/process", json={"command": "true", "name": "reused-name"})

    assert response.status_code == 400
    assert "already exists and is running" in response.json()["error"]
    await client.write_file("/workspace/go-reuse", b"")
    assert (await task).exit_code == 0


async def test_the_deadline_kills_the_whole_process_group(client: SandboxClient) -> None:
    record = await client.exec("deadline", "sleep 1001 & sleep 1002; echo never", timeout_s=0.5)

    assert record.timed_out
    assert record.status is ProcessStatus.KILLED
    assert "never" not in record.stdout
    survivors = await client.exec(
        "deadline-check", COUNT.format(regex="sleep 100[12]"), timeout_s=10
    )
    assert survivors.stdout.strip() == "0"


async def test_a_detaching_exec_leaves_the_command_running_at_its_deadline(
    client: SandboxClient,
) -> None:
    command = f"echo started; {WAIT_FOR_GO.format(go='go-detach')}; echo finished"

    record = await client.exec("detach", command, timeout_s=0.5, detach_at_deadline=True)

    assert record.timed_out
    assert not record.finished
    assert record.stdout == "started\n"
    assert "detach" not in client.unfinished_names  # followed by whoever detached it
    await client.write_file("/workspace/go-detach", b"")
    ended = await client.wait("detach", timeout_s=10)
    assert ended is not None
    assert ended.exit_code == 0
    assert ended.stdout == "started\nfinished\n"


async def test_a_command_that_forks_a_tree_and_exits_returns_at_once_and_kill_ends_the_tree(
    client: SandboxClient,
) -> None:
    command = "for i in 1 2 3; do sleep 1003 & done; echo parent done"
    count = COUNT.format(regex="sleep 100[3]")

    record = await client.exec("forker", command, timeout_s=10)
    assert record.stdout == "parent done\n"
    assert record.exit_code == 0
    assert (await client.exec("forker-count", count, timeout_s=10)).stdout.strip() == "3"

    await client.kill("forker")
    remaining = await client.exec("forker-count-2", count, timeout_s=10)
    assert remaining.stdout.strip() == "0"


async def test_stop_terminates_a_running_command_and_says_so(client: SandboxClient) -> None:
    command = "trap 'echo got TERM; exit 143' TERM; echo waiting; sleep 1000 & wait"
    task = asyncio.create_task(client.exec("to-stop", command, timeout_s=30))
    await wait_for(lambda: _has_output(client, "to-stop"), what="the command to be waiting")

    await client.stop("to-stop")
    record = await task

    assert record.status is ProcessStatus.STOPPED
    assert record.stdout == "waiting\ngot TERM\n"
    assert not record.timed_out


async def _has_output(client: SandboxClient, name: str) -> bool:
    record = await client.get_process(name)
    return record is not None and bool(record.stdout)


async def test_binary_output_arrives_as_text_with_replacement_characters(
    client: SandboxClient,
) -> None:
    record = await client.exec("binary", r"printf 'a\377\376\000b'", timeout_s=10)

    assert record.stdout == "a\ufffd\ufffd\x00b"
    assert (await client.exec("after-binary", "echo ok", timeout_s=10)).stdout == "ok\n"


async def test_fifty_megabytes_of_output_are_capped_without_holding_them(
    client: SandboxClient, sandbox: SandboxHandle
) -> None:
    streamed: list[int] = []
    command = "head -c 50000000 /dev/zero | tr '\\0' x; echo; echo tail-marker"

    tracemalloc.start()
    try:
        record = await client.exec(
            "fifty-mb", command, timeout_s=60, on_output=lambda c: streamed.append(len(c.text))
        )
        _, client_peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert record.exit_code == 0
    assert len(record.stdout) < CAP_BYTES + 100
    assert "bytes omitted" in record.stdout
    assert record.stdout.endswith("tail-marker\n")
    assert sum(streamed) <= CAP_BYTES
    assert client_peak_bytes < 16 * 1024 * 1024
    assert _server_peak_rss_bytes(sandbox) < 48 * 1024 * 1024
    assert (await client.exec("after-fifty-mb", "echo ok", timeout_s=10)).stdout == "ok\n"


def _server_peak_rss_bytes(sandbox: SandboxHandle) -> int:
    assert sandbox.pid is not None
    for pid in procfs.descendants(sandbox.pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            if b"python" not in argv[0].rsplit(b"/", 1)[-1]:
                continue  # bwrap's processes carry the server's command line too
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    pytest.fail("the sandbox server process was not found")


async def test_a_missing_working_directory_is_a_typed_refusal(client: SandboxClient) -> None:
    with pytest.raises(RequestRejected) as caught:
        await client.exec("bad-cwd", "true", timeout_s=10, working_dir="/workspace/nope")

    assert caught.value.status == 422
    assert (await client.exec("after-bad-cwd", "echo ok", timeout_s=10)).stdout == "ok\n"


async def test_get_process_finds_a_finished_command_by_name(client: SandboxClient) -> None:
    await client.exec("find-me", "echo found", timeout_s=10)

    record = await client.get_process("find-me")

    assert record is not None
    assert record.stdout == "found\n"
    assert await client.get_process("never-ran") is None
