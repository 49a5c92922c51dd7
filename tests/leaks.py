"""The end-of-run check: a test run leaves no process, jail, database or Redis key behind.

A run marks itself with ``WARROOM_TEST_RUN`` (a random id in the environment, which every
process it starts inherits: pytest-xdist workers, worker processes, servers, and the
bubblewrap processes of a jail, whose commands get a cleared environment but whose
``bwrap`` parents keep it). When the run ends, in the process that started it (the xdist
controller, or the only process), ``check_run_left_nothing`` looks for:

- processes still carrying the run's id (after giving the run's own workers a moment to
  exit), and the ``bwrap`` processes of jails whose state directory is below the run's
  temporary directory (a jail's environment is cleared: it carries no id), which it kills,
  process group and all;
- PostgreSQL databases named for the run (``warroom_test_<run>_…``, see ``database_name``),
  which it drops;
- keys in the Redis databases the run used, which it deletes.

Each leftover is reported and fails the run (exit status 1), so a test that leaks is
found at once, not thirty minutes later on a busy CI host.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

RUN_VARIABLE = "WARROOM_TEST_RUN"
"""The environment variable that marks every process of one test run."""

DRAIN_S = 20.0
"""How long the run's own processes (xdist workers shutting down) may take to exit."""


def run_id() -> str:
    """This run's id: inherited from the process that started the run, else made here."""
    current = os.environ.get(RUN_VARIABLE)
    if not current:
        current = uuid.uuid4().hex[:8]
        os.environ[RUN_VARIABLE] = current
    return current


def database_name(prefix: str = "warroom_test") -> str:
    """A fresh PostgreSQL database name of this run: ``<prefix>_<run>_<random>``."""
    return f"{prefix}_{run_id()}_{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class Leftover:
    """One thing a run left behind: what kind, and a line that names it."""

    kind: str
    what: str


def _marked_processes(run: str, spare: frozenset[int]) -> dict[int, str]:
    """``pid -> command line`` of the live processes whose environment holds ``run``."""
    marker = f"{RUN_VARIABLE}={run}".encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spare:
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie holds nothing; its parent reaps it
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone, or not ours to read
        found[int(entry.name)] = command.strip()[:200]
    return found


def _ancestors() -> frozenset[int]:
    """This process and its ancestors (they carry the mark and are meant to)."""
    pids = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        pids.add(pid)
    return frozenset(pids)


def _jails_since(
    started_at_ticks: int, roots: tuple[Path, ...], spare: frozenset[int]
) -> dict[int, str]:
    """``pid -> command line`` of the live ``bwrap`` processes of jails whose state directory
    is below one of ``roots`` (the run's own temporary directories: its command line binds
    a path there), started after ``started_at_ticks`` (clock ticks since boot, as
    ``/proc/<pid>/stat``). Another run's jails, of this checkout or any, are not this run's.

    A jail's ``bwrap`` is started by its full path (the provider finds it on ``PATH``),
    so its program is matched by name, whatever directory it is in."""
    markers = [b" " + os.fsencode(root) + b"/" for root in roots]
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spare:
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if fields[0] == "Z" or int(fields[19]) < started_at_ticks:
            continue
        program = command.split(b" ", 1)[0]
        if program.rsplit(b"/", 1)[-1] == b"bwrap" and any(m in command for m in markers):
            found[int(entry.name)] = command.decode(errors="replace").strip()[:200]
    return found


def run_started_ticks() -> int:
    """Now, in clock ticks since boot (the unit of ``/proc/<pid>/stat``'s start time)."""
    uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    return int(uptime_s * os.sysconf("SC_CLK_TCK"))


def leftover_processes(
    run: str, started_at_ticks: int = 1 << 62, roots: tuple[Path, ...] = ()
) -> list[Leftover]:
    """The run's processes (marked, or its jails started since ``started_at_ticks`` below
    one of ``roots``) still alive after ``DRAIN_S``, killed (group and all) after."""
    spare = _ancestors()
    deadline = time.monotonic() + DRAIN_S

    def alive() -> dict[int, str]:
        return _marked_processes(run, spare) | _jails_since(started_at_ticks, roots, spare)

    found = alive()
    while found and time.monotonic() < deadline:
        time.sleep(0.2)  # waiting for processes to exit, bounded: nothing to be told by
        found = alive()
    for pid in found:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return [Leftover("process", f"pid {pid}: {command}") for pid, command in found.items()]


async def _leftover_databases(admin_url: str, run: str) -> list[Leftover]:
    import asyncpg

    conn = await asyncpg.connect(admin_url, timeout=5)
    try:
        rows = await conn.fetch(
            "SELECT datname FROM pg_database WHERE datname LIKE $1", f"%\\_{run}\\_%"
        )
        names = [str(row["datname"]) for row in rows]
        for name in names:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
    return [Leftover("database", name) for name in names]


def leftover_databases(admin_url: str, run: str) -> list[Leftover]:
    """The PostgreSQL databases named for ``run`` still there, dropped after.

    An unreachable server is no leftover (the tests that needed it failed already)."""
    try:
        return asyncio.run(_leftover_databases(admin_url, run))
    except (TimeoutError, OSError):
        return []


def redis_urls(base_url: str, workers: int) -> list[str]:
    """The Redis databases a run with ``workers`` xdist workers uses (conftest's rule)."""
    parts = urlsplit(base_url)
    base = int(parts.path.strip("/") or 0)
    numbers = [base, *(base - n for n in range(workers))]
    return [urlunsplit(parts._replace(path=f"/{n}")) for n in sorted(set(numbers)) if n >= 0]


def leftover_redis_keys(urls: Iterable[str]) -> list[Leftover]:
    """Keys left in the run's Redis databases (a sample named), deleted after."""
    import redis

    found: list[Leftover] = []
    for url in urls:
        try:
            client = redis.Redis.from_url(url, socket_timeout=5)
            keys = list(client.scan_iter(count=1000))
        except redis.RedisError:
            continue
        if keys:
            sample = ", ".join(k.decode(errors="replace") for k in keys[:5])
            found.append(Leftover("redis", f"{url}: {len(keys)} key(s), e.g. {sample}"))
            client.flushdb()
        client.close()
    return found
