"""Errors raised by ``sandbox_client``.

Every error carries fields, not prose to parse. Transport and HTTP errors (httpx,
the sandbox's ``{"error": …}`` replies, the Blaxel control plane) are mapped here, at
the boundary, and raised ``from`` the original. The tree::

    SandboxError
    ├── SandboxUnavailable      the sandbox did not answer, or answered 5xx (retryable)
    │   └── SandboxTimeout      no answer within the request's timeout (e.g. it is frozen)
    ├── SandboxGone             the sandbox no longer exists (its provider says so)
    ├── ProvisionFailed         a provider could not create or start a sandbox
    │   └── SandboxCannotStart  …and none will start on this host until someone fixes it
    ├── ProtocolError           a reply that is not SBX/1 (or not the Blaxel control plane)
    ├── RequestRejected         any other 4xx: ``status`` and the server's ``message``
    │   ├── ProcessNotFound     no process by that name
    │   └── NameInUse           a process by that name is running
    └── PathError               a filesystem call on a path that cannot be used
        ├── InvalidPath         relative, control characters, or outside the allowed root
        ├── FileNotFound        nothing at that path
        ├── IsADirectory        a file operation on a directory
        └── NotADirectory       a listing of a file
"""

from __future__ import annotations

import errno


class SandboxError(Exception):
    """Base class of every error ``sandbox_client`` raises on purpose."""


class SandboxUnavailable(SandboxError):
    """The sandbox could not be reached or failed (5xx); the call may be retried.

    Attributes:
        sandbox_id: which sandbox.
        reason: what failed (``ConnectError``, ``HTTP 503``, ``stream silent for 15 s``, …).
    """

    def __init__(self, sandbox_id: str, reason: str) -> None:
        super().__init__(f"sandbox {sandbox_id} unavailable: {reason}")
        self.sandbox_id = sandbox_id
        self.reason = reason


class SandboxTimeout(SandboxUnavailable):
    """No answer within ``timeout_s``: a frozen sandbox hangs requests rather than failing."""

    def __init__(self, sandbox_id: str, reason: str, *, timeout_s: float) -> None:
        super().__init__(sandbox_id, f"{reason} (no answer within {timeout_s:g} s)")
        self.timeout_s = timeout_s


class SandboxGone(SandboxError):
    """The sandbox does not exist any more (destroyed, died, or never created)."""

    def __init__(self, sandbox_id: str, reason: str = "") -> None:
        super().__init__(f"sandbox {sandbox_id} is gone" + (f": {reason}" if reason else ""))
        self.sandbox_id = sandbox_id
        self.reason = reason


class ProvisionFailed(SandboxError):
    """A provider could not create or start sandbox ``sandbox_id``; ``reason`` says why."""

    def __init__(self, sandbox_id: str, reason: str) -> None:
        super().__init__(f"cannot provision sandbox {sandbox_id}: {reason}")
        self.sandbox_id = sandbox_id
        self.reason = reason


class SandboxCannotStart(ProvisionFailed):
    """No sandbox will start on this host until a person fixes it, so retrying at once is
    useless: bubblewrap is missing or refuses to make the jail, the state directory cannot
    be written, a file the jail needs is gone, the egress gateway cannot serve the jail.
    (A jail that was merely slow to start is a plain ``ProvisionFailed``: retryable.)

    ``reason`` says what failed, in the words of whatever refused (bwrap's last line, the
    ``OSError``), and what to look at.
    """


PASSING_ERRNOS = frozenset({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.EINTR})
"""``OSError`` numbers of a shortage that may pass (processes, memory, descriptors): the
next try may start the sandbox. Any other (permission, a read-only or full file system, a
path that is not a directory) stays until someone fixes the host."""


def provision_error(sandbox_id: str, reason: str, exc: OSError) -> ProvisionFailed:
    """The error to raise for ``exc``, met while starting sandbox ``sandbox_id``:
    ``SandboxCannotStart``, unless it is a passing shortage (``PASSING_ERRNOS``).

    >>> type(provision_error("s", "r", PermissionError(13, "Permission denied"))).__name__
    'SandboxCannotStart'
    >>> type(provision_error("s", "r", BlockingIOError(11, "Try again"))).__name__
    'ProvisionFailed'
    """
    if exc.errno in PASSING_ERRNOS:
        return ProvisionFailed(sandbox_id, reason)
    return SandboxCannotStart(sandbox_id, reason)


class ProtocolError(SandboxError):
    """A reply that does not have the expected shape (``detail`` says what was wrong)."""

    def __init__(self, sandbox_id: str, detail: str) -> None:
        super().__init__(f"sandbox {sandbox_id} sent an unexpected reply: {detail}")
        self.sandbox_id = sandbox_id
        self.detail = detail


class RequestRejected(SandboxError):
    """The sandbox refused the request with a 4xx ``status`` and ``message``."""

    def __init__(self, sandbox_id: str, status: int, message: str) -> None:
        super().__init__(f"sandbox {sandbox_id} refused the request ({status}): {message}")
        self.sandbox_id = sandbox_id
        self.status = status
        self.message = message


class ProcessNotFound(RequestRejected):
    """No process is known by ``name``."""

    def __init__(self, sandbox_id: str, name: str) -> None:
        super().__init__(sandbox_id, 404, f"process not found: {name}")
        self.name = name


class NameInUse(RequestRejected):
    """A process named ``name`` is running, so it cannot be started again."""

    def __init__(self, sandbox_id: str, name: str, message: str) -> None:
        super().__init__(sandbox_id, 400, message)
        self.name = name


class PathError(SandboxError):
    """A filesystem call on ``path`` that cannot be done; ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class InvalidPath(PathError):
    """The path is relative, has control characters, or is outside the allowed root."""


class FileNotFound(PathError):
    """Nothing exists at the path."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "no such file or directory")


class IsADirectory(PathError):
    """The path is a directory where a file was expected."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "is a directory")


class NotADirectory(PathError):
    """The path is a file where a directory was expected."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "not a directory")
