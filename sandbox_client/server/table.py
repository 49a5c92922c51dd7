"""The server's process table: start by name, find by name or pid, forget the oldest."""

from __future__ import annotations

import os
import signal

from .child import Spawner
from .config import ServerConfig
from .http import HttpError
from .isolation import Isolation
from .process import Process

MAX_NAME_CHARS = 256


class ProcessTable:
    """Every process this sandbox has run, by name (Blaxel semantics).

    A name that is running cannot be started again (400, as Blaxel answers); a
    finished name can (the new run replaces the old record). At most
    ``max_processes`` finished records, holding ``max_retained_bytes`` of output, are
    kept. Each command runs in its own Landlock domain (``isolation``), out of reach of the
    others' processes, started by a process forked ahead of time (``child.Spawner``).
    """

    def __init__(self, config: ServerConfig, isolation: Isolation | None = None) -> None:
        self._config = config
        self._isolation = isolation
        self._spawner: Spawner | None = None
        self._by_name: dict[str, Process] = {}
        self._starting: set[str] = set()  # names whose process is being started

    @property
    def isolation(self) -> Isolation:
        """How commands are kept apart; prepared at the first use (``prepare``), not before
        the server says it is ready."""
        if self._isolation is None:
            self._isolation = Isolation.open()
        return self._isolation

    @property
    def spawner(self) -> Spawner:
        """What starts the commands (each in a domain of its own)."""
        if self._spawner is None:
            self._spawner = Spawner(self.isolation.enter)
        return self._spawner

    def prepare(self) -> None:
        """Get the first command's way ready: the isolation (``ctypes``, the ruleset) and a
        spare process. Run once the server is ready, off the way of its start."""
        self.spawner.refill()

    def close(self) -> None:
        """Signal every process group and end the spare (server shutdown)."""
        self.signal_all(signal.SIGKILL)
        if self._spawner is not None:
            self._spawner.close()

    async def start(
        self, name: str, command: str, working_dir: str, env: dict[str, str]
    ) -> Process:
        """Start ``command`` under ``name`` (a generated name when empty).

        Raises:
            HttpError: 400 for a bad name or a name that is running, 422 when the
                command cannot be started (e.g. the working directory is missing).
        """
        name = name or f"proc-{os.urandom(6).hex()}"
        _check_name(name)
        existing = self._by_name.get(name)
        if name in self._starting or (existing is not None and not existing.done.is_set()):
            raise HttpError(400, f"process with name '{name}' already exists and is running")
        process = Process(name, command, working_dir, self._config.max_output_bytes)
        self._starting.add(name)
        try:
            environ = {**self._config.env, **env}
            await process.start(self.spawner, self._config.shell, environ, self._config.drain_s)
        except OSError as exc:
            raise HttpError(422, f"cannot start process: {exc.strerror or exc}") from exc
        finally:
            self._starting.discard(name)
        self._by_name.pop(name, None)
        self._by_name[name] = process
        self._forget_oldest()
        self.spawner.refill_after(process.done)
        return process

    def get(self, name: str) -> Process | None:
        """The process named ``name``, if known (not one still being started)."""
        return self._by_name.get(name)

    def find(self, identifier: str) -> Process:
        """The process named ``identifier``, or else the one with that pid.

        Raises:
            HttpError: 404 when there is none.
        """
        process = self._by_name.get(identifier)
        if process is None:
            process = next((p for p in self._by_name.values() if str(p.pid) == identifier), None)
        if process is None:
            raise HttpError(404, "process not found")
        return process

    def all(self) -> list[Process]:
        """Every known process, oldest first."""
        return list(self._by_name.values())

    def signal_all(self, signum: int = signal.SIGKILL) -> None:
        """Signal every process group (server shutdown)."""
        for process in self._by_name.values():
            process.signal(signum)

    def _forget_oldest(self) -> None:
        finished = [(n, p.retained_bytes) for n, p in self._by_name.items() if p.done.is_set()]
        excess_records = len(finished) - self._config.max_processes
        excess_bytes = sum(size for _, size in finished) - self._config.max_retained_bytes
        for name, size in finished:
            if excess_records <= 0 and excess_bytes <= 0:
                break
            del self._by_name[name]
            excess_records -= 1
            excess_bytes -= size


def _check_name(name: str) -> None:
    if len(name) > MAX_NAME_CHARS or "/" in name or not name.isprintable():
        message = f"invalid process name: at most {MAX_NAME_CHARS} printable characters, no '/'"
        raise HttpError(400, message)
