"""Starting a jail detached from the caller, inside its cgroup, and waiting until it serves.

A tiny ``sh`` moves itself into the sandbox's cgroups (the freezer's, and the v1
hierarchies that hold its limits, so every process of the jail is born there), starts
``bwrap`` in the background and exits: the jail is re-parented away from the harness,
survives it, and is never the harness's child to reap. Two pipes report back: bwrap's
``--info-fd`` JSON (the jail's init pid) and the server's ``ready`` line once it listens.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox_client.providers.local import procfs

_DETACH = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 97; shift; done; shift; "$@" &'


class LaunchFailed(Exception):
    """The jail did not start serving; ``reason`` holds what bwrap or the server said."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
) -> Launched:
    """Start ``build_argv(info_fd, ready_fd)`` detached, inside the cgroups whose
    ``cgroup.procs`` files are ``procs_files``, and wait for ``ready``.

    Raises:
        LaunchFailed: it exited, or did not become ready within ``timeout_s``.
    """
    info_r, info_w = os.pipe()
    ready_r, ready_w = os.pipe()
    try:
        argv = build_argv(info_w, ready_w)
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            detacher = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", _DETACH, "sh", *procs_files, "--", *argv,
                env={},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(info_w, ready_w),
                start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(log)
        os.close(info_w)
        os.close(ready_w)
        info_w = ready_w = -1
        if await detacher.wait() != 0:
            raise LaunchFailed("could not join the sandbox's cgroups")
        async with asyncio.timeout(timeout_s):
            info = await _read_until(info_r, b"}")
            pid = int(json.loads(info)["child-pid"])
            ready = await _read_until(ready_r, b"\n")
    except TimeoutError as exc:
        raise LaunchFailed(f"not ready within {timeout_s:g} s") from exc
    except (ValueError, KeyError) as exc:
        raise LaunchFailed(f"unreadable bwrap info: {exc}") from exc
    finally:
        for fd in (info_r, info_w, ready_r, ready_w):
            if fd >= 0:
                os.close(fd)
    ticks = procfs.start_ticks(pid)
    if ready != b"ready\n" or ticks is None:
        raise LaunchFailed("the sandbox server exited during start-up")
    return Launched(pid=pid, start_ticks=ticks)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _read_until(fd: int, end: bytes) -> bytes:
    """Read ``fd`` until ``end`` has been read or the writers closed it."""
    loop = asyncio.get_running_loop()
    data = bytearray()
    while not data.endswith(end):
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _resolve, readable)
        try:
            await readable
        finally:
            loop.remove_reader(fd)
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return bytes(data)
