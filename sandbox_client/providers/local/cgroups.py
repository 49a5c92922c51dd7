"""Where this host can enforce a jail's limits: cgroup v2, cgroup v1, or neither.

``detect(v2_parent)`` looks once per provider. cgroup v2 is used when the freezer's
parent cgroup (``warroom-sandboxes`` in the unified hierarchy) has the ``memory``,
``pids`` or ``cpu`` controller, or can be given it (``+memory`` in the
``cgroup.subtree_control`` of it and its parent); limits are then written into the
jail's own cgroup (``memory.max``, ``memory.swap.max``, ``pids.max``, ``cpu.max``).
Otherwise a writable v1 hierarchy of that controller is used (hybrid hosts:
``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes``, ``pids.max``,
``cpu.cfs_quota_us``), one ``warroom-sandboxes/<id>`` directory per jail. A controller
found in neither is left to resource limits of the jail's first process (``rlimit``),
or to nothing (``cpu``). File names: the kernel's cgroup-v2 and cgroup-v1 documents.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from sandbox_client.providers.local.limits import JailLimits

PARENT_NAME = "warroom-sandboxes"
CONTROLLERS = ("memory", "pids", "cpu")
_V1_PROBE = {"memory": "memory.limit_in_bytes", "pids": "pids.max", "cpu": "cpu.cfs_quota_us"}
_FALLBACK = {"memory": "rlimit", "pids": "rlimit", "cpu": "none"}


@dataclass(frozen=True)
class Enforcer:
    """How each limit is enforced here.

    Attributes:
        v2: controllers available in the jails' v2 cgroups.
        v1_parents: controller -> the v1 directory holding one child per jail.
    """

    v2: frozenset[str] = frozenset()
    v1_parents: Mapping[str, Path] = field(default_factory=lambda: MappingProxyType({}))

    def how(self, controller: str) -> str:
        """``"cgroup2"``, ``"cgroup1"``, ``"rlimit"`` or ``"none"`` for ``controller``."""
        if controller in self.v2:
            return "cgroup2"
        if controller in self.v1_parents:
            return "cgroup1"
        return _FALLBACK[controller]

    def apply(self, sandbox_id: str, v2_cgroup: Path | None, limits: JailLimits) -> list[Path]:
        """Write ``limits`` for a new jail; returns the v1 directories made for it.

        Raises:
            OSError: a cgroup could not be made or written (the caller discards the
                directories already made: ``remove``).
        """
        made: list[Path] = []
        try:
            if v2_cgroup is not None:
                _write_v2(v2_cgroup, self.v2, limits)
            for controller, parent in sorted(self.v1_parents.items()):
                path = parent / sandbox_id
                path.mkdir(exist_ok=True)
                made.append(path)
                _write_v1(path, controller, limits)
        except OSError:
            remove(made)
            raise
        return made

    def rlimit_controllers(self) -> tuple[str, ...]:
        """Controllers left to resource limits of the jail's first process."""
        return tuple(c for c in CONTROLLERS if self.how(c) == "rlimit")


def detect(v2_parent: Path | None) -> Enforcer:
    """What this host offers (see the module docstring); never raises."""
    v2 = _enable_v2(v2_parent) if v2_parent is not None else frozenset()
    v1: dict[str, Path] = {}
    for controller, mount in _v1_mounts():
        if controller in v2 or controller in v1:
            continue
        parent = _usable_v1_parent(mount, controller)
        if parent is not None:
            v1[controller] = parent
    return Enforcer(v2, MappingProxyType(v1))


def _enable_v2(parent: Path) -> frozenset[str]:
    """Controllers the jails' cgroups under ``parent`` get, enabling what can be."""
    for where in (parent.parent, parent):
        for controller in CONTROLLERS:
            if controller in _words(where / "cgroup.subtree_control"):
                continue
            with contextlib.suppress(OSError):
                (where / "cgroup.subtree_control").write_text(f"+{controller}")
    return frozenset(_words(parent / "cgroup.subtree_control")) & frozenset(CONTROLLERS)


def _write_v2(cgroup: Path, controllers: frozenset[str], limits: JailLimits) -> None:
    if "memory" in controllers and limits.cgroup_memory_bytes:
        (cgroup / "memory.max").write_text(str(limits.cgroup_memory_bytes))
        with contextlib.suppress(OSError):  # absent without swap accounting
            (cgroup / "memory.swap.max").write_text("0")
    if "pids" in controllers and limits.pids_max:
        (cgroup / "pids.max").write_text(str(limits.pids_max))
    if "cpu" in controllers and limits.cpu_quota_us:
        (cgroup / "cpu.max").write_text(f"{limits.cpu_quota_us} {limits.cpu_period_us}")


def _write_v1(path: Path, controller: str, limits: JailLimits) -> None:
    if controller == "memory" and limits.cgroup_memory_bytes:
        (path / "memory.limit_in_bytes").write_text(str(limits.cgroup_memory_bytes))
        with contextlib.suppress(OSError):  # memsw: absent without swap accounting
            (path / "memory.memsw.limit_in_bytes").write_text(str(limits.cgroup_memory_bytes))
    elif controller == "pids" and limits.pids_max:
        (path / "pids.max").write_text(str(limits.pids_max))
    elif controller == "cpu" and limits.cpu_quota_us:
        (path / "cpu.cfs_period_us").write_text(str(limits.cpu_period_us))
        (path / "cpu.cfs_quota_us").write_text(str(limits.cpu_quota_us))


def _v1_mounts() -> list[tuple[str, Path]]:
    """(controller, mount point) of v1 hierarchies holding memory, pids or cpu."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mounts") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) >= 4 and parts[2] == "cgroup":
                options = parts[3].split(",")
                found += [(c, Path(parts[1])) for c in CONTROLLERS if c in options]
    return found


def _usable_v1_parent(mount: Path, controller: str) -> Path | None:
    parent = mount / PARENT_NAME
    probe = parent / f"probe-{os.getpid()}"
    try:
        parent.mkdir(exist_ok=True)
        probe.mkdir(exist_ok=True)
        usable = os.access(probe / _V1_PROBE[controller], os.W_OK)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    return parent if usable else None


def remove(paths: list[Path] | tuple[Path, ...]) -> None:
    """Remove emptied cgroup directories (best effort: one with tasks stays)."""
    for path in paths:
        with contextlib.suppress(OSError):
            path.rmdir()


def counters(paths: list[Path]) -> tuple[int | None, int | None]:
    """(oom kills, refused forks) summed over the cgroup directories ``paths``;
    None where no directory counts that."""
    oom = pids = None
    for path in paths:
        for name in ("memory.events", "memory.oom_control"):
            if (value := _field(path / name, "oom_kill")) is not None:
                oom = (oom or 0) + value
        if (value := _field(path / "pids.events", "max")) is not None:
            pids = (pids or 0) + value
    return oom, pids


def _field(path: Path, key: str) -> int | None:
    """The number after ``key`` in a flat-keyed cgroup file; None if absent."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []
