"""What one local sandbox may take: memory, processes, CPU and writable space.

A value the composition root builds from its settings; the provider enforces it with
cgroups where the host lets it (``cgroups.Enforcer``) and with resource limits on the
jail's first process otherwise.

``/workspace`` is a size-limited tmpfs that bubblewrap mounts (``--size`` before
``--tmpfs``) rather than a loop-mounted image file: mounting an image needs real root
and a free loop device, which the unprivileged service user of the container image
has not got, while bubblewrap's tmpfs works wherever the jail itself does; it lives in
the jail's mount namespace, so the kernel frees it with the jail and nothing is left
on the host's disk to leak. The cost is that it is memory: its pages are charged to
the jail's memory cgroup, so the cgroup's limit is ``memory_max_bytes`` plus
``workspace_max_bytes`` (a full workspace never starves the processes), and the host
must have that much memory (or swap) for the sandboxes that run at once.

``/workspace`` is not the only place a program writes: ``/tmp`` and ``/dev/shm`` (POSIX
shared memory, semaphores) are tmpfs too, each sized (``tmp_max_bytes``,
``shm_max_bytes``) and charged with the workspace to the same memory budget
(``writable_max_bytes``). Everything else is read-only: the jail's root and ``/dev``
are remounted read-only once built. The sizes are mount options, so they hold on a host
without cgroups too; there, each tmpfs's inodes (kernel memory, not counted in its size)
and memory that is not a file in a mount (``memfd``, System V shared memory) are bounded
only by the per-process resource limits.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class JailLimits:
    """Per-sandbox limits (0 or None: no limit of that kind).

    Attributes:
        memory_max_bytes: memory of the jail's processes; past it the kernel kills one
            (cgroup ``memory.max``), or, without a memory cgroup, an allocation fails
            (``RLIMIT_AS`` of each process).
        pids_max: processes and threads at once (cgroup ``pids.max``; without one,
            ``RLIMIT_NPROC``, which the kernel does not apply to root).
        cpus: CPU time per wall-clock time, in cores (cgroup ``cpu.max``; no fallback).
        workspace_max_bytes: the size of ``/workspace`` (a tmpfs; writes past it fail
            with ENOSPC).
        cpu_period_us: the period ``cpus`` is measured over (cgroup ``cpu.max``).
        tmp_max_bytes: the size of ``/tmp`` (a tmpfs, like ``/workspace``).
        shm_max_bytes: the size of ``/dev/shm`` (a tmpfs, like ``/workspace``).
    """

    memory_max_bytes: int = 1024 * MIB
    pids_max: int = 256
    cpus: float = 1.0
    workspace_max_bytes: int = 1024 * MIB
    cpu_period_us: int = 100_000
    tmp_max_bytes: int = 256 * MIB
    shm_max_bytes: int = 64 * MIB

    def __post_init__(self) -> None:
        sizes = ("workspace_max_bytes", "tmp_max_bytes", "shm_max_bytes")
        for name in ("memory_max_bytes", "pids_max", *sizes):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 (no limit) or positive")
        if self.cpus < 0 or self.cpu_period_us < 1000:
            raise ValueError("cpus must be >= 0 and cpu_period_us >= 1000")
        if 0 < self.memory_max_bytes < 16 * MIB:
            raise ValueError("memory_max_bytes below 16 MiB cannot start a sandbox")
        if 0 < self.pids_max < 8:
            raise ValueError("pids_max below 8 cannot start a sandbox")

    @property
    def writable_max_bytes(self) -> int:
        """All the jail may write: ``/workspace``, ``/tmp`` and ``/dev/shm`` together."""
        return self.workspace_max_bytes + self.tmp_max_bytes + self.shm_max_bytes

    @property
    def cgroup_memory_bytes(self) -> int:
        """The memory cgroup's limit: processes plus every tmpfs (0: none)."""
        if not self.memory_max_bytes:
            return 0
        return self.memory_max_bytes + self.writable_max_bytes

    @property
    def cpu_quota_us(self) -> int:
        """Microseconds of CPU per ``cpu_period_us`` (0: no limit)."""
        return round(self.cpus * self.cpu_period_us)


NO_LIMITS = JailLimits(
    memory_max_bytes=0,
    pids_max=0,
    cpus=0.0,
    workspace_max_bytes=0,
    tmp_max_bytes=0,
    shm_max_bytes=0,
)
"""Nothing bounded (each tmpfs of the kernel's default size)."""
