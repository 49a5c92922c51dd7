"""One command running in the sandbox: its process group, capped output and exit status."""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import time

from .capture import HeadTail
from .child import Child, Spawner, wait_exit
from .loop import Event, Queue, Task, create_task, sleep, timeout
from .pipe import PipeReader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_GONE_POLL_S = 0.005
"""How often a kill looks whether its group is gone (the kernel has no wait for a group)."""

Output = tuple[str, str]  # ("stdout" | "stderr", text), a subscription's queue item


def http_date(seconds: float) -> str:
    """RFC 1123 time, as Blaxel's sandbox API writes it: ``Mon, 02 Jan 2006 15:04:05 GMT``."""
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(seconds))


class Subscription:
    """The live output of one process for one streaming reply, capped at ``budget_bytes``.

    Once the budget is spent, further output is not queued (the final record still
    carries the captured head and tail), so a slow reader cannot make memory grow.
    ``None`` in the queue means the process has finished.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.queue = Queue()  # of Output, then None
        self._budget = budget_bytes
        self._decoders = {
            name: codecs.getincrementaldecoder("utf-8")("replace") for name in ("stdout", "stderr")
        }

    def offer(self, stream: str, data: bytes) -> None:
        """Queue ``data`` as text if budget remains."""
        if self._budget <= 0:
            return
        data = data[: self._budget]
        self._budget -= len(data)
        text = self._decoders[stream].decode(data)
        if text:
            self.queue.put_nowait((stream, text))


class Process:
    """A started command: ``sh -c`` in its own session and process group.

    Output goes to two pipes read by the event loop into head-and-tail buffers.
    After the shell exits, output still arriving from leftover children is read for
    ``drain_s`` and then the pipes are closed, so a command that forks a background
    tree and exits finishes promptly; the tree stays in the group for ``signal``.
    """

    def __init__(self, name: str, command: str, working_dir: str, max_output_bytes: int) -> None:
        self.name = name
        self.command = command
        self.working_dir = working_dir
        self.pid = 0
        self.started_at = time.time()
        self.completed_at: float | None = None
        self.status = "running"
        self.exit_code: int | None = None
        self.done = Event()
        self._max_output_bytes = max_output_bytes
        self._outputs = {"stdout": HeadTail(max_output_bytes), "stderr": HeadTail(max_output_bytes)}
        self._logs = HeadTail(max_output_bytes)
        self._subscribers: list[Subscription] = []
        self._signal_sent: int | None = None
        self._task: Task | None = None

    async def start(
        self, spawner: Spawner, shell: str, env: dict[str, str], drain_s: float
    ) -> None:
        """Start the command (``shell -c command``, through ``spawner``) and begin collecting
        its output.

        Raises:
            OSError: the shell or the working directory is unusable, or the command could
                not be isolated.
        """
        child = await spawner.spawn([shell, "-c", self.command], self.working_dir, env)
        self.pid = child.pid
        readers = [
            PipeReader(child.stdout, self._collector("stdout")),
            PipeReader(child.stderr, self._collector("stderr")),
        ]
        self._task = create_task(self._finish_after(child, readers, drain_s))

    def _collector(self, stream: str) -> Callable[[bytes], None]:
        def collect(data: bytes) -> None:
            self._outputs[stream].append(data)
            self._logs.append(data)
            for sub in self._subscribers:
                sub.offer(stream, data)

        return collect

    async def _finish_after(self, child: Child, readers: list[PipeReader], drain_s: float) -> None:
        returncode = await wait_exit(child.pid)
        with contextlib.suppress(TimeoutError):
            async with timeout(drain_s):
                for reader in readers:
                    await reader.eof.wait()
        for reader in readers:
            reader.close()
        self._conclude(returncode)

    def _conclude(self, returncode: int) -> None:
        self.completed_at = time.time()
        self.exit_code = returncode if returncode >= 0 else 128 - returncode
        if self._signal_sent == signal.SIGKILL:
            self.status = "killed"
        elif self._signal_sent is not None:
            self.status = "stopped"
        else:
            self.status = "completed" if returncode == 0 else "failed"
        for sub in self._subscribers:
            sub.queue.put_nowait(None)
        self._subscribers.clear()
        self.done.set()

    def subscribe(self) -> Subscription:
        """Live output from now on; the queue ends with ``None`` when the process is done."""
        sub = Subscription(self._max_output_bytes)
        if self.done.is_set():
            sub.queue.put_nowait(None)
        else:
            self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop feeding ``sub`` (its reader went away)."""
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the whole process group (also after the shell exited)."""
        if not self.done.is_set():
            self._signal_sent = signum
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    async def group_gone(self, *, timeout_s: float) -> bool:
        """Wait until no process of the group is left, reaped ones included (a killed
        process lingers until its parent, or the jail's init, reaps it); False when some
        still are after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                os.killpg(self.pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
            if time.monotonic() >= deadline:
                return False
            await sleep(_GONE_POLL_S)

    @property
    def retained_bytes(self) -> int:
        """Bytes of output this record holds (at most three times the cap)."""
        buffers = (*self._outputs.values(), self._logs)
        return sum(b.total_bytes - b.omitted_bytes for b in buffers)

    def logs(self) -> dict[str, str]:
        """``{"logs", "stdout", "stderr"}``: the captured output, as SBX/1 shows it."""
        return {
            "logs": self._logs.text(),
            "stdout": self._outputs["stdout"].text(),
            "stderr": self._outputs["stderr"].text(),
        }

    def record(self) -> dict[str, object]:
        """The SBX/1 process record (Blaxel's ``ProcessResponse`` fields we support)."""
        return {
            "pid": str(self.pid),
            "name": self.name,
            "command": self.command,
            "status": self.status,
            "startedAt": http_date(self.started_at),
            "completedAt": http_date(self.completed_at) if self.completed_at else None,
            "exitCode": self.exit_code if self.exit_code is not None else 0,
            "workingDir": self.working_dir,
            **self.logs(),
        }
