"""What a jail may write: ``/workspace``, ``/tmp`` and ``/dev/shm``, each a tmpfs of its
own size, counted in the sandbox's memory budget; nothing else. Each attempt to write
more, or elsewhere, is made from inside a real jail, with cgroups and with resource
limits only (a host without a writable cgroup): the sizes are mount options and hold in
both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sandbox_client import JailLimits, LocalProvider, SandboxClient, SandboxHandle

from ..conftest import local_config

MIB = 1024 * 1024
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
    """A provider with small writable sizes: its host's cgroups, or resource limits only."""
    return LocalProvider(local_config(state_dir / f"w-{request.param}", limits=LIMITS,
                                      enforce=request.param))  # fmt: skip


@pytest.fixture
async def jail(
    limited: LocalProvider, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[SandboxHandle, SandboxClient]]:
    """A sandbox of this test's own and a client of it."""
    name = request.node.name[5:40].replace("_", "-").replace("[", "-").replace("]", "")
    handle = await limited.provision(f"w-{name}")
    try:
        async with limited.connect(handle) as client:
            yield handle, client
    finally:
        await limited.destroy(handle)


async def run(
    provider: LocalProvider, handle: SandboxHandle, client: SandboxClient, command: str
) -> tuple[int | None, str, tuple[str, ...]]:
    """Exit code, stderr and the limits hit by ``command``."""
    before = await provider.usage(handle)
    record = await client.exec(f"c{abs(hash(command))}", command, timeout_s=60)
    after = await provider.usage(handle)
    return record.exit_code, record.stderr, after.hits_since(before, failed=record.exit_code != 0)


@pytest.mark.parametrize(("path", "size_mib"), [("/tmp", 4), ("/dev/shm", 2), ("/workspace", 8)])
async def test_filling_a_writable_directory_stops_at_its_size_and_names_it(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient], path: str, size_mib: int
) -> None:
    handle, client = jail

    code, stderr, hits = await run(
        limited, handle, client, f"dd if=/dev/zero of={path}/big bs=1M count=64"
    )

    assert code != 0
    assert "No space left on device" in stderr
    assert hits == (
        f"No space left on {path}: it is full ({size_mib} MiB); delete files there to make room.",
    )
    code, _, hits = await run(limited, handle, client, f"rm {path}/big; echo ok > {path}/x")
    assert (code, hits) == (0, ())


async def test_nothing_but_the_three_tmpfs_is_writable(
    jail: tuple[SandboxHandle, SandboxClient],
) -> None:
    _, client = jail
    elsewhere = ["/", "/dev", "/etc", "/run", "/run/warroom", "/opt", "/root", "/usr", "/var"]
    probe = " ".join(
        f"(touch {d}/.w || mkdir {d}/.w || ln -s x {d}/.w || mkfifo {d}/.w) 2>/dev/null"
        f" && echo {d};"
        for d in elsewhere
    )

    record = await client.exec("where", f"{probe} true", timeout_s=10)

    assert record.stdout == ""  # no directory outside the three took a file
    command = "touch /tmp/a /dev/shm/a /workspace/a && ls /tmp"
    writable = await client.exec("three", command, timeout_s=10)
    assert writable.stdout == "a\n"


async def test_a_deleted_but_open_file_still_counts_against_its_directory(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jail
    # a file unlinked while open keeps its pages: writing through the descriptor stops
    # at /tmp's size all the same
    hidden = (
        "exec 3>/tmp/gone; rm /tmp/gone; dd if=/dev/zero bs=1M count=64 >&3;"
        " stat -L -c %s /dev/fd/3; ls -A /tmp"
    )

    code, stderr, _ = await run(limited, handle, client, hidden)
    record = await client.exec("again", hidden, timeout_s=30)

    assert code == 0
    assert "No space left on device" in stderr
    assert int(record.stdout) <= 4 * MIB  # and ls listed nothing


async def test_shared_memory_lives_in_the_sized_dev_shm(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jail
    # POSIX shared memory (shm_open) is a file in /dev/shm: a mapping larger than it
    # cannot be backed, and its writer gets SIGBUS past 2 MiB
    grab = (
        "python3 -c 'import mmap, os\n"
        'fd = os.open("/dev/shm/seg", os.O_CREAT | os.O_RDWR)\n'
        "os.ftruncate(fd, 64 << 20)\n"
        "m = mmap.mmap(fd, 64 << 20)\n"
        "for i in range(0, 64 << 20, 4096): m[i] = 1'"
    )

    code, _, hits = await run(limited, handle, client, grab)

    assert code == 128 + 7  # SIGBUS
    assert hits == (
        "No space left on /dev/shm: it is full (2 MiB); delete files there to make room.",
    )


async def test_many_small_files_fill_the_size_too(
    limited: LocalProvider, jail: tuple[SandboxHandle, SandboxClient]
) -> None:
    handle, client = jail
    # each file with data takes at least a page of the tmpfs: 4 MiB hold about a
    # thousand (empty files take no page: see the README on inodes)
    small = (
        "python3 -c 'n = 0\ntry:\n"
        "    while n < 100000:\n"
        '        with open(f"/tmp/f{n}", "w") as f: f.write("x")\n'
        "        n += 1\n"
        "except OSError as e: print(n, e.errno)'"
    )

    record = await client.exec("small", small, timeout_s=60)

    count, errno = map(int, record.stdout.split())
    assert errno == 28  # ENOSPC
    assert count <= 4 * MIB // 4096
    assert (await limited.usage(handle)).full_filesystems() == {"/tmp": 4 * MIB}


async def test_mounts_cannot_add_writable_space(
    jail: tuple[SandboxHandle, SandboxClient],
) -> None:
    _, client = jail
    attempts = {
        "tmpfs": "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m",
        "bind": "mount --bind /workspace /run/warroom",
        "remount": "mount -o remount,size=1G /tmp",
        "namespace": "unshare -rm sh -c 'mount -t tmpfs none /opt && touch /opt/x'",
    }

    for what, command in attempts.items():
        record = await client.exec(f"m-{what}", command, timeout_s=10)
        assert record.exit_code != 0, (what, record)
    assert (await client.exec("df", "df -k /tmp | tail -1", timeout_s=10)).stdout.split()[
        1
    ] == "4096"


async def test_posix_message_queues_stay_small(
    jail: tuple[SandboxHandle, SandboxClient],
) -> None:
    _, client = jail
    # message queues are kernel memory outside every tmpfs: RLIMIT_MSGQUEUE (800 KiB by
    # default) and the jail's own IPC namespace bound them
    grab = (
        "python3 -c 'import ctypes, os\n"
        'rt = ctypes.CDLL("librt.so.1", use_errno=True)\n'
        "n = 0\n"
        "flags = os.O_CREAT | os.O_RDWR\n"
        'while n < 10000 and rt.mq_open(f"/q{n}".encode(), flags, 0o600, None) >= 0:'
        " n += 1\n"
        "print(n, ctypes.get_errno())'"
    )

    record = await client.exec("mq", grab, timeout_s=30)

    count, errno = map(int, record.stdout.split())
    assert count < 300, record  # at most the namespace's queues_max (256)
    assert errno in (12, 24, 28)  # ENOMEM (the rlimit), EMFILE, ENOSPC (queues_max)
