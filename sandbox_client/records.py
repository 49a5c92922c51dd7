"""Typed values that cross the ``sandbox_client`` door.

All are frozen dataclasses or string enums. Times are aware UTC ``datetime``s; sizes
are bytes. A ``SandboxHandle`` is what the harness stores in the session checkpoint
(``to_json``/``from_json``), so that a new process can find the same sandbox.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from enum import StrEnum
from typing import Any


class ProcessStatus(StrEnum):
    """A process's state, as SBX/1 (Blaxel's ``ProcessResponse.status``) names it."""

    RUNNING = "running"
    COMPLETED = "completed"  # exited 0
    FAILED = "failed"  # exited non-zero, or died of a signal nobody asked for
    STOPPED = "stopped"  # ended after ``stop`` (SIGTERM to its group)
    KILLED = "killed"  # ended after ``kill`` (SIGKILL to its group)


@dataclass(frozen=True)
class ProcessRecord:
    """A process the sandbox knows by ``name`` (the harness uses the ``tool_use`` id).

    Attributes:
        exit_code: None while running; 128 + N after death by signal N.
        stdout, stderr, logs: captured output, UTF-8 with replacement characters;
            ``logs`` interleaves both. Over the sandbox's cap the middle is replaced by
            a ``[... N bytes omitted ...]`` line.
        timed_out: set by the client (not the sandbox) when ``exec`` killed the process
            because the caller's deadline passed.
    """

    name: str
    command: str
    status: ProcessStatus
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    logs: str = ""
    pid: int | None = None
    working_dir: str = ""
    started_at: datetime | None = None
    completed_at: datetime | None = None
    timed_out: bool = False

    @property
    def finished(self) -> bool:
        """True once the process has ended (any status but ``running``)."""
        return self.status is not ProcessStatus.RUNNING


@dataclass(frozen=True)
class OutputChunk:
    """A piece of live output: ``stream`` is ``"stdout"`` or ``"stderr"``."""

    stream: str
    text: str


@dataclass(frozen=True)
class DirEntry:
    """One entry of a directory listing (``size_bytes`` is None for directories)."""

    path: str
    name: str
    is_dir: bool
    size_bytes: int | None = None


class Health(StrEnum):
    """What a provider says about a sandbox (docs/architecture.md §8)."""

    READY = "READY"  # answering requests
    SUSPENDED = "SUSPENDED"  # frozen / on standby: resume before use
    STARTING = "STARTING"  # exists but does not answer yet
    GONE = "GONE"  # destroyed or dead: provision a new one


@dataclass(frozen=True)
class SandboxHandle:
    """How to reach one sandbox again, from any process.

    Attributes:
        provider: ``"local"`` or ``"blaxel"``.
        sandbox_id: the provider's name for it.
        url: the SBX/1 base URL (for local sandboxes a placeholder host; the
            connection goes through ``socket_path``).
        socket_path: local only: the host path of the server's Unix socket.
        pid: local only: the jail's init process (pid 1 of its pid namespace).
        pid_start_ticks: local only: that process's start time in clock ticks since
            boot (``/proc/PID/stat`` field 22), so a recycled pid is not mistaken for it.
        freezer: local only: ``"cgroup2"``, ``"cgroup1"`` or ``"signal"``.
        cgroup: local only: the cgroup directory used to freeze (empty for signals).
        state_dir: local only: the sandbox's directory on the host (socket, log, handle).
        limit_cgroups: local only: cgroup v1 directories holding the jail's limits
            (memory, pids, cpu), when the host enforces them there; v2 limits live in
            ``cgroup`` itself.
    """

    provider: str
    sandbox_id: str
    url: str
    socket_path: str | None = None
    pid: int | None = None
    pid_start_ticks: int | None = None
    freezer: str | None = None
    cgroup: str | None = None
    state_dir: str | None = None
    limit_cgroups: tuple[str, ...] = ()

    def to_json(self) -> str:
        """This handle as a JSON object (stable keys; unknown ones are ignored on load)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SandboxHandle:
        """Load a handle written by ``to_json``.

        Raises:
            ValueError: not a JSON object, or ``provider``/``sandbox_id``/``url`` missing.
        """
        data: Any = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a sandbox handle must be a JSON object")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(values.get("limit_cgroups"), list):
            values["limit_cgroups"] = tuple(str(p) for p in values["limit_cgroups"])
        try:
            return cls(**values)
        except TypeError as exc:
            raise ValueError(f"incomplete sandbox handle: {exc}") from exc


MIB = 1024 * 1024


@dataclass(frozen=True)
class SandboxUsage:
    """A sandbox's limits and how often it hit them, read at one moment.

    Counters only grow while the sandbox lives: compare two readings taken around a
    command (``hits_since``) to learn which limit that command ran into. A field is None
    when the provider does not enforce or cannot read that limit.

    Attributes:
        memory_max_bytes: processes' memory limit (the kernel kills past it).
        pids_max: the most processes and threads at once.
        workspace_max_bytes: the size of ``/workspace``.
        oom_kills: processes killed by the memory limit so far (cgroup
            ``memory.events``/``memory.oom_control`` ``oom_kill``).
        pids_refusals: forks refused by the process limit so far (``pids.events`` ``max``).
        workspace_free_bytes: room left in ``/workspace``.
        tmp_max_bytes, tmp_free_bytes: the same for ``/tmp``.
        shm_max_bytes, shm_free_bytes: the same for ``/dev/shm``.
    """

    memory_max_bytes: int | None = None
    pids_max: int | None = None
    workspace_max_bytes: int | None = None
    oom_kills: int | None = None
    pids_refusals: int | None = None
    workspace_free_bytes: int | None = None
    tmp_max_bytes: int | None = None
    tmp_free_bytes: int | None = None
    shm_max_bytes: int | None = None
    shm_free_bytes: int | None = None

    def hits_since(self, before: SandboxUsage, *, failed: bool = True) -> tuple[str, ...]:
        """What the model should be told: the limits hit between ``before`` and this
        reading, one sentence each (empty when none was). A full ``/workspace``, ``/tmp``
        or ``/dev/shm`` is named when it filled up meanwhile, or when it was full and the
        command ``failed``.

        >>> before = SandboxUsage(pids_max=64, oom_kills=0, pids_refusals=0)
        >>> after = SandboxUsage(pids_max=64, oom_kills=0, pids_refusals=3)
        >>> [note[:40] for note in after.hits_since(before)]
        ['Hit the sandbox process limit (64 proces']
        """
        notes = []
        if _grew(before.oom_kills, self.oom_kills):
            notes.append(
                f"Killed by the sandbox memory limit ({_mib(self.memory_max_bytes)}): "
                "a process used more memory than the sandbox allows."
            )
        if _grew(before.pids_refusals, self.pids_refusals):
            notes.append(
                f"Hit the sandbox process limit ({self.pids_max} processes and threads): "
                "new processes could not start."
            )
        was_full = before.full_filesystems()
        for path, max_bytes in self.full_filesystems().items():
            if failed or path not in was_full:
                notes.append(
                    f"No space left on {path}: it is full ({_mib(max_bytes)}); "
                    "delete files there to make room."
                )
        return tuple(notes)

    @property
    def workspace_full(self) -> bool:
        """True when ``/workspace`` is full (see ``full_filesystems``)."""
        return "/workspace" in self.full_filesystems()

    def full_filesystems(self) -> dict[str, int | None]:
        """The writable filesystems with less than 1 MiB left (or less than a sixteenth of
        a smaller one), each with its size."""
        sizes = {
            "/workspace": (self.workspace_max_bytes, self.workspace_free_bytes),
            "/tmp": (self.tmp_max_bytes, self.tmp_free_bytes),
            "/dev/shm": (self.shm_max_bytes, self.shm_free_bytes),
        }
        return {
            path: max_bytes
            for path, (max_bytes, free_bytes) in sizes.items()
            if free_bytes is not None and free_bytes < min(MIB, (max_bytes or 16 * MIB) // 16)
        }


def _grew(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and after > before


def _mib(size_bytes: int | None) -> str:
    return "unknown size" if size_bytes is None else f"{size_bytes // MIB} MiB"
