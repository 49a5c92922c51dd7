"""What ``/proc`` says about a process: alive or not, its start time, its descendants."""

from __future__ import annotations

import os

# Indexes into the fields after the ``(comm)`` part of /proc/PID/stat (proc(5) numbers
# them from 1 with comm as field 2: state is field 3, ppid 4, starttime 22).
_STATE, _PPID, _START_TICKS = 0, 1, 19


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("latin-1")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None when it does not exist."""
    fields = _stat(pid)
    return int(fields[_START_TICKS]) if fields else None


def state(pid: int) -> str | None:
    """The one-letter state (``R``, ``S``, ``T`` stopped, ``Z`` zombie, …); None if absent."""
    fields = _stat(pid)
    return fields[_STATE] if fields else None


def is_alive(pid: int, ticks: int | None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if ``ticks`` is given, started then."""
    fields = _stat(pid)
    if fields is None or fields[_STATE] in ("Z", "X", "x"):
        return False
    return ticks is None or int(fields[_START_TICKS]) == ticks


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, parents before children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            children.setdefault(int(fields[_PPID]), []).append(int(entry))
    found = [root]
    for pid in found:
        found.extend(children.get(pid, []))
    return found
