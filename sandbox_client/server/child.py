"""Starting a command fast: a process forked ahead of time becomes the next command.

Every command must run code of ours between ``fork`` and ``exec`` (its own Landlock domain,
``isolation``), and Python can do that only in a full ``fork`` of the server (``subprocess``
then cannot use ``vfork``) that runs the interpreter before ``exec``: milliseconds on the way of
every command. So the fork is done ahead of time: a *spare* is forked, starts its own session,
enters its own domain (``prepare``), closes every descriptor it does not need, and waits on a
pipe. A command is written to that pipe and the spare ``exec``s it: only a ``chdir``, three
``dup2`` and the ``execve`` remain on the command's way. Where the shell is bash, the spare
``exec``s it at once, still waiting (``_WAITER``): the command's ``execve`` then leaves a small
shell instead of the server's copy, whose teardown cost about a millisecond (a command bash
would not run exactly as ``execve`` does takes a Python spare). A spare serves one command and the
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
    """A forked process waiting for its command (the server's ends of its pipes; ``spec``:
    the memory file a shell spare reads its command from, -1 for a Python spare)."""

    __slots__ = ("command", "pid", "spec", "status", "stderr", "stdout")

    def __init__(
        self, pid: int, command: int, status: int, stdout: int, stderr: int, spec: int = -1
    ) -> None:
        self.pid = pid
        self.command = command
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.spec = spec

    def close(self) -> None:
        for fd in (self.command, self.status, self.stdout, self.stderr, self.spec):
            if fd >= 0:
                os.close(fd)
        self.command = self.status = self.stdout = self.stderr = self.spec = -1


class Spawner:
    """Starts commands through spares (see the module docstring).

    Args:
        prepare: run in each spare after ``fork`` (``Isolation.enter``); an ``OSError`` or
            any exception from it fails the command that spare would have run.
    """

    def __init__(self, prepare: Callable[[], None] | None = None, shell: str = "") -> None:
        self._prepare = prepare
        self._spare: _Spare | None = None
        self._shell = shell if os.path.basename(shell) == "bash" else ""  # see ``_WAITER``

    def refill(self) -> None:
        """Fork a spare unless one is ready (a failed fork is left to the next command)."""
        if self._spare is None:
            with contextlib.suppress(OSError):  # the next command forks its own
                self._spare = self._fork(shell=True)

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
        by_shell = self._shell and _shell_can_run(argv, cwd, env, self._shell)
        for attempt in range(3):
            spare = self._take(shell=bool(by_shell))
            with contextlib.suppress(ProcessLookupError):  # stopped by a command: go on
                os.kill(spare.pid, signal.SIGCONT)
            try:
                if spare.spec >= 0:
                    os.pwrite(spare.spec, _shell_spec(argv, cwd, env), 0)
                else:
                    await _send(spare.command, marshal.dumps((argv, cwd, env)))
            except BrokenPipeError:  # it died since: another one
                _kill_and_reap(spare.pid)
                spare.close()
                if attempt == 2:
                    raise
                continue
            os.close(spare.command)  # its end of file: the command is there
            spare.command = -1
            try:
                return await self._started(spare)
            except _NoShell:
                self._shell = by_shell = ""  # the shell cannot wait here: Python spares
        raise AssertionError("unreachable")  # pragma: no cover

    def _take(self, *, shell: bool) -> _Spare:
        """The ready spare if it is alive and of the kind wanted, else a new one."""
        spare, self._spare = self._spare, None
        if spare is not None and (spare.spec >= 0) == shell and _alive(spare.pid):
            return spare
        if spare is not None and spare.spec >= 0 and not shell and _alive(spare.pid):
            self._spare = spare  # kept for the next command the shell can run
        elif spare is not None:
            _kill_and_reap(spare.pid)
            spare.close()
        return self._fork(shell=shell)

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
        if report:
            _kill_and_reap(spare.pid)
            spare.close()
            if report.startswith(b"waiter\0"):
                raise _NoShell
            raise _failure(bytes(report))
        if spare.spec >= 0:
            os.close(spare.spec)
            spare.spec = -1
        return Child(spare.pid, spare.stdout, spare.stderr)

    def _fork(self, *, shell: bool = False) -> _Spare:
        spec = -1
        if shell and self._shell:
            with contextlib.suppress(OSError, AttributeError):  # no memfd: a Python spare
                spec = os.memfd_create("sbx-command", os.MFD_CLOEXEC)
        command_r, command_w = os.pipe()
        status_r, status_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        fds = (command_r, command_w, status_r, status_w, out_r, out_w, err_r, err_w)
        try:
            pid = os.fork()
        except OSError:
            for fd in (*fds, spec) if spec >= 0 else fds:
                os.close(fd)
            raise
        if pid == 0:  # the spare: never returns
            if spec >= 0:
                _shell_spare_main(
                    self._prepare, self._shell, command_r, status_w, out_w, err_w, spec
                )
            _spare_main(self._prepare, command_r, status_w, out_w, err_w)
        for fd in (command_r, status_w, out_w, err_w):
            os.close(fd)
        os.set_blocking(command_w, False)
        os.set_blocking(status_r, False)
        return _Spare(pid, command_w, status_r, out_r, err_r, spec)


def _spare_main(
    prepare: Callable[[], None] | None, command: int, status: int, stdout: int, stderr: int
) -> None:
    """The spare's whole life: get ready, wait for a command, ``exec`` it (or report why
    not on ``status``). Ends the process in every case."""
    stage = "prepare"
    try:
        _become_spare(prepare)
        _close_all_but(command, status, stdout, stderr)
        stage = "read"
        spec = bytearray()
        while chunk := os.read(command, 65536):
            spec += chunk
        if not spec:  # the server closed without a command for it
            os._exit(0)
        argv, cwd, env = marshal.loads(spec)
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
        _report(status, stage, exc)
    os._exit(127)


_WAITER = (
    'read -r -d "" _; exec 0</dev/null; '
    '{ IFS= read -r -d "" _sbx_dir && IFS= read -r -d "" _sbx_shell '
    '&& IFS= read -r -d "" _sbx_cmd; } <&4 || exit 0; '
    'cd -- "$_sbx_dir" 2>/dev/null || { '
    "if [ -e \"$_sbx_dir\" ]; then printf '20\\0chdir\\0' >&3; "
    "else printf '2\\0chdir\\0' >&3; fi; exit 127; }; "
    'set -- "$_sbx_shell" "$_sbx_cmd"; '
    'while IFS= read -r -d "" _sbx_kv; do export -- "$_sbx_kv"; done <&4; '
    "export -n SHLVL PWD OLDPWD; "
    'exec "$1" -c "$2" 3>&- 4<&-'
)
"""A shell spare's script: wait for the end of file on its standard input (the command is
then in the memory file at descriptor 4: its working directory, shell, command and
environment, each ended by a NUL), go there, export the environment (its own variables are
named ``_sbx…``) and ``exec``
``shell -c command``, closing the descriptors it held. That last ``exec`` leaves a small
shell rather than the server's whole copy, which made a Python spare's hand-off cost a
millisecond; the shell itself started long before. Its outcome is the same as
``execve(shell, [shell, "-c", command], env)`` from the working directory: the variables the
shell sets itself (``SHLVL``, ``PWD``, ``OLDPWD``) are not exported to it, and a command
whose environment names a variable the shell treats specially goes through a Python spare
instead (``_shell_can_run``)."""
_SHELL_SPECIAL = frozenset(
    [
        "SHLVL",
        "PWD",
        "OLDPWD",
        "SHELLOPTS",
        "EUID",
        "PPID",
        "UID",
        "RANDOM",
        "SRANDOM",
        "SECONDS",
        "LINENO",
        "GROUPS",
        "FUNCNAME",
        "DIRSTACK",
        "HISTCMD",
        "EPOCHSECONDS",
        "EPOCHREALTIME",
        "COMP_WORDBREAKS",
        "OPTIND",
        "OPTARG",
        "IFS",
    ]
)


def _shell_can_run(argv: list[str], cwd: str, env: dict[str, str], shell: str) -> bool:
    """Whether a shell spare runs ``argv`` in ``cwd`` with ``env`` as ``execve`` would (see
    ``_WAITER``)."""
    if len(argv) != 3 or argv[0] != shell or argv[1] != "-c" or "\0" in argv[2] + cwd:
        return False
    for name, value in env.items():
        plain = name.isascii() and (name.replace("_", "a").isalnum()) and not name[0].isdigit()
        special = name in _SHELL_SPECIAL or name.startswith(("BASH", "_sbx")) or name == "_"
        if not plain or special or "\0" in value:
            return False
    return True


def _shell_spec(argv: list[str], cwd: str, env: dict[str, str]) -> bytes:
    fields = [cwd, argv[0], argv[2], *(f"{name}={value}" for name, value in env.items())]
    return b"".join(os.fsencode(field) + b"\0" for field in fields)


class _NoShell(Exception):
    """A shell spare could not start its shell: Python spares from now on."""


def _shell_spare_main(
    prepare: Callable[[], None] | None,
    shell: str,
    command: int,
    status: int,
    stdout: int,
    stderr: int,
    spec: int,
) -> None:
    """A shell spare's start: get ready as a Python spare does, put its descriptors in place
    (0 the command pipe, 1 and 2 the output, 3 the status pipe, 4 the memory file) and
    ``exec`` the shell running ``_WAITER``. Ends the process in every case."""
    try:
        _become_spare(prepare)
    except BaseException as exc:
        _report(status, "prepare", exc)
    try:
        import fcntl

        high = [
            fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (command, stdout, stderr, status, spec)
        ]
        for target, fd in enumerate(high):
            os.dup2(fd, target)
        _close_all_but(0, 1, 2, 3, 4)
        os.execve(shell, [shell, "-c", _WAITER, "sbx-spare"], {})
    except BaseException:
        try:
            os.write(3, b"waiter\0")
        finally:
            os._exit(127)


def _become_spare(prepare: Callable[[], None] | None) -> None:
    """A new session, the signal dispositions a command starts with, and ``prepare``."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    for name in _RESET_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, signal.SIG_DFL)
    if prepare is not None:
        prepare()


def _report(status: int, stage: str, exc: BaseException) -> None:
    """Say on ``status`` why the command cannot run, and end the process."""
    code = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EINVAL
    try:
        os.write(status, f"{code}\0{stage}\0{exc}".encode(errors="replace"))
    finally:
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
