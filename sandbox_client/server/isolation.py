"""Each command in a Landlock domain of its own: no command can look into another's processes.

The processes of one jail share a user id, and Linux lets a process read the memory, the
environment and the open files of another with its user id (``/proc/<pid>/environ``,
``/proc/<pid>/mem``, ``/proc/<pid>/fd``, ``ptrace``) whenever that one is "dumpable", which
every program started from an ordinary file is. Landlock (Linux ≥ 5.13) adds a check that holds
whatever the program: a process in a Landlock domain may inspect only processes in its own
domain or in one nested inside it (the kernel's Landlock documentation, "Ptrace
restrictions"; every one of those ways in goes through that check). A domain is for life: it is
inherited by children and across ``exec``, and cannot be left.

The server runs outside any domain and starts each command in a fresh one, so a command's
processes are out of reach of every other command's (above all: the per-call proxy credential
in an approved call's environment, docs/architecture.md §13), and the server is out of reach of
them all. The domain restricts nothing else: it handles only making block devices, which an
unprivileged jail can never do anyway. Core dumps are switched off for the same reason (a
dump holds the environment, and another process may send the signal that makes one).

Where Landlock is missing (an older kernel, or one built without it) commands run as before,
and ``Isolation.available`` says so.
"""

from __future__ import annotations

import errno
import os
import resource
import socket
import struct

from .xattrs import compiled, deny_setxattr

TYPE_CHECKING = False  # ``typing`` costs import time at every sandbox start
if TYPE_CHECKING:
    from typing import Any

SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture (Linux ≥ 5.13)
SYS_LANDLOCK_RESTRICT_SELF = 446
ACCESS_FS_MAKE_BLOCK = 1 << 11  # LANDLOCK_ACCESS_FS_MAKE_BLOCK, ABI 1
PR_SET_NO_NEW_PRIVS = 38  # landlock_restrict_self needs it (or CAP_SYS_ADMIN)
CREATE_RULESET_VERSION = 1  # LANDLOCK_CREATE_RULESET_VERSION: ask for the ABI version


def _libc() -> Any:
    """The C library, for the system calls Python has no wrapper for (``ctypes`` is imported
    here, not at start-up: the server's start is part of every sandbox's provision time)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """This kernel's Landlock ABI version (0: no Landlock, so commands are not isolated)."""
    import ctypes

    libc = _libc()
    version = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           CREATE_RULESET_VERSION)  # fmt: skip
    return max(int(version), 0)


class Isolation:
    """What a command's process runs between ``fork`` and ``exec`` (``enter``) to get its own
    Landlock domain. ``open`` prepares the ruleset (and the seccomp filter) once; each
    ``enter`` makes a new domain."""

    def __init__(self, ruleset_fd: int | None) -> None:
        self._fd = ruleset_fd
        self._libc = _libc()
        self._filter = compiled()

    @classmethod
    def open(cls) -> Isolation:
        """An isolation using Landlock when the kernel has it (else ``available`` is False).

        Raises:
            OSError: Landlock is there but refuses the ruleset (not a missing feature).
        """
        import ctypes

        libc = _libc()
        attr = ctypes.create_string_buffer(struct.pack("=Q", ACCESS_FS_MAKE_BLOCK), 8)
        fd = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(8), 0)
        if fd >= 0:
            return cls(fd)
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EOPNOTSUPP):
            return cls(None)
        raise OSError(code, f"landlock_create_ruleset: {os.strerror(code)}")

    @property
    def available(self) -> bool:
        """Whether each command gets its own Landlock domain."""
        return self._fd is not None

    def enter(self) -> None:
        """Give the calling process no core dumps and, with Landlock, a new domain. Meant for
        the child after ``fork``, before ``exec`` (``child.Spawner``'s ``prepare``).

        Raises:
            OSError: the kernel refused (the command must then not run).
        """
        import ctypes  # already loaded by ``open``: this only binds the name

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        deny_setxattr(self._libc, self._filter)  # a tmpfs's size does not bound xattrs
        if self._fd is None:
            return
        if self._libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")
        if self._libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, self._fd, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"landlock_restrict_self: {os.strerror(code)}")


def from_inside(sock: socket.socket | None) -> bool:
    """Whether the peer of a Unix socket connection is a process of this jail.

    The server runs in the jail's own pid namespace, and ``SO_PEERCRED`` gives the peer's pid
    as this namespace sees it: 0 for a process outside it (the worker on the host), the pid
    for one inside (socket(7), "SO_PEERCRED"; pid_namespaces(7)). The sandbox's API shows
    every command's output and starts commands, so it is served to the host only: a command
    must not read another's output (a call's proxy credential, printed by ``curl -v``).
    A connection whose peer cannot be told counts as inside.
    """
    if sock is None or sock.family != socket.AF_UNIX:
        return True
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return True
    pid: int = struct.unpack("3i", creds)[0]
    return pid != 0
