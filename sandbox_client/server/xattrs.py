"""Commands may not set extended attributes: a tmpfs stores them outside its ``size=``.

A tmpfs bounds the bytes of its files, but user extended attributes (``setxattr``) are kernel
memory next to them that the size does not count (Documentation/filesystems/tmpfs.rst: only
``nr_inodes``, which bubblewrap cannot set, limits them). With a memory cgroup they count
against the sandbox's memory like any kernel memory; with resource limits only, nothing bounds
them, so one command could hold gigabytes in a 256 MiB ``/tmp``. A seccomp filter (seccomp(2),
"SECCOMP_SET_MODE_FILTER") makes every ``setxattr`` of a command fail with ``EOPNOTSUPP``, the
answer of a filesystem without extended attributes, which ``cp -a`` and ``tar`` accept quietly.
Reading and removing attributes stay allowed. System calls of another architecture than the
server's (the i386 or x32 entry points of an x86-64 kernel) fail with ``ENOSYS``, so the
filter cannot be stepped around through them.
"""

from __future__ import annotations

import errno
import os
import struct

TYPE_CHECKING = False  # ``typing`` costs import time at every sandbox start
if TYPE_CHECKING:
    from typing import Any

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_SET_NO_NEW_PRIVS = 38
SETXATTRAT = 463  # Linux ≥ 6.13; the same number on every architecture
X32_SYSCALL_BIT = 0x40000000
# architecture (AUDIT_ARCH_*) and its setxattr, lsetxattr, fsetxattr numbers
ARCHITECTURES = {
    "x86_64": (0xC000003E, (188, 189, 190)),
    "aarch64": (0xC00000B7, (5, 6, 7)),
}
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06  # BPF_LD|BPF_W|BPF_ABS, …
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data


def filter_program(machine: str | None = None) -> bytes | None:
    """The classic BPF program (``struct sock_filter`` array) for ``machine`` (this one by
    default), or None where the system call numbers are not known here.

    >>> len(filter_program("x86_64") or b"") // 8
    11
    >>> filter_program("sparc") is None
    True
    """
    known = ARCHITECTURES.get(machine or os.uname().machine)
    if known is None:
        return None
    arch, numbers = known
    denied = (*numbers, SETXATTRAT)
    deny = 5 + len(denied) + 1  # index of the final "deny" instruction
    code = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE_K, deny - 5, 0, X32_SYSCALL_BIT),
    ]
    for number in denied:
        code.append((_JEQ_K, deny - (len(code) + 1), 0, number))
    code += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ERRNO | errno.EOPNOTSUPP)]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)


def deny_setxattr(libc: Any, program: Any = None) -> bool:
    """Install the filter in the calling process (inherited by its children and across
    ``exec``); False where this architecture or kernel has none. Meant for the child between
    ``fork`` and ``exec``. ``program``: ``compiled()``'s result, made ahead (else made here).

    Raises:
        OSError: the kernel refused the filter for another reason than lacking seccomp.
    """
    import ctypes

    if program is None:
        program = compiled()
    if program is None:
        return False
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program.fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        if code == errno.EINVAL:  # a kernel without seccomp filters
            return False
        raise OSError(code, f"prctl(PR_SET_SECCOMP): {os.strerror(code)}")
    return True


class Compiled:
    """The filter as the kernel takes it (``struct sock_fprog``), with the buffer it points
    to kept alive."""

    __slots__ = ("buffer", "fprog")

    def __init__(self, buffer: Any, fprog: Any) -> None:
        self.buffer = buffer
        self.fprog = fprog


def compiled() -> Compiled | None:
    """``filter_program()`` ready for ``prctl``, or None where there is none."""
    import ctypes

    program = filter_program()
    if program is None:
        return None
    buffer = ctypes.create_string_buffer(program, len(program))

    class _Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    return Compiled(buffer, _Program(len(program) // 8, ctypes.addressof(buffer)))
