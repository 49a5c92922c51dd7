"""Suspending a jail: cgroup v2 freeze, cgroup v1 freezer, or SIGSTOP as a last resort.

``detect()`` picks, at run time, the first that works here: a writable cgroup v2
hierarchy (``cgroup.freeze``), then a writable v1 ``freezer`` hierarchy
(``freezer.state``), then signals to every process of the jail. A frozen jail's
tasks do not run at all; a SIGSTOPped one is the same from the outside, except that a
process inside that stops itself would be continued on thaw.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandbox_client.providers.local import procfs

PARENT_NAME = "warroom-sandboxes"
SETTLE_TIMEOUT_S = 2.0
POLL_S = 0.001


@dataclass(frozen=True)
class Freezer:
    """One way to suspend jails.

    Attributes:
        kind: ``"cgroup2"``, ``"cgroup1"`` or ``"signal"``.
        parent: the cgroup directory that holds one child per sandbox (None for signals).
    """

    kind: str
    parent: Path | None = None

    def create_cgroup(self, sandbox_id: str) -> Path | None:
        """Make the sandbox's cgroup (None for signals).

        Raises:
            OSError: the hierarchy is not writable.
        """
        if self.parent is None:
            return None
        path = self.parent / sandbox_id
        path.mkdir(exist_ok=True)
        return path

    @staticmethod
    def procs_file(cgroup: Path | None) -> str:
        """The file a process writes its pid to in order to join ``cgroup`` ("" for none)."""
        return str(cgroup / "cgroup.procs") if cgroup else ""

    async def freeze(self, cgroup: Path | None, init_pid: int) -> None:
        """Stop every task of the jail and wait until the kernel says they are stopped."""
        if self.kind == "cgroup2" and cgroup:
            _write(cgroup / "cgroup.freeze", "1")
            await _settle(lambda: "frozen 1" in _read(cgroup / "cgroup.events"))
        elif self.kind == "cgroup1" and cgroup:
            _write(cgroup / "freezer.state", "FROZEN")
            await _settle(lambda: _read(cgroup / "freezer.state") == "FROZEN")
        else:
            _signal_tree(init_pid, signal.SIGSTOP)
            await _settle(lambda: _all_stopped(init_pid))

    def thaw(self, cgroup: Path | None, init_pid: int) -> None:
        """Let every task of the jail run again."""
        if self.kind == "cgroup2" and cgroup:
            _write(cgroup / "cgroup.freeze", "0")
        elif self.kind == "cgroup1" and cgroup:
            _write(cgroup / "freezer.state", "THAWED")
        else:
            for pid in reversed(procfs.descendants(init_pid)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def is_frozen(self, cgroup: Path | None, init_pid: int) -> bool:
        """True when the jail is (being) frozen."""
        if self.kind == "cgroup2" and cgroup:
            return _read(cgroup / "cgroup.freeze") == "1"
        if self.kind == "cgroup1" and cgroup:
            return _read(cgroup / "freezer.state") in ("FROZEN", "FREEZING")
        return procfs.state(init_pid) in ("T", "t")

    def kill_all(self, cgroup: Path | None) -> None:
        """SIGKILL every task of the cgroup (the jail's init is killed separately)."""
        if cgroup is None:
            return
        if self.kind == "cgroup2" and (cgroup / "cgroup.kill").exists():
            _write(cgroup / "cgroup.kill", "1")
            return
        for pid in _members(cgroup):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    async def remove(self, cgroup: Path | None) -> None:
        """Remove the cgroup once its last task is gone (best effort)."""
        if cgroup is None:
            return
        with contextlib.suppress(TimeoutError):
            await _settle(lambda: not _members(cgroup), timeout_s=5.0)
        with contextlib.suppress(OSError):
            os.rmdir(cgroup)


def _signal_tree(init_pid: int, signum: int) -> None:
    """Signal the jail's init and all its descendants until no new one appears."""
    done: set[int] = set()
    while pending := [p for p in procfs.descendants(init_pid) if p not in done]:
        for pid in pending:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
            done.add(pid)


def _all_stopped(init_pid: int) -> bool:
    """True once no process of the jail can run (SIGSTOP is delivered asynchronously)."""
    return all(
        procfs.state(pid) in (None, "T", "t", "Z", "X") for pid in procfs.descendants(init_pid)
    )


def _members(cgroup: Path) -> list[int]:
    try:
        return [int(line) for line in _read(cgroup / "cgroup.procs").split()]
    except OSError:
        return []


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    path.write_text(value)


async def _settle(done: Callable[[], bool], timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Poll ``done()`` every millisecond until true (a kernel state change, no event)."""
    async with asyncio.timeout(timeout_s):
        while not done():  # noqa: ASYNC110 - a kernel state with no event to wait on
            await asyncio.sleep(POLL_S)


def detect(kinds: tuple[str, ...] = ("cgroup2", "cgroup1")) -> Freezer:
    """The first of ``kinds`` this process can use (v2 before v1), else signals."""
    for kind, mount in _mounts():
        if kind not in kinds:
            continue
        for base in _bases(kind, mount):
            freezer = _try_parent(kind, base / PARENT_NAME)
            if freezer is not None:
                return freezer
    return Freezer("signal")


def freezer_of(kind: str, cgroup: str | None) -> Freezer:
    """The freezer a handle recorded (``kind`` and its cgroup's parent directory)."""
    return Freezer(kind, Path(cgroup).parent if cgroup else None)


def _mounts() -> list[tuple[str, Path]]:
    """(kind, mount point) of cgroup hierarchies, v2 first."""
    found: list[tuple[str, Path]] = []
    with contextlib.suppress(OSError), open("/proc/self/mounts") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) < 4:
                continue
            if parts[2] == "cgroup2":
                found.append(("cgroup2", Path(parts[1])))
            elif parts[2] == "cgroup" and "freezer" in parts[3].split(","):
                found.append(("cgroup1", Path(parts[1])))
    return sorted(found, key=lambda item: item[0] != "cgroup2")


def _bases(kind: str, mount: Path) -> list[Path]:
    """Where to make our parent cgroup: the hierarchy's root, then our own cgroup."""
    bases = [mount]
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            mine = (kind == "cgroup2" and controllers == "") or "freezer" in controllers.split(",")
            if mine and path not in ("", "/"):
                bases.append(mount / path.lstrip("/"))
    return bases


def _try_parent(kind: str, parent: Path) -> Freezer | None:
    control = "cgroup.freeze" if kind == "cgroup2" else "freezer.state"
    probe = parent / f"probe-{os.getpid()}"
    try:
        parent.mkdir(exist_ok=True)
        probe.mkdir(exist_ok=True)
        usable = os.access(probe / control, os.W_OK) and os.access(probe / "cgroup.procs", os.W_OK)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    return Freezer(kind, parent) if usable else None
