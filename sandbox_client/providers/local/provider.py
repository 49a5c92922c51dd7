"""``LocalProvider``: one SBX/1 server per sandbox inside a bubblewrap jail."""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from sandbox_client.client import SandboxClient
from sandbox_client.errors import (
    ProvisionFailed,
    SandboxCannotStart,
    SandboxGone,
    SandboxUnavailable,
    provision_error,
)
from sandbox_client.providers.local import cgroups, orphans, probe, procfs
from sandbox_client.providers.local.cgroups import Enforcer
from sandbox_client.providers.local.config import LocalConfig
from sandbox_client.providers.local.freezer import Freezer, detect, freezer_of
from sandbox_client.providers.local.jail import (
    SHM,
    TMP,
    VIRTUAL_MOUNTS,
    WORKSPACE,
    JailPaths,
    bwrap_argv,
    stub_note,
)
from sandbox_client.providers.local.launch import LaunchFailed, launch
from sandbox_client.providers.local.orphans import PREFIX as POOL_PREFIX
from sandbox_client.providers.local.pool import WarmPool
from sandbox_client.providers.local.socket_http import UnixSocketTransport
from sandbox_client.records import Health, SandboxHandle, SandboxUsage

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
MAX_SOCKET_PATH_BYTES = 107  # sockaddr_un.sun_path holds 108 bytes with the NUL
HANDLE_FILE = "handle.json"
LOG_FILE = "jail.log"
SERVER_DIR = Path(__file__).resolve().parents[2] / "server"


class LocalProvider:
    """Local sandboxes: a jailed server per sandbox, reached over a Unix socket.

    Each sandbox lives in ``state_dir/<id>/`` (``sbx.sock``, ``jail.log``,
    ``handle.json``, and ``run/``, which the jail sees read-only at ``/run/warroom``);
    the jail sees nothing else of it. Its ``/workspace`` is a tmpfs inside the jail.
    Suspending freezes the jail's cgroup (v2, else v1) or, where no cgroup is writable,
    SIGSTOPs its processes; which one is detected once (``freezer``) unless the config forces it.
    Limits (``config.limits``) go where ``enforcer`` found room: cgroup v2, v1, or
    resource limits of the jail's first process. Jails are detached: they outlive the
    process that made them, and any process with the handle (or ``find``) and the same
    ``state_dir`` can reach, freeze or destroy them. A handle of another state directory
    is another host's jail (as a jail on another machine would be): ``health`` says GONE,
    so a session that moved to this host gets a replacement, and ``destroy`` leaves it to
    its own host (whose orphan reaper takes it once the ledger forgot it). Once ``pool`` is
    started, ``provision`` hands out one of its fresh, never used jails when one waits
    (``pool.WarmPool``).
    """

    kind = "local"

    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        self._freezer: Freezer | None = None
        self._enforcer: Enforcer | None = None
        self._prepared = False
        self._bwrap: str | None = None  # its full path, found on PATH by ``_prepare``
        self._real_state_dir: str | None = None
        self.pool = WarmPool(self, config.warm_pool)  # fills once started (``WarmPool.start``)

    @property
    def freezer(self) -> Freezer:
        """The way this provider suspends new sandboxes (detected on first use)."""
        if self._freezer is None:
            chosen = self.config.freezer
            kinds = {"auto": ("cgroup2", "cgroup1"), "signal": ()}.get(chosen, (chosen,))
            detected = detect(kinds)
            if chosen not in ("auto", detected.kind):
                raise SandboxCannotStart("-", f"the {chosen} freezer is not usable here")
            self._freezer = detected
        return self._freezer

    @property
    def enforcer(self) -> Enforcer:
        """Where this host enforces each limit (detected on first use)."""
        if self._enforcer is None and self.config.enforce == "rlimit":
            self._enforcer = Enforcer()
        if self._enforcer is None:
            freezer = self.freezer
            v2_parent = freezer.parent if freezer.kind == "cgroup2" else None
            self._enforcer = cgroups.detect(v2_parent)
        return self._enforcer

    def enforcement(self) -> dict[str, str]:
        """How each limit is enforced here, for ``doctor``: ``memory``, ``pids`` and
        ``cpu`` map to ``cgroup2``, ``cgroup1``, ``rlimit`` or ``none``; ``workspace``
        to ``tmpfs``."""
        enforcer = self.enforcer
        found = {c: enforcer.how(c) for c in cgroups.CONTROLLERS}
        return {**found, "workspace": "tmpfs"}

    async def aclose(self) -> None:
        """Destroy the warm pool's waiting jails (the provider holds no connections)."""
        await self.pool.close()

    def connect(self, handle: SandboxHandle) -> SandboxClient:
        """A client over the sandbox's Unix socket (``exec`` in one request: the jail's
        server gets or starts a process by name, ``ClientOptions.get_or_start``), through
        a small HTTP/1.1 transport (``socket_http``)."""
        transport = UnixSocketTransport(handle.socket_path or "")
        return SandboxClient(
            handle.url,
            sandbox_id=handle.sandbox_id,
            transport=transport,
            options=replace(self.config.client, get_or_start=True),
        )

    # provisioning ---------------------------------------------------------------------

    async def provision(self, sandbox_id: str) -> SandboxHandle:
        """Start a jail for ``sandbox_id`` (or return the live one already there).

        Raises:
            SandboxCannotStart: no jail will start here until someone fixes the host: a
                bad id, a too-long socket path, bubblewrap missing or refusing (its last
                words in the reason), a state directory that cannot be written, a cgroup
                that cannot be made.
            ProvisionFailed: a jail that did not start in ``start_timeout_s``, or a
                passing shortage (memory, processes); the next try may work.
        """
        if not _ID.match(sandbox_id):
            raise SandboxCannotStart(sandbox_id, "ids are 1-63 letters, digits, '.', '_', '-'")
        existing = self.find(sandbox_id)
        if existing is not None:
            health = await self.health(existing)
            if health is not Health.GONE:
                if health is not Health.READY:
                    await self.resume(existing)
                return existing
            await self.destroy(existing)
        if not sandbox_id.startswith(POOL_PREFIX) and (pooled := self.pool.take(sandbox_id)):
            return pooled
        await self._prepare()
        try:
            paths = self._make_dirs(sandbox_id)
        except OSError as exc:
            raise provision_error(sandbox_id, f"cannot make its directory: {exc}", exc) from exc
        freezer, enforcer = self.freezer, self.enforcer
        cgroup: Path | None = None
        limit_dirs: list[Path] = []
        try:
            cgroup = freezer.create_cgroup(self._cgroup_name(sandbox_id))
            v2_cgroup = cgroup if freezer.kind == "cgroup2" else None
            name = self._cgroup_name(sandbox_id)
            limit_dirs = enforcer.apply(name, v2_cgroup, self.config.limits)
        except OSError as exc:
            await self._discard(sandbox_id, freezer, cgroup)
            raise provision_error(sandbox_id, f"cannot create cgroup: {exc}", exc) from exc
        procs = [freezer.procs_file(cgroup), *(str(d / "cgroup.procs") for d in limit_dirs)]
        rlimits = enforcer.rlimit_controllers()
        config = replace(self.config, bwrap=self._bwrap or self.config.bwrap)
        try:
            with _bound_socket(paths.socket) as listening:
                fd = listening.fileno()
                launched = await launch(
                    lambda info_fd, ready_fd: bwrap_argv(
                        config,
                        paths,
                        info_fd=info_fd,
                        ready_fd=ready_fd,
                        listen_fd=fd,
                        rlimits=rlimits,
                    ),
                    procs_files=[p for p in procs if p],
                    log_path=self._dir(sandbox_id) / LOG_FILE,
                    timeout_s=self.config.start_timeout_s,
                    pass_fds=(fd,),
                )
        except LaunchFailed as exc:
            reason = f"{exc}; log: {self._log_tail(sandbox_id)}"
            await self._discard(sandbox_id, freezer, cgroup, limit_dirs)
            if exc.permanent:
                raise SandboxCannotStart(sandbox_id, reason) from exc
            raise ProvisionFailed(sandbox_id, reason) from exc
        except OSError as exc:
            reason = f"{exc}; log: {self._log_tail(sandbox_id)}"
            await self._discard(sandbox_id, freezer, cgroup, limit_dirs)
            raise provision_error(sandbox_id, reason, exc) from exc
        handle = SandboxHandle(
            provider=self.kind,
            sandbox_id=sandbox_id,
            url="http://sandbox",
            socket_path=str(paths.socket),
            pid=launched.pid,
            pid_start_ticks=launched.start_ticks,
            freezer=freezer.kind,
            cgroup=str(cgroup) if cgroup else None,
            state_dir=str(self._dir(sandbox_id)),
            limit_cgroups=tuple(str(d) for d in limit_dirs),
        )
        try:
            (self._dir(sandbox_id) / HANDLE_FILE).write_text(handle.to_json())
        except OSError as exc:  # unrecorded, nobody could find the jail: it goes now
            await self.destroy(handle)
            raise provision_error(sandbox_id, f"cannot record its handle: {exc}", exc) from exc
        return handle

    def find(self, sandbox_id: str) -> SandboxHandle | None:
        """The handle of sandbox ``sandbox_id`` recorded in the state directory, if any."""
        try:
            return SandboxHandle.from_json((self._dir(sandbox_id) / HANDLE_FILE).read_text())
        except (OSError, ValueError):
            return None

    def _cgroup_name(self, sandbox_id: str) -> str:
        """The jail's cgroup name: its id and its state directory's, so that two state
        directories (deployments, test runs) on one host never share a cgroup."""
        digest = hashlib.sha256(os.fsencode(self.config.state_dir)).hexdigest()[:10]
        return f"{sandbox_id}.{digest}"

    def _dir(self, sandbox_id: str) -> Path:
        return self.config.state_dir / sandbox_id

    async def _prepare(self) -> None:
        """Once: find bubblewrap on ``PATH`` (the jail is started with an empty
        environment, so by its full path), make the stub directories and the server's
        byte code (the jail cannot write).

        Raises:
            SandboxCannotStart: no bubblewrap or Python, or a state directory that cannot
                be written.
        """
        if self._prepared:
            return
        bwrap = shutil.which(self.config.bwrap)
        if bwrap is None:
            raise SandboxCannotStart("-", f"{self.config.bwrap} not found: install bubblewrap")
        if not os.access(self.config.python, os.X_OK):
            raise SandboxCannotStart("-", f"no Python interpreter at {self.config.python}")
        try:
            for name in VIRTUAL_MOUNTS:
                stub = self.config.state_dir / "stubs" / name
                stub.mkdir(parents=True, exist_ok=True)
                (stub / "README-warroom.txt").write_text(stub_note(name))
        except OSError as exc:
            reason = f"cannot write the sandboxes' state directory: {exc}"
            raise provision_error("-", reason, exc) from exc
        await asyncio.to_thread(compileall.compile_dir, str(SERVER_DIR), quiet=2)
        self._bwrap = bwrap
        self._prepared = True

    def _make_dirs(self, sandbox_id: str) -> JailPaths:
        root = self._dir(sandbox_id)
        paths = JailPaths(root, self.config.state_dir / "stubs", SERVER_DIR)
        if len(os.fsencode(paths.socket)) > MAX_SOCKET_PATH_BYTES:
            raise SandboxCannotStart(
                sandbox_id, f"socket path too long, shorten state_dir: {paths.socket}"
            )
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths.run_dir.mkdir(mode=0o700, exist_ok=True)
        orphans.write_maker(root)  # should this process die before the handle is written
        return paths

    def _log_tail(self, sandbox_id: str) -> str:
        try:
            text = (self._dir(sandbox_id) / LOG_FILE).read_text(errors="replace")
        except OSError:
            return "(none)"
        return text.strip()[-2000:] or "(empty)"

    # lifecycle ------------------------------------------------------------------------

    def reaches(self, handle: SandboxHandle) -> bool:
        """Whether the jail is under this provider's ``state_dir`` (this host's): a handle
        without a state directory (written before it was recorded) is taken as ours."""
        if handle.state_dir is None:
            return True
        parent = os.path.realpath(os.path.dirname(handle.state_dir))
        if self._real_state_dir is None:
            self._real_state_dir = os.path.realpath(self.config.state_dir)
        return parent == self._real_state_dir

    async def health(self, handle: SandboxHandle) -> Health:
        """GONE when the jail's init died (or its pid was recycled) or is another host's
        (``reaches``), SUSPENDED when frozen, READY when its server answers within a
        second, else STARTING."""
        if not self.reaches(handle):
            return Health.GONE
        if handle.pid is None or not procfs.is_alive(handle.pid, handle.pid_start_ticks):
            return Health.GONE
        try:
            frozen = _freezer(handle).is_frozen(_cgroup(handle), handle.pid)
        except OSError:  # its cgroup was removed: the jail is being destroyed
            return Health.GONE
        if frozen:
            return Health.SUSPENDED
        if await probe.answers(handle.socket_path or "", timeout_s=1.0):
            return Health.READY
        return Health.STARTING

    async def usage(self, handle: SandboxHandle) -> SandboxUsage:
        """The jail's limits and its counters of hits (see ``SandboxUsage``); counters
        the host does not keep are None. Never raises."""
        limits = self.config.limits
        dirs = [Path(d) for d in (handle.cgroup, *handle.limit_cgroups) if d]
        oom_kills, pids_refusals = await asyncio.to_thread(cgroups.counters, dirs)
        free = await asyncio.to_thread(_free_bytes, handle.pid, (WORKSPACE, TMP, SHM))
        return SandboxUsage(
            memory_max_bytes=limits.memory_max_bytes or None,
            pids_max=limits.pids_max or None,
            workspace_max_bytes=limits.workspace_max_bytes or None,
            oom_kills=oom_kills,
            pids_refusals=pids_refusals,
            workspace_free_bytes=free[0],
            tmp_max_bytes=limits.tmp_max_bytes or None,
            tmp_free_bytes=free[1],
            shm_max_bytes=limits.shm_max_bytes or None,
            shm_free_bytes=free[2],
        )

    async def suspend(self, handle: SandboxHandle) -> None:
        """Freeze every process of the jail (idempotent).

        Raises:
            SandboxGone: the jail is not running.
        """
        pid = self._live_pid(handle)
        try:
            await _freezer(handle).freeze(_cgroup(handle), pid)
        except (OSError, TimeoutError) as exc:
            raise SandboxUnavailable(handle.sandbox_id, f"cannot freeze: {exc}") from exc

    async def resume(self, handle: SandboxHandle) -> None:
        """Thaw the jail; return at once when it was frozen (its server, alive when frozen,
        runs again: a request to it is answered, or fails if it died since), else once its
        server answers (a jail still starting).

        Raises:
            SandboxGone: the jail is not running.
            SandboxUnavailable: it did not answer within ``start_timeout_s``.
        """
        pid = self._live_pid(handle)
        freezer, cgroup = _freezer(handle), _cgroup(handle)
        try:
            frozen = freezer.is_frozen(cgroup, pid)
            freezer.thaw(cgroup, pid)
        except OSError as exc:
            raise SandboxUnavailable(handle.sandbox_id, f"cannot thaw: {exc}") from exc
        if frozen:
            return
        socket_path = handle.socket_path or ""
        if not await probe.wait_until_answers(socket_path, self.config.start_timeout_s):
            raise SandboxUnavailable(handle.sandbox_id, "no answer after thawing")

    def _live_pid(self, handle: SandboxHandle) -> int:
        if not self.reaches(handle):
            raise SandboxGone(handle.sandbox_id, "its jail is another host's")
        if handle.pid is None or not procfs.is_alive(handle.pid, handle.pid_start_ticks):
            raise SandboxGone(handle.sandbox_id, "its jail is not running")
        return handle.pid

    async def destroy(self, handle: SandboxHandle) -> None:
        """Kill the jail's whole process tree and delete its directory (idempotent); another
        host's jail (``reaches``) is left to that host."""
        if not self.reaches(handle):
            return
        freezer, cgroup = _freezer(handle), _cgroup(handle)
        if handle.pid is not None and procfs.is_alive(handle.pid, handle.pid_start_ticks):
            with contextlib.suppress(ProcessLookupError):
                os.kill(handle.pid, signal.SIGKILL)  # pid 1 of the jail: the namespace ends
        limit_dirs = [Path(d) for d in handle.limit_cgroups]
        with contextlib.suppress(OSError):
            freezer.kill_all(cgroup)
            if freezer.is_frozen(cgroup, handle.pid or 0) and cgroup is not None:
                freezer.thaw(cgroup, handle.pid or 0)  # v1: a frozen task dies only thawed
        for directory in limit_dirs:  # a signal-frozen jail's tasks are only here
            with contextlib.suppress(OSError):
                Freezer("cgroup1", directory.parent).kill_all(directory)
        await _wait_dead(handle)
        await self._discard(handle.sandbox_id, freezer, cgroup, limit_dirs)

    async def list_sandboxes(self, *, older_than_s: float = 0.0) -> tuple[SandboxHandle, ...]:
        """The sandboxes recorded under ``state_dir`` whose handle was written over
        ``older_than_s`` ago (jails from crashed processes and hosts included), and,
        however young, the jails a dead process left that nobody else can use (its
        pooled jails, and the jails it was starting: ``orphans``). A live process's
        pooled jails are never listed."""
        return tuple(await asyncio.to_thread(self._recorded, time.time() - older_than_s))

    def _recorded(self, before: float) -> list[SandboxHandle]:
        if not self._has_state():
            return []
        found = []
        for path in self.config.state_dir.glob(f"*/{HANDLE_FILE}"):
            if path.parent.name.startswith(POOL_PREFIX):
                continue  # never handed out: an orphan only once its maker died (below)
            with contextlib.suppress(OSError):
                handle = self.find(path.parent.name) if path.stat().st_mtime <= before else None
                if handle is not None and handle.sandbox_id == path.parent.name:
                    found.append(handle)  # (another id: a pooled jail being handed out)
        return found + orphans.in_state_dir(self)

    async def destroy_all(self) -> tuple[str, ...]:
        """Destroy every sandbox recorded under ``state_dir`` (shutdown, test clean-up).

        Jails are detached and outlive their creator, so whoever stops using a state
        directory should call this. Returns the ids destroyed.
        """
        ids = [p.name for p in self.config.state_dir.iterdir()] if self._has_state() else []
        handles = [h for h in map(self.find, ids) if h is not None]
        handles += orphans.unfinished(self, all_makers=True) if self._has_state() else []
        for handle in handles:
            await self.destroy(handle)
        return tuple(h.sandbox_id for h in handles)

    def _has_state(self) -> bool:
        return self.config.state_dir.is_dir()

    async def _discard(
        self,
        sandbox_id: str,
        freezer: Freezer,
        cgroup: Path | None,
        limit_dirs: list[Path] | None = None,
    ) -> None:
        await freezer.remove(cgroup)
        for directory in limit_dirs or ():
            await Freezer("cgroup1", directory.parent).remove(directory)
        await asyncio.to_thread(shutil.rmtree, self._dir(sandbox_id), True)


async def _wait_dead(handle: SandboxHandle, timeout_s: float = 5.0) -> None:
    """Return once the jail's init has died (SIGKILL is delivered asynchronously), so a
    destroyed sandbox is GONE to every later ``health`` call."""
    if handle.pid is None:
        return
    poll_s = 0.005
    for _ in range(int(timeout_s / poll_s)):
        if not procfs.is_alive(handle.pid, handle.pid_start_ticks):
            return
        await asyncio.sleep(poll_s)


def _free_bytes(pid: int | None, paths: tuple[str, ...]) -> list[int | None]:
    """Room left in each of the jail's tmpfs at ``paths``, seen through its root in
    ``/proc`` (None where unreadable). The jail cannot move them: its root is read-only."""
    return [_free_at(f"/proc/{pid}/root{path}") if pid is not None else None for path in paths]


def _free_at(path: str) -> int | None:
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


@contextlib.contextmanager
def _bound_socket(path: Path) -> Iterator[socket.socket]:
    """A Unix stream socket bound at ``path`` (a stale file there replaced), not yet
    listening: the jail's server listens on it, so the socket's peer credentials name
    the server. Closed here once the jail holds its copy."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listening.bind(str(path))
        yield listening
    finally:
        listening.close()


def _freezer(handle: SandboxHandle) -> Freezer:
    return freezer_of(handle.freezer or "signal", handle.cgroup)


def _cgroup(handle: SandboxHandle) -> Path | None:
    return Path(handle.cgroup) if handle.cgroup else None
