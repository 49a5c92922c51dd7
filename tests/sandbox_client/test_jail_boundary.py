"""What a jail cannot do to its host through the paths the host reads or connects to:
redirect the worker's connection, write the host's disk, or fill a descriptor the host
opened. Each attempt is made from inside a real jail, as a planted process would."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sandbox_client import Health, LocalProvider, SandboxClient, SandboxHandle
from sandbox_client.providers.local.provider import LOG_FILE

MIB = 1024 * 1024


class Decoy:
    """A host Unix socket the jail would like the worker to reach."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "decoy.sock"
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen()
        self._server.setblocking(False)

    def connections(self) -> list[bytes]:
        """What each connection made to the decoy so far sent first."""
        seen = []
        with contextlib.suppress(BlockingIOError):
            while True:
                connection, _ = self._server.accept()
                connection.settimeout(1.0)
                with contextlib.suppress(OSError):
                    seen.append(connection.recv(4096))
                connection.close()
        return seen

    def close(self) -> None:
        self._server.close()
        self.path.unlink()


@pytest.fixture
def decoy() -> Iterator[Decoy]:
    """A listening decoy socket in a host directory of the test's own."""
    directory = Path(tempfile.mkdtemp(prefix="wr-decoy-"))
    found = Decoy(directory)
    yield found
    found.close()
    directory.rmdir()


@pytest.fixture
async def jailed(
    provider: LocalProvider, fresh: SandboxHandle
) -> AsyncIterator[tuple[SandboxHandle, SandboxClient]]:
    """A sandbox of the test's own and a client of it."""
    async with provider.connect(fresh) as client:
        yield fresh, client


async def test_a_socket_the_jail_swaps_for_a_symlink_does_not_redirect_the_worker(
    provider: LocalProvider,
    jailed: tuple[SandboxHandle, SandboxClient],
    decoy: Decoy,
) -> None:
    # Given a host socket of the jail's choosing
    handle, client = jailed
    decoy_path = decoy.path
    # When a process in the jail replaces every socket it can see with a symlink to it
    # (renamed over the old name, as an atomic swap would be), and plants one next to it
    swap = (
        f"for s in /run/warroom/*.sock /run/warroom/sbx.sock; do"
        f" ln -s {decoy_path} $s.new && mv -f $s.new $s && echo swapped $s; done;"
        f" ln -s {decoy_path} /run/warroom/planted.sock && echo planted"
    )
    attempt = await client.exec("swap", swap, timeout_s=10)
    # Then it could not, and the worker's next connections reach the same jail
    assert "swapped" not in attempt.stdout, attempt
    assert "planted" not in attempt.stdout, attempt
    async with provider.connect(handle) as again:
        marker = await again.exec("who", "cat /proc/sys/kernel/hostname", timeout_s=10)
    assert marker.stdout == "sandbox\n"
    assert await provider.health(handle) is Health.READY


async def test_the_worker_never_connects_to_a_socket_the_jail_planted(
    provider: LocalProvider,
    jailed: tuple[SandboxHandle, SandboxClient],
    decoy: Decoy,
) -> None:
    handle, client = jailed
    decoy_path = decoy.path
    swap = (
        f"ln -sf {decoy_path} /run/warroom/sbx.sock; ln -sf {decoy_path} /run/warroom/egress.sock;"
        f" rm -f /run/warroom/sbx.sock; ln -s {decoy_path} /run/warroom/sbx.sock; true"
    )
    await client.exec("swap", swap, timeout_s=10)

    async with provider.connect(handle) as again:
        with contextlib.suppress(Exception):
            await again.exec("after", "true", timeout_s=5)
    await provider.health(handle)

    assert decoy.connections() == []
    mode = (await asyncio.to_thread(os.lstat, handle.socket_path or "")).st_mode
    assert stat.S_ISSOCK(mode)  # still the host's own socket, not a link


async def test_the_run_directory_is_read_only_in_the_jail(
    jailed: tuple[SandboxHandle, SandboxClient],
) -> None:
    _, client = jailed
    attempts = {
        "create": "touch /run/warroom/x",
        "directory": "mkdir /run/warroom/d",
        "hard link": "ln /workspace/f /run/warroom/f",
        "fill": "head -c 1048576 /dev/zero > /run/warroom/fill",
        "remove": "rm -f /run/warroom/* && ls /run/warroom | grep -q . || exit 9",
        "rename": "for f in /run/warroom/*; do mv $f $f.old || exit 1; done",
        "remount": "mount -o remount,rw /run/warroom",
        "new namespace": (
            "unshare -Urm sh -c 'mount -o remount,rw /run/warroom && touch /run/warroom/x'"
        ),
    }
    await client.exec("seed", "touch /workspace/f", timeout_s=10)

    for what, command in attempts.items():
        record = await client.exec(f"a-{what.replace(' ', '-')}", command, timeout_s=10)
        assert record.exit_code != 0, (what, record)


async def test_a_jail_cannot_write_the_hosts_log_through_its_first_processes_descriptors(
    provider: LocalProvider, jailed: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jailed
    log = Path(handle.state_dir or "") / LOG_FILE
    before = log.stat().st_size if log.exists() else 0
    # every descriptor of the jail's init and server that points at something written
    fill = (
        "for fd in /proc/[0-9]*/fd/*; do"
        " head -c 4194304 /dev/zero >> $fd 2>/dev/null & done; wait; true"
    )

    await client.exec("fill", fill, timeout_s=30)
    after = await client.exec("alive", "echo alive", timeout_s=10)

    assert after.stdout == "alive\n"
    size = log.stat().st_size if log.exists() else 0
    assert size - before < MIB, f"the host's {LOG_FILE} grew by {size - before} bytes"


async def test_a_command_holds_no_descriptor_of_the_server_or_the_host(
    jailed: tuple[SandboxHandle, SandboxClient],
) -> None:
    _, client = jailed
    # a command inherits only its standard streams: not the server's listening socket
    # (which would let it answer the worker), nor any host file
    record = await client.exec("fds", "ls /proc/self/fd | sort -n | tr '\\n' ' '", timeout_s=10)
    listing = await client.exec("run", "ls -A /run/warroom", timeout_s=10)

    assert record.stdout == "0 1 2 3 "  # 3: the directory ls is reading
    assert "sbx.sock" not in listing.stdout  # the server's socket is not in the jail at all
