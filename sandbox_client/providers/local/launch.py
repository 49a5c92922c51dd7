"""Starting a jail detached from the caller, inside its cgroup, and waiting until it serves.

A tiny ``sh`` moves itself into the sandbox's cgroups (the freezer's, and the v1
hierarchies that hold its limits, so every process of the jail is born there), starts
``bwrap`` in the background and exits: the jail is re-parented away from the harness,
survives it, and is never the harness's child to reap. Two pipes report back: bwrap's
``--info-fd`` JSON (the jail's init pid) and the server's ``ready`` line once it listens.

The jail's standard output and error are a third pipe, copied into the log file only
while the jail starts; then its read end is closed. The jail never holds a descriptor
of a host file: its processes can open their init's descriptors (``/proc/1/fd/2``),
and a log file there would let them fill the host's disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox_client.providers.local import procfs

LOG_TAIL_BYTES = 1024 * 1024
_DETACH = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 97; shift; done; shift; "$@" &'


class LaunchFailed(Exception):
    """The jail did not start serving; ``reason`` holds what bwrap or the server said.

    ``permanent``: it refused (bwrap or the server exited, the cgroups could not be
    joined), so the next try fails the same way; False when it was only not ready in time.
    """

    def __init__(self, reason: str, *, permanent: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


@dataclass(frozen=True)
class Launched:
    """The running jail: its init process (pid 1 of its pid namespace)."""

    pid: int
    start_ticks: int


async def launch(
    build_argv: Callable[[int, int], list[str]],
    *,
    procs_files: Sequence[str],
    log_path: Path,
    timeout_s: float,
    pass_fds: Sequence[int] = (),
) -> Launched:
    """Start ``build_argv(info_fd, ready_fd)`` detached, inside the cgroups whose
    ``cgroup.procs`` files are ``procs_files``, and wait for ``ready``; ``pass_fds``
    are inherited by the jail too (the server's bound socket). What the jail writes to
    its standard output and error until then goes to ``log_path``, later output nowhere.

    Raises:
        LaunchFailed: it exited (``permanent``), or did not become ready within
            ``timeout_s`` (not ``permanent``).
    """
    info_r, info_w = os.pipe()
    ready_r, ready_w = os.pipe()
    log_r, log_w = os.pipe()
    writes: list[asyncio.Future[None]] = []
    copier = asyncio.create_task(_copy(log_r, log_path, writes))
    try:
        argv = build_argv(info_w, ready_w)
        detacher = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", _DETACH, "sh", *procs_files, "--", *argv,
            env={},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log_w,
            stderr=log_w,
            pass_fds=(info_w, ready_w, *pass_fds),
            start_new_session=True,
        )  # fmt: skip
        for fd in (info_w, ready_w, log_w):
            os.close(fd)
        info_w = ready_w = log_w = -1
        if await detacher.wait() != 0:
            raise LaunchFailed("could not join the sandbox's cgroups")
        async with asyncio.timeout(timeout_s):
            info = await _read_until(info_r, b"}")
            pid = int(json.loads(info)["child-pid"])
            ready = await _read_until(ready_r, b"\n")
    except TimeoutError as exc:
        raise LaunchFailed(f"not ready within {timeout_s:g} s", permanent=False) from exc
    except (ValueError, KeyError) as exc:  # its info pipe closed empty: bwrap exited
        raise LaunchFailed("bubblewrap exited without starting the jail") from exc
    finally:
        for fd in (info_r, info_w, ready_r, ready_w, log_w):
            if fd >= 0:
                os.close(fd)
        await _stop_copying(copier, writes, log_r, log_path)
    ticks = procfs.start_ticks(pid)
    if ready != b"ready\n" or ticks is None:
        raise LaunchFailed("the sandbox server exited during start-up")
    return Launched(pid=pid, start_ticks=ticks)


async def _copy(fd: int, log_path: Path, writes: list[asyncio.Future[None]]) -> None:
    """Append what the pipe ``fd`` carries to ``log_path`` until cancelled or its end;
    each append is in ``writes`` (cancelling the copy does not cancel a write under way)."""
    while chunk := await _read_some(fd):
        write = asyncio.ensure_future(asyncio.to_thread(_append, log_path, chunk))
        writes.append(write)
        await asyncio.shield(write)


async def _stop_copying(
    copier: asyncio.Task[None], writes: list[asyncio.Future[None]], fd: int, log_path: Path
) -> None:
    """Stop ``copier`` once its writes are done (the log holds what bwrap said before it
    exited, in order), append what the pipe ``fd`` holds now (at most
    ``LOG_TAIL_BYTES``), and close it: the jail's later writes get EPIPE."""
    copier.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await copier
    await asyncio.gather(*writes, return_exceptions=True)
    os.set_blocking(fd, False)
    tail = bytearray()
    with contextlib.suppress(BlockingIOError):
        while len(tail) < LOG_TAIL_BYTES and (chunk := os.read(fd, 65536)):
            tail += chunk
    os.close(fd)
    if tail:
        await asyncio.to_thread(_append, log_path, bytes(tail))


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


async def _read_some(fd: int) -> bytes:
    """The next bytes of ``fd`` once readable (b"" at its end)."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, _resolve, readable)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
    return os.read(fd, 65536)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _read_until(fd: int, end: bytes) -> bytes:
    """Read ``fd`` until ``end`` has been read or the writers closed it."""
    data = bytearray()
    while not data.endswith(end):
        chunk = await _read_some(fd)
        if not chunk:
            break
        data += chunk
    return bytes(data)
