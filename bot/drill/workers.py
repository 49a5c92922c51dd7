"""The full drill's workers: real ``dramatiq bot.durable.worker_main`` processes,
as ``warroom worker``
starts them.

Each worker is a Dramatiq parent with one worker process (``--processes 1``), in its
own session, logging to ``<log_dir>/worker-<n>.log``, with an environment made from
the drill's settings (``child_environment``). A worker process's lease owner
``<host>:<pid>:<random>`` names its pid, so the drill can SIGKILL exactly the process
running a step — only ever a child of a parent it started. When a worker process
dies its Dramatiq parent shuts down too (Dramatiq's CLI), so a killed worker is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.cli.signals import die_with_parent
from bot.cli.worker import dramatiq_argv
from bot.drill.errors import DrillError, DrillStalled

READY_LINE = "Worker process is ready for action."
POLL_S = 0.05


@dataclass
class Worker:
    """One Dramatiq parent and its log."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        """Whether the parent still runs."""
        return self.process.poll() is None

    def log(self) -> str:
        """What the parent and its worker process logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def children(self) -> set[int]:
        """Pids of the parent's children (its worker process)."""
        found: set[int] = set()
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.process.pid}/task").iterdir():
                found |= {int(p) for p in (task / "children").read_text().split()}
        return found


class WorkerPool:
    """``size`` workers sharing one environment (see the module docstring)."""

    def __init__(
        self, env: Mapping[str, str], log_dir: Path, *, size: int, threads: int = 2
    ) -> None:
        self._env = dict(env)
        self._log_dir = log_dir
        self._size = size
        self._threads = threads
        self.workers: list[Worker] = []

    def start(self) -> None:
        """Start the workers (returns at once; see ``wait_ready``).

        Raises:
            OSError: a process could not be started.
        """
        self._log_dir.mkdir(parents=True, exist_ok=True)
        argv = dramatiq_argv(processes=1, threads=self._threads, with_metrics=False)
        for n in range(1, self._size + 1):
            log_path = self._log_dir / f"worker-{n}.log"
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    argv,
                    env=self._env,
                    cwd=self._log_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_parent,  # no orphan polls Redis if the drill is killed
                )
            self.workers.append(Worker(process, log_path))

    async def wait_ready(self, *, timeout_s: float) -> None:
        """Return once every worker process has said it is ready.

        Raises:
            DrillError: a worker exited first (its log's tail is in the message).
            DrillStalled: not ready within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while not all(READY_LINE in w.log() for w in self.workers):
            for worker in self.workers:
                if not worker.alive():
                    raise DrillError(f"a worker failed to start:\n{worker.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise DrillStalled("the workers to start", timeout_s)
            await asyncio.sleep(POLL_S)

    def kill(self, pid: int) -> bool:
        """SIGKILL worker process ``pid`` if it is a child of one of this pool's parents.

        Returns whether a signal was sent.
        """
        if not any(pid in w.children() for w in self.workers if w.alive()):
            return False
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True

    def running(self, pid: int) -> bool:
        """Whether worker process ``pid`` is still a live child of this pool."""
        return any(pid in w.children() for w in self.workers if w.alive())

    def stop(self, *, timeout_s: float = 15.0) -> None:
        """SIGTERM each parent (running steps finish), then SIGKILL what is left. Blocks."""
        for worker in self.workers:
            if worker.alive():
                worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for worker in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(max(0.1, deadline - time.monotonic()))
            if worker.alive():  # its group is still ours: the parent is not reaped yet
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.process.pid, signal.SIGKILL)
                worker.process.wait()
