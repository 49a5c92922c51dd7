"""Running the real ``warroom`` command in a subprocess, with a clean environment."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

WARROOM = str(Path(sys.executable).parent / "warroom")
_OURS = ("WARROOM_", "SLACK_", "ANTHROPIC_", "BL_", "PROMETHEUS_")
_URLS = ("DATABASE_URL", "REDIS_URL")


def warroom_env(data_dir: Path, **settings: str) -> dict[str, str]:
    """This environment without any Warroom setting, plus ``WARROOM_DATA_DIR`` and ``settings``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(_OURS) and name not in _URLS
    }
    env["WARROOM_DATA_DIR"] = str(data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **settings}


async def start(
    *args: str, env: dict[str, str], cwd: Path, stdin: bool = False
) -> asyncio.subprocess.Process:
    """``warroom ARGS…`` with piped stdout/stderr (and stdin when asked)."""
    return await asyncio.create_subprocess_exec(
        WARROOM,
        *args,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


class Output:
    """Everything a process printed on one stream so far, read line by line."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream
        self.lines: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self.lines)

    async def until(self, predicate: Callable[[str], bool], *, timeout_s: float = 60.0) -> str:
        """Read lines until ``predicate(text so far)``; AssertionError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self.text):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"not printed within {timeout_s} s; got:\n{self.text}")
            try:
                line = await asyncio.wait_for(self._stream.readline(), remaining)
            except TimeoutError:
                continue
            if not line:
                raise AssertionError(f"the stream ended first; got:\n{self.text}")
            self.lines.append(line.decode())
        return self.text


def terminate(*processes: asyncio.subprocess.Process) -> None:
    """SIGTERM each process still running (one that exited early, say at start, is left:
    signalling it raises, and the others would be left running)."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)


async def finish(process: asyncio.subprocess.Process, *, timeout_s: float = 60.0) -> int:
    """Wait for the exit code; kill the process and fail after ``timeout_s``."""
    try:
        return await asyncio.wait_for(process.wait(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"warroom did not exit within {timeout_s} s") from None
