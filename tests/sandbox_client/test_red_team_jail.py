"""Red team, promises 6 and 9, from inside real jails: attempts made after the fixes.

Promise 6: nothing the host follows lives where the jail can write, so the worker's calls
reach the jail and nothing else. Promise 9: ``/tmp`` and ``/dev/shm`` are bounded by their
sizes (with cgroups and with resource limits only), whatever way a process writes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sandbox_client import JailLimits, LocalProvider, SandboxClient, SandboxHandle

from .conftest import local_config

MIB = 1024 * 1024


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``root``: its inode and mode (a swap or a new entry shows)."""
    found = {}
    for directory, names, files in os.walk(root):
        for name in names + files:
            path = Path(directory) / name
            info = path.lstat()
            found[str(path.relative_to(root))] = (info.st_ino, info.st_mode)
    return found


@pytest.fixture
async def jailed(
    provider: LocalProvider, fresh: SandboxHandle
) -> AsyncIterator[tuple[SandboxHandle, SandboxClient]]:
    async with provider.connect(fresh) as client:
        yield fresh, client


# --- promise 6 -----------------------------------------------------------------------------


async def test_p6_binding_a_socket_or_fifo_in_the_run_directory_fails(
    jailed: tuple[SandboxHandle, SandboxClient],
) -> None:
    handle, client = jailed
    before = _tree(Path(handle.state_dir or ""))
    attempts = {
        "socket": (
            "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('/run/warroom/s')\""
        ),
        "fifo": "mkfifo /run/warroom/f",
        "chmod": "chmod 777 /run/warroom",
        "through /proc/self/root": "touch /proc/self/root/run/warroom/x",
    }
    for what, command in attempts.items():
        record = await client.exec(
            f"p6-{what.replace(' ', '-').replace('/', '')}", command, timeout_s=10
        )
        assert record.exit_code != 0, (what, record)
    assert _tree(Path(handle.state_dir or "")) == before


async def test_p6_the_first_processes_roots_give_no_way_to_the_hosts_directories(
    jailed: tuple[SandboxHandle, SandboxClient],
) -> None:
    handle, client = jailed
    before = _tree(Path(handle.state_dir or ""))
    # bwrap's init (pid 1) and the server (pid 2): their root, cwd and descriptors
    command = (
        "for p in 1 2; do for d in root cwd; do"
        " touch /proc/$p/$d/run/warroom/x-$p-$d 2>/dev/null && echo wrote-$p-$d;"
        " ls /proc/$p/$d/ >/dev/null 2>&1 || echo no-$d-$p; done;"
        ' for fd in /proc/$p/fd/*; do [ -d "$fd" ] && touch "$fd/planted" 2>/dev/null'
        " && echo wrote-$fd; done; done; true"
    )
    record = await client.exec("p6-roots", command, timeout_s=10)
    assert "wrote" not in record.stdout, record.stdout
    assert _tree(Path(handle.state_dir or "")) == before


async def test_p6_an_overmount_in_a_nested_namespace_does_not_reach_the_worker(
    provider: LocalProvider, jailed: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jailed
    before = _tree(Path(handle.state_dir or ""))
    # a process in its own user and mount namespace mounts a tmpfs over /run/warroom and
    # plants a socket there, then stays (its namespace alive) while the worker calls again
    plant = (
        "unshare -Urm sh -c 'mount -t tmpfs none /run/warroom && python3 -c "
        '"import socket,time; s=socket.socket(socket.AF_UNIX); s.bind(\\"/run/warroom/sbx.sock\\");'
        " s.listen(); time.sleep(30)\"' &"
        " sleep 0.5; echo planted"
    )
    await client.exec("p6-overmount", plant, timeout_s=10)
    again = await client.exec("p6-after", "echo still-the-jail; ls -A /run/warroom", timeout_s=10)
    assert again.stdout.startswith("still-the-jail")
    assert "sbx.sock" not in again.stdout  # the jail's own view is unchanged
    assert _tree(Path(handle.state_dir or "")) == before


async def test_p6_names_planted_in_the_jails_writable_directories_stay_inside(
    jailed: tuple[SandboxHandle, SandboxClient],
) -> None:
    handle, client = jailed
    before = _tree(Path(handle.state_dir or ""))
    names = "sbx.sock egress.sock handle.json sandbox.log run ../run"
    command = (
        f"for d in /workspace /tmp /dev/shm; do for n in {names}; do"
        ' ln -sf /run/warroom/egress.sock "$d/$n" 2>/dev/null; done; done;'
        " ln /run/warroom/egress.sock /workspace/hard 2>/dev/null && echo linked; true"
    )
    record = await client.exec("p6-plant", command, timeout_s=10)
    assert "linked" not in record.stdout
    assert _tree(Path(handle.state_dir or "")) == before
    again = await client.exec("p6-again", "echo ok", timeout_s=10)
    assert again.stdout == "ok\n"


async def test_p6_killing_the_server_does_not_hand_its_socket_to_the_jail(
    provider: LocalProvider, fresh: SandboxHandle
) -> None:
    # Given a command that kills the jail's server and tries to answer in its place
    before = _tree(Path(fresh.state_dir or ""))
    async with provider.connect(fresh) as client:
        command = (
            'kill -9 2; python3 -c "import socket; s=socket.socket(socket.AF_UNIX);'
            " s.bind('/run/warroom/sbx.sock')\" 2>/dev/null && echo bound; true"
        )
        with contextlib.suppress(Exception):  # the server died: the call fails, as it should
            await client.exec("p6-kill", command, timeout_s=10)
    # Then no new name appeared where the host looks (the worker's socket is its own)
    after = _tree(Path(fresh.state_dir or ""))
    assert {k: v for k, v in after.items() if k not in before} == {}


# --- promise 9 -----------------------------------------------------------------------------

LIMITS = JailLimits(
    memory_max_bytes=128 * MIB,
    pids_max=64,
    cpus=1.0,
    workspace_max_bytes=8 * MIB,
    tmp_max_bytes=4 * MIB,
    shm_max_bytes=2 * MIB,
)


@pytest.fixture(scope="module", params=["auto", "rlimit"])
def limited(state_dir: Path, request: pytest.FixtureRequest) -> LocalProvider:
    return LocalProvider(
        local_config(state_dir / f"rt-{request.param}", limits=LIMITS, enforce=request.param)
    )


@pytest.fixture
async def small(
    limited: LocalProvider, request: pytest.FixtureRequest
) -> AsyncIterator[SandboxClient]:
    name = request.node.name[8:40].replace("_", "-").replace("[", "-").replace("]", "")
    handle = await limited.provision(f"rt-{name}")
    try:
        async with limited.connect(handle) as client:
            yield client
    finally:
        await limited.destroy(handle)


async def _used_kib(client: SandboxClient, path: str) -> int:
    record = await client.exec(
        f"df{abs(hash(path))}", f"df -k --output=used {path} | tail -1", timeout_s=10
    )
    return int(record.stdout.strip())


WAYS_TO_WRITE = {
    "remount bigger in a nested namespace": (
        "/tmp",
        "unshare -Urm sh -c 'mount -o remount,size=1g /tmp; head -c 8388608 /dev/zero > /tmp/big'",
    ),
    "fallocate": ("/tmp", "fallocate -l 8M /tmp/big"),
    "scattered writes into a sparse file": (
        "/tmp",
        "python3 -c \"import os; f=os.open('/tmp/sparse', os.O_RDWR|os.O_CREAT);"
        " os.ftruncate(f, 1<<30);"
        " [os.pwrite(f, b'x'*8192, i<<20) for i in range(1024)]\"",
    ),
    "an O_TMPFILE with no name": (
        "/tmp",
        "python3 -c \"import os; f=os.open('/tmp', os.O_TMPFILE|os.O_WRONLY);"
        " [os.write(f, b'x'*65536) for _ in range(128)]; os.system('sleep 0')\"",
    ),
    "mmap past the size of /dev/shm": (
        "/dev/shm",
        "python3 -c \"import mmap, os; f=os.open('/dev/shm/m', os.O_RDWR|os.O_CREAT);"
        " os.ftruncate(f, 8<<20); m=mmap.mmap(f, 8<<20);"
        ' [m.__setitem__(i, 1) for i in range(0, 8<<20, 4096)]"',
    ),
    "user extended attributes, which the size does not count": (
        "/tmp",
        "python3 -c \"import os; [(open(f'/tmp/x{i}', 'w').close(),"
        " os.setxattr(f'/tmp/x{i}', 'user.k', b'v' * 60000)) for i in range(1100)]\"",
    ),
    "many hard links and a copy to /dev/shm": (
        "/dev/shm",
        "head -c 1572864 /dev/zero > /tmp/a;"
        " for i in 1 2 3 4; do cp /tmp/a /dev/shm/c$i || exit 1; done",
    ),
}


@pytest.mark.parametrize("way", list(WAYS_TO_WRITE))
async def test_p9_a_tmpfs_stays_within_its_size_whatever_the_way_of_writing(
    small: SandboxClient, way: str
) -> None:
    path, command = WAYS_TO_WRITE[way]
    size_kib = {"/tmp": 4 * 1024, "/dev/shm": 2 * 1024}[path]
    record = await small.exec("write", command, timeout_s=60)
    assert record.exit_code != 0, (way, record)
    assert await _used_kib(small, path) <= size_kib
