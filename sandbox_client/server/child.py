"""Starting a command fast: a process forked ahead of time becomes the next command.

Every command must run code of ours between ``fork`` and ``exec`` (its own Landlock domain,
``isolation``), and Python can do that only in a full ``fork`` of the server (``subprocess``
then cannot use ``vfork``) that runs the interpreter before ``exec``: milliseconds on the way of
every command. So the fork is done ahead of time: a *spare* is forked, starts its own session,
enters its own domain (``prepare``), closes every descriptor it does not need, and waits on a
pipe. A command is written to that pipe and the spare ``exec``s it: only a ``chdir``, three
``dup2`` and the ``execve`` remain on the command's way. A spare serves one command and the
next is forked once that command ended, or ran ``REFILL_AFTER_S`` (``refill_after``); so each
command still gets a domain of its own, and of the server only what ``exec`` discards. When no
spare is ready (commands started back to back), one is forked on the spot.

A spare reports a failure (no such working directory, a shell that cannot run, a domain the
kernel refused) on a status pipe that ``exec`` closes; an end of file there means the command
runs. A command of the jail can signal a spare (as it can the server): a spare that died
meanwhile is replaced, a stopped one continued, and one that does not answer within
``START_TIMEOUT_S`` is killed and the start fails. It cannot reach a spare's pipes or memory:
the spare is in a Landlock domain of its own, as the command is.
"""

from __future__ import annotations

import contextlib
import errno
import marshal
import os
import signal

from .loop import Event, create_task, loop, sleep, timeout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

START_TIMEOUT_S = 5.0
"""How long a spare may take to ``exec`` a command (or say why it could not)."""
REFILL_AFTER_S = 0.05
"""A command still running this long after it took the spare has the next one forked."""
_WAIT_POLL_S = 0.01
_RESET_SIGNALS = ("SIGPIPE", "SIGXFSZ", "SIGXFZ", "SIGINT", "SIGTERM")
"""Dispositions a command must start with the default of (Python ignores some)."""


class Child:
    """A started command: its pid (leader of its own session and process group) and the
    read ends of its standard output and error."""

    __slots__ = ("pid", "stderr", "stdout")

    def __init__(self, pid: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr


class _Spare:
    """A forked process waiting for its command (the server's ends of its pipes)."""

    __slots__ = ("command", "pid", "status", "stderr", "stdout")

    def __init__(self, pid: int, command: int, status: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.command = command
        self.status = status
        self.stdout = stdout
        self.stderr = stderr

    def close(self) -> None:
        for fd in (self.command, self.status, self.stdout, self.stderr):
            if fd >= 0:
                os.close(fd)
        self.command = self.status = self.stdout = self.stderr = -1


class Spawner:
    """Starts commands through spares (see the module docstring).

    Args:
        prepare: run in each spare after ``fork`` (``Isolation.enter``); an ``OSError`` or
            any exception from it fails the command that spare would have run.
    """

    def __init__(self, prepare: Callable[[], None] | None = None) -> None:
        self._prepare = prepare
        self._spare: _Spare | None = None

    def refill(self) -> None:
        """Fork a spare unless one is ready (a failed fork is left to the next command)."""
        if self._spare is None:
            with contextlib.suppress(OSError):  # the next command forks its own
                self._spare = self._fork()

    def refill_soon(self) -> None:
        """``refill`` at the loop's next turn (after what is ready to run now)."""
        loop().call_soon(self.refill)

    def refill_after(self, done: Event, delay_s: float = REFILL_AFTER_S) -> None:
        """``refill_soon`` once ``done`` is set (the command that took the spare ended: its
        reply is written first) or ``delay_s`` passed, whichever is first. Forking while a
        short command runs would slow it: the fork holds the loop that notices the
        command's end, and the new spare competes with the command for the CPU."""
        create_task(self._refill_after(done, delay_s))

    async def _refill_after(self, done: Event, delay_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with timeout(delay_s):
                await done.wait()
        self.refill_soon()

    def close(self) -> None:
        """Kill and reap the spare, if any (server shutdown)."""
        spare, self._spare = self._spare, None
        if spare is not None:
            _kill_and_reap(spare.pid)
            spare.close()

    async def spawn(self, argv: list[str], cwd: str, env: dict[str, str]) -> Child:
        """Run ``argv`` in ``cwd`` with exactly ``env``, stdin from /dev/null.

        Raises:
            OSError: the program or the working directory is unusable, the command could not
                be isolated, or no process could be made.
        """
        spec = marshal.dumps((argv, cwd, env))
        for attempt in range(2):
            spare, self._spare = self._spare, None
            if spare is None or not _alive(spare.pid):
                if spare is not None:
                    spare.close()
                spare = self._fork()
            with contextlib.suppress(ProcessLookupError):  # stopped by a command: go on
                os.kill(spare.pid, signal.SIGCONT)
            try:
                await _send(spare.command, spec)
            except BrokenPipeError:  # it died since: another one
                _kill_and_reap(spare.pid)
                spare.close()
                if attempt:
                    raise
                continue
            os.close(spare.command)
            spare.command = -1
            try:
                return await self._started(spare)
            except _Untaken:  # its death was on its way when it was handed the command
                if attempt:
                    raise OSError(errno.ECHILD, "the command's process died first") from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _started(self, spare: _Spare) -> Child:
        """Wait for the spare's ``exec`` (end of file on its status pipe) or its failure."""
        report = bytearray()
        try:
            async with timeout(START_TIMEOUT_S):
                while chunk := await _read_some(spare.status):
                    report += chunk
        except TimeoutError:
            _kill_and_reap(spare.pid)
            spare.close()
            raise OSError(errno.ETIMEDOUT, "the command's process did not start") from None
        os.close(spare.status)
        spare.status = -1
        if not report:  # it died before it took the command (a command killed it)
            _kill_and_reap(spare.pid)
            spare.close()
            raise _Untaken
        if report[:1] == TAKEN:
            report = report[1:]
        if report:
            _kill_and_reap(spare.pid)
            spare.close()
            raise _failure(bytes(report))
        return Child(spare.pid, spare.stdout, spare.stderr)

    def _fork(self) -> _Spare:
        command_r, command_w = os.pipe()
        status_r, status_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (command_r, command_w, status_r, status_w, out_r, out_w, err_r, err_w):
                os.close(fd)
            raise
        if pid == 0:  # the spare: never returns
            _spare_main(self._prepare, command_r, status_w, out_w, err_w)
        for fd in (command_r, status_w, out_w, err_w):
            os.close(fd)
        os.set_blocking(command_w, False)
        os.set_blocking(status_r, False)
        return _Spare(pid, command_w, status_r, out_r, err_r)


TAKEN = b"+"
"""What a spare writes on its status pipe once it has read its command: end of file before
it means it died first (a command of the jail may kill it), so the command is handed to
another; after it, the command ran there or failed to (the rest of the report says why)."""


class _Untaken(Exception):
    """The spare died before it took its command."""


def _spare_main(
    prepare: Callable[[], None] | None, command: int, status: int, stdout: int, stderr: int
) -> None:
    """The spare's whole life: get ready, wait for a command, ``exec`` it (or report why
    not on ``status``). Ends the process in every case."""
    stage = "prepare"
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for name in _RESET_SIGNALS:
            number = getattr(signal, name, None)
            if number is not None:
                signal.signal(number, signal.SIG_DFL)
        if prepare is not None:
            prepare()
        _close_all_but(command, status, stdout, stderr)
        stage = "read"
        spec = bytearray()
        while chunk := os.read(command, 65536):
            spec += chunk
        if not spec:  # the server closed without a command for it
            os._exit(0)
        argv, cwd, env = marshal.loads(spec)
        os.write(status, TAKEN)  # the command is this spare's: it is not run elsewhere
        stage = "chdir"
        os.chdir(cwd)
        stage = "exec"
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        for fd in {devnull, stdout, stderr, command} - {0, 1, 2}:
            os.close(fd)
        _exec(argv, env)
    except BaseException as exc:
        code = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EINVAL
        message = f"{code}\0{stage}\0{exc}".encode(errors="replace")
        try:
            os.write(status, message)
        finally:
            os._exit(127)
    os._exit(127)


def _exec(argv: list[str], env: dict[str, str]) -> None:
    """``execve`` ``argv[0]``, searched on the env's ``PATH`` when it holds no slash."""
    program = argv[0]
    if "/" in program:
        os.execve(program, argv, env)
    last: OSError = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    for directory in os.get_exec_path(env):
        try:
            os.execve(os.path.join(directory, program), argv, env)
        except OSError as exc:
            last = exc
    raise last


def _close_all_but(*keep: int) -> None:
    """Close every descriptor from 3 up but ``keep`` (as ``subprocess``'s ``close_fds``)."""
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _failure(report: bytes) -> OSError:
    code_text, _, rest = report.decode(errors="replace").partition("\0")
    stage, _, detail = rest.partition("\0")
    code = int(code_text) if code_text.isdigit() else errno.EINVAL
    if stage == "prepare":
        return OSError(code, f"cannot isolate the command: {detail}")
    return OSError(code, os.strerror(code))


def _alive(pid: int) -> bool:
    """Whether the spare ``pid`` still waits (one that died is reaped here)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


def _kill_and_reap(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


async def _send(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the non-blocking pipe ``fd``.

    Raises:
        BrokenPipeError: its reader is gone.
    """
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            await loop().wait_writable(fd)
            continue
        view = view[written:]


async def _read_some(fd: int) -> bytes:
    """The next bytes of the non-blocking pipe ``fd`` (b"" at its end)."""
    while True:
        try:
            return os.read(fd, 65536)
        except BlockingIOError:
            await loop().wait_readable(fd)


async def wait_exit(pid: int) -> int:
    """The exit status of the child ``pid`` (negative: the signal that ended it), without
    blocking the loop: through a pidfd (Linux ≥ 5.3), else by polling."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:
        try:
            await loop().wait_readable(pidfd)
        finally:
            os.close(pidfd)
        # it has exited: a pidfd is readable a moment before the exit can be waited for, so
        # the wait blocks at most that moment (polling here cost a whole poll interval)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])  # noqa: ASYNC222
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 - never blocks
        if done:
            return os.waitstatus_to_exitcode(status)
        await sleep(_WAIT_POLL_S)
