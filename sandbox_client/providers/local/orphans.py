"""Jails whose maker died and that nobody else can use: found and ended at once.

Jails outlive the process that made them on purpose (a session's jail serves whichever
worker runs its next step), so a dead maker alone does not make a jail an orphan. Two
kinds do become orphans the moment their maker dies, because no one else can hold
their handle:

- a *pooled jail never handed out* (id ``pool-<pid>-<ticks>-<random>``, ``pool.pool_id``):
  only its maker's pool hands it out, and handing it out renames its directory to the
  session's sandbox id (its cgroup keeps the pool name, so a cgroup named for a dead
  maker whose pool directory is gone is a session's jail, left alone, as long as a
  directory of its state directory still holds the jail's run directory; with none, as
  when a killed test run's directory was deleted, no handle can reach it);
- a jail whose *start never finished* (a directory without ``handle.json``): its handle
  was never returned, so no session, ledger or checkpoint names it.

Each jail's directory holds a ``maker`` file (``"<pid> <start ticks>"``, written before
anything is started for it), so the maker of an unfinished jail is known whatever its
id. A maker is dead when no process has its pid and start time (pids are reused,
start times are not): a live maker's jails are never touched.

``in_state_dir`` finds them in one state directory (``LocalProvider.list_sandboxes``
lists them, without the orphan grace: the reaper ends them at its next sweep).
``reap_dead_makers`` also looks across state directories through the host's cgroups
(a killed test run's directory nobody opens again; another deployment's data
directory): it runs when a provider's warm pool starts, so the next worker (or test)
that starts ends what a SIGKILLed one left. Makers that share a cgroup hierarchy share
a pid namespace (a container has its own cgroup namespace, so its own parent cgroup).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_client.errors import SandboxError
from sandbox_client.providers.local import procfs
from sandbox_client.providers.local.jail import RUN_DIR, RUN_SUBDIR, SOCKET_NAME
from sandbox_client.records import SandboxHandle

if TYPE_CHECKING:
    from sandbox_client.providers.local.provider import LocalProvider

log = logging.getLogger(__name__)

PREFIX = "pool-"
"""The id prefix of a pooled jail (``pool.pool_id``)."""
MAKER_FILE = "maker"
HANDLE_FILE = "handle.json"


def write_maker(directory: Path) -> None:
    """Record this process as the maker of the jail in ``directory`` (before it starts).

    Raises:
        OSError: the file could not be written.
    """
    (directory / MAKER_FILE).write_text(f"{os.getpid()} {procfs.start_ticks(os.getpid())}\n")


def pool_maker(sandbox_id: str) -> tuple[int, int] | None:
    """The (pid, start ticks) a pooled jail's id names; None for any other id."""
    if not sandbox_id.startswith(PREFIX):
        return None
    parts = sandbox_id[len(PREFIX) :].split("-")
    try:
        pid, ticks = int(parts[0], 16), int(parts[1], 16)
    except (ValueError, IndexError):
        return None
    return (pid, ticks) if len(parts) == 3 else None


def held_by_live_process(sandbox_id: str) -> bool:
    """Whether ``sandbox_id`` is a pooled jail whose maker still runs (so not an orphan)."""
    maker = pool_maker(sandbox_id)
    return maker is not None and procfs.is_alive(*maker)


def _recorded_maker(directory: Path) -> tuple[int, int] | None:
    """The maker its pool id names, else its ``maker`` file (None: neither)."""
    if (maker := pool_maker(directory.name)) is not None:
        return maker
    try:
        pid, ticks = (directory / MAKER_FILE).read_text().split()
        return int(pid), int(ticks)
    except (OSError, ValueError):
        return None


def _maker_dead(directory: Path) -> bool:
    maker = _recorded_maker(directory)
    return maker is not None and not procfs.is_alive(*maker)


def in_state_dir(provider: LocalProvider) -> list[SandboxHandle]:
    """Handles of the orphans in ``provider``'s state directory: its pooled jails whose
    maker died, its unfinished jails whose maker died, and a pooled jail whose maker died
    handing it out (renamed, its handle not rewritten: nobody received it)."""
    found = []
    for directory in _jail_dirs(provider.config.state_dir):
        if not _maker_dead(directory):
            continue
        handle = provider.find(directory.name)
        if handle is None or directory.name.startswith(PREFIX):
            found.append(handle or _unfinished_handle(provider, directory))
        elif handle.sandbox_id != directory.name:  # its maker died handing it out
            found.append(_moved(handle, directory))
    return found


def unfinished(provider: LocalProvider, *, all_makers: bool = False) -> list[SandboxHandle]:
    """Handles for the jails of ``provider``'s state directory whose start never finished
    (a ``maker`` file or a pool id, no ``handle.json``) and whose maker died
    (``all_makers``: alive or not; for clean-ups that end every jail)."""
    return [
        _unfinished_handle(provider, directory)
        for directory in _jail_dirs(provider.config.state_dir)
        if not (directory / HANDLE_FILE).exists()
        and _recorded_maker(directory) is not None
        and (all_makers or _maker_dead(directory))
    ]


def _jail_dirs(state_dir: Path) -> Iterator[Path]:
    try:
        entries = list(os.scandir(state_dir))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and entry.name != "stubs":
            yield Path(entry.path)


def _handle(provider: LocalProvider, directory: Path) -> SandboxHandle:
    """The jail's recorded handle, else one made up from what is found (``unfinished``)."""
    return provider.find(directory.name) or _unfinished_handle(provider, directory)


def _moved(handle: SandboxHandle, directory: Path) -> SandboxHandle:
    """The handle of a pooled jail whose directory was renamed to ``directory`` (handed
    out) before its handle was rewritten: where it is now (its cgroups keep their names)."""
    socket_path = str(directory / SOCKET_NAME)
    return replace(
        handle, sandbox_id=directory.name, socket_path=socket_path, state_dir=str(directory)
    )


def _unfinished_handle(provider: LocalProvider, directory: Path) -> SandboxHandle:
    freezer, enforcer = provider.freezer, provider.enforcer
    name = provider._cgroup_name(directory.name)
    init = _jail_init(directory)
    return SandboxHandle(
        provider=provider.kind,
        sandbox_id=directory.name,
        url="http://sandbox",
        socket_path=str(directory / SOCKET_NAME),
        pid=init,
        pid_start_ticks=procfs.start_ticks(init) if init is not None else None,
        freezer=freezer.kind,
        cgroup=str(freezer.parent / name) if freezer.parent is not None else None,
        state_dir=str(directory),
        limit_cgroups=tuple(str(parent / name) for parent in enforcer.v1_parents.values()),
    )


def _jail_init(directory: Path) -> int | None:
    """The init of the jail whose ``bwrap`` binds ``directory``'s run directory: of the
    processes carrying that command line (the detaching ``sh`` while it lasts, ``bwrap``
    and its child), the deepest (pid 1 of the jail)."""
    marker = b"\0" + os.fsencode(directory / RUN_SUBDIR) + b"\0" + RUN_DIR.encode() + b"\0"
    matching: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker not in handle.read():
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        matching[int(entry)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    parents = set(matching.values())
    inner = [pid for pid, parent in matching.items() if parent in matching and pid not in parents]
    candidates = sorted(inner) or sorted(matching)
    return candidates[0] if candidates else None


# across state directories --------------------------------------------------------------


async def reap_dead_makers(provider: LocalProvider) -> tuple[str, ...]:
    """End every orphan of ``provider``'s state directory, and every pooled jail on this
    host never handed out whose maker died, whatever its state directory; remove the
    empty cgroups of dead makers' pooled jails. Returns the sandbox ids ended.

    Failures are logged (the next start or sweep tries again); a live maker's jails and
    a jail handed out to a session are never touched.
    """
    ended = []
    for handle in in_state_dir(provider):
        if await _destroy(provider, handle):
            ended.append(handle.sandbox_id)
    for other, handle in _pooled_elsewhere(provider):
        if await _destroy(other, handle):
            ended.append(handle.sandbox_id)
    return tuple(ended)


async def _destroy(provider: LocalProvider, handle: SandboxHandle) -> bool:
    try:
        await provider.destroy(handle)
    except (SandboxError, OSError):
        log.exception("could not end the orphaned jail %s", handle.sandbox_id)
        return False
    return True


def _pooled_elsewhere(provider: LocalProvider) -> list[tuple[LocalProvider, SandboxHandle]]:
    """Dead makers' pooled jails of other state directories, each with a provider of its
    own directory (a provider ends only its own directory's jails), found by cgroup."""
    parent = provider.freezer.parent
    if parent is None:  # signals: no host-wide view of jails
        return []
    found = []
    for name, sandbox_id, digest in _dead_pool_cgroups(parent):
        members = _members(parent / name)
        if not members:  # its jail is dead: only the cgroups are left
            _remove_cgroups(provider, name)
            continue
        directory = _jail_dir(members, sandbox_id, digest)
        if directory is None:  # handed out (renamed), or cannot be told: not ours to end
            continue
        config = replace(provider.config, state_dir=directory.parent, warm_pool=0)
        other = type(provider)(config)
        found.append(
            (
                other,
                _handle(other, directory)
                if directory.is_dir()
                else _unfinished_handle(other, directory),
            )
        )
    return found


def _digest(state_dir: Path) -> str:
    """The state directory's part of a jail's cgroup name (``LocalProvider._cgroup_name``)."""
    return hashlib.sha256(os.fsencode(state_dir)).hexdigest()[:10]


def _dead_pool_cgroups(parent: Path) -> Iterator[tuple[str, str, str]]:
    """(cgroup name, sandbox id, state directory digest) of pooled jails' cgroups whose
    maker died."""
    try:
        names = [e.name for e in os.scandir(parent) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for name in names:
        sandbox_id, _, digest = name.rpartition(".")
        maker = pool_maker(sandbox_id)
        if maker is not None and not procfs.is_alive(*maker):
            yield name, sandbox_id, digest


def _members(cgroup: Path) -> list[int]:
    try:
        return [int(pid) for pid in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _jail_dir(members: list[int], sandbox_id: str, digest: str) -> Path | None:
    """The pooled jail's directory as its ``bwrap``'s command line names it, if the jail
    was never handed out: that directory is still there under its pool id, or no directory
    of its state directory holds its run directory any more (deleted with its directory, or
    its whole state directory: no handle can reach its socket). None when it was handed out
    (renamed), or when that cannot be told."""
    for pid in members:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                args = handle.read().split(b"\0")
        except OSError:
            continue
        for at in range(len(args) - 2):
            if args[at] == b"--ro-bind" and args[at + 2] == RUN_DIR.encode():
                directory = Path(os.fsdecode(args[at + 1])).parent
                named = directory.name == sandbox_id and _digest(directory.parent) == digest
                if not named:
                    return None
                if directory.is_dir() or not _reachable(directory.parent, members):
                    return directory
                return None
    return None


def _reachable(state_dir: Path, members: list[int]) -> bool:
    """Whether a directory of ``state_dir`` holds the run directory the jail of ``members``
    sees at ``RUN_DIR`` (as a jail handed out does, renamed). True when it cannot be told."""
    own = os.readlink("/proc/self/ns/mnt")
    inside = None
    for pid in members:  # one in the jail's own mount namespace (not its outer ``bwrap``)
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/ns/mnt") != own:
                inside = os.stat(f"/proc/{pid}/root{RUN_DIR}")
                break
    if inside is None:
        return True
    try:
        entries = list(os.scandir(state_dir))
    except FileNotFoundError:
        return False
    except OSError:
        return True
    for entry in entries:
        with contextlib.suppress(OSError):
            found = os.stat(os.path.join(entry.path, RUN_SUBDIR))
            if (found.st_dev, found.st_ino) == (inside.st_dev, inside.st_ino):
                return True
    return False


def _remove_cgroups(provider: LocalProvider, name: str) -> None:
    """Remove a dead jail's empty cgroups (the freezer's and its limits')."""
    parents = [provider.freezer.parent, *provider.enforcer.v1_parents.values()]
    for parent in parents:
        if parent is not None:
            try:
                os.rmdir(parent / name)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.debug("cgroup %s not removed: %s", parent / name, exc)
