"""Spawning a command in its own session and awaiting its exit through a pidfd."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Callable


def spawn(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    stdout: int,
    stderr: int,
    enter: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as leader of a new session and process group, stdin from /dev/null;
    ``enter`` runs in the child before ``exec`` (``isolation.Isolation.enter``).

    Raises:
        OSError: the program or the working directory is unusable, or ``enter`` failed (the
            program did not run).
    """
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=enter,
        )
    except subprocess.SubprocessError as exc:  # what Popen raises when ``enter`` raised
        raise OSError(f"cannot isolate the command: {exc}") from exc


async def wait_exit(child: subprocess.Popen[bytes]) -> int:
    """The child's return code (negative for a signal), without blocking the loop.

    Uses a pidfd (Linux ≥ 5.3): no thread per child, no SIGCHLD handler. Falls back to
    a worker thread where pidfds are missing.
    """
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        return await asyncio.to_thread(child.wait)
    loop = asyncio.get_running_loop()
    exited = loop.create_future()
    loop.add_reader(pidfd, _resolve, exited)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    return child.wait()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
