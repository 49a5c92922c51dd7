"""Several worker hosts on one machine, for the routing tests and ``bench/hosts.py``.

Each host is a real ``python -m dramatiq bot.durable.worker_main`` parent (one worker
process, two threads, its own process group) with its own ``WARROOM_HOST_ID`` and its
own data directory (so its own sandbox state directory: a local provider reaches only
its own jails, as on separate machines). All hosts share one PostgreSQL database, one
Redis database and the fake Anthropic and Slack APIs (``durable_support.Fakes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memory_store import Database, Event, HostStore, SessionStore
from tests import leaks, pg_admin
from tests.bot.durable_support import (
    Fakes,
    Probe,
    Sender,
    Worker,
    destroy_sandboxes,
    migrate,
    poll,
    worker_env,
)
from tests.conftest import PG_ADMIN_URL, require_service

HOST_SETTINGS = {
    "WARROOM_LEASE_S": "3",
    "WARROOM_SWEEP_INTERVAL_S": "0.25",
    "WARROOM_STALE_AFTER_S": "4",
    "WARROOM_BACKGROUND_POLL_S": "0.2",
    "WARROOM_HOST_BEAT_S": "0.5",
    "WARROOM_HOST_DEAD_AFTER_S": "3",
    # every step goes through the queue (a real model's call outlasts the 1 s default):
    # the worst case for a sandbox that is not where the step runs
    "WARROOM_CARRY_ON_S": "0",
    "dramatiq_worker_timeout": "100",
    "dramatiq_queue_prefetch": "2",  # as `warroom worker` sets it: one per thread
}
"""The hosts' settings: short leases, sweeps and heartbeats; no carrying on in-process."""


@dataclass
class Host:
    """One worker host: its identity, data directory and running Dramatiq parent."""

    host_id: str
    data_dir: Path
    env: dict[str, str]
    worker: Worker | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        """Its sandboxes' state directory."""
        return self.data_dir / "sbx"

    def start(self) -> None:
        """Start the host's Dramatiq parent (returns at once)."""
        log_path = self.data_dir / f"worker-{len(self.logs) + 1}.log"
        argv = [sys.executable, "-m", "dramatiq", "bot.durable.worker_main"]
        argv += ["--processes", "1", "--threads", "2", "--worker-shutdown-timeout", "30000"]
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                argv,
                env=self.env,
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.logs.append(log_path)
        self.worker = Worker(process, log_path)

    def alive(self) -> bool:
        """Whether its Dramatiq parent runs."""
        return self.worker is not None and self.worker.alive()

    def kill(self) -> None:
        """SIGKILL the whole host at once (its jails, detached, live on)."""
        if self.worker is not None and self.worker.alive():
            self.worker.kill()

    def terminate(self, *, timeout_s: float = 60.0) -> int:
        """SIGTERM to the Dramatiq parent (as systemd or a container runtime sends it);
        waits for it to exit and returns its exit status."""
        assert self.worker is not None
        self.worker.process.send_signal(signal.SIGTERM)
        return self.worker.process.wait(timeout_s)

    def owns(self, lease_owner: str | None) -> bool:
        """Whether the lease owner ``<host>:<pid>:<random>`` is one of its processes."""
        if not lease_owner or self.worker is None:
            return False
        return int(lease_owner.split(":")[1]) in self.worker.children()

    def log(self) -> str:
        """Everything the host logged, every start of it."""
        return "".join(p.read_text(errors="replace") for p in self.logs if p.exists())


@dataclass
class HostCluster:
    """What the hosts share: a fresh database, Redis, the fakes, and the hosts."""

    database_url: str
    redis_url: str
    root: Path
    fakes: Fakes
    hosts: dict[str, Host]
    routing: bool = True

    def host(self, host_id: str) -> Host:
        """The host named ``host_id``."""
        return self.hosts[host_id]

    def host_of_state_dir(self, state_dir: str | None) -> Host:
        """The host whose sandbox state directory holds ``state_dir`` (a jail's)."""
        for host in self.hosts.values():
            if state_dir is not None and Path(state_dir).parent == host.state_dir:
                return host
        raise AssertionError(f"no host holds the sandbox at {state_dir}")

    def logs(self) -> str:
        """Every host's log, for a failing test."""
        return "\n".join(f"--- {h.host_id}:\n{h.log()[-6000:]}" for h in self.hosts.values())

    async def wait_live(self, *host_ids: str, timeout_s: float = 60.0) -> None:
        """Until each of ``host_ids`` (default: all started ones) registered and beats
        (without routing, which registers nothing: until each is ready)."""
        wanted = set(host_ids or [h.host_id for h in self.hosts.values() if h.alive()])
        if not self.routing:

            async def ready() -> bool:
                return all(self.hosts[h].worker.ready() for h in wanted)  # type: ignore[union-attr]

            await poll(ready, timeout_s=timeout_s, what=f"hosts {sorted(wanted)} to be ready")
            return
        db = Database.from_url(self.database_url, data_dir=self.root)
        try:
            hosts = HostStore(db)

            async def live() -> bool:
                for host in self.hosts.values():
                    if host.worker is not None and not host.alive():
                        raise AssertionError(f"host {host.host_id} exited:\n{host.log()[-3000:]}")
                return wanted <= set(await hosts.live_hosts(dead_after_s=3.0))

            await poll(live, timeout_s=timeout_s, what=f"hosts {sorted(wanted)} to beat")
        finally:
            await db.dispose()


@contextlib.contextmanager
def running_hosts(
    redis_url: str,
    *,
    name: str,
    hosts: int,
    settings: Mapping[str, str] = HOST_SETTINGS,
) -> Iterator[HostCluster]:
    """A fresh database ``<name>_<random>``, the fakes and ``hosts`` started worker hosts
    ``host-1`` … (each with its own data directory); everything removed after."""
    require_service("PostgreSQL", PG_ADMIN_URL)
    database = leaks.database_name(name)
    pg_admin.create_database(PG_ADMIN_URL, database)
    admin = urlsplit(PG_ADMIN_URL)
    database_url = urlunsplit(admin._replace(scheme="postgresql+asyncpg", path=f"/{database}"))
    root = Path(tempfile.mkdtemp(prefix="wh-"))  # short: sandbox socket paths ≤ 107 bytes
    fakes: Fakes | None = None
    made: dict[str, Host] = {}
    try:
        asyncio.run(migrate(database_url, root))
        fakes = Fakes.start()
        sender = Sender(redis_url)
        sender.flush()
        sender.close()
        for n in range(1, hosts + 1):
            host_id = f"host-{n}"
            data_dir = root / f"h{n}"
            data_dir.mkdir()
            env = worker_env(database_url, redis_url, data_dir, fakes, settings)
            made[host_id] = Host(host_id, data_dir, env | {"WARROOM_HOST_ID": host_id})
            made[host_id].start()
        routing = settings.get("WARROOM_HOST_ROUTING", "true") != "false"
        cluster = HostCluster(database_url, redis_url, root, fakes, made, routing)
        asyncio.run(cluster.wait_live())
        yield cluster
    finally:
        for host in made.values():
            host.kill()
        if fakes is not None:
            fakes.stop()
        for host in made.values():
            destroy_sandboxes(host.state_dir)
        shutil.rmtree(root, ignore_errors=True)
        pg_admin.drop_database(PG_ADMIN_URL, database)
        sender = Sender(redis_url)
        sender.flush()
        sender.close()


@contextlib.asynccontextmanager
async def probing(cluster: HostCluster) -> AsyncIterator[Probe]:
    """A ``Probe`` over the cluster's database and Redis (its data directory unused)."""
    sender = Sender(cluster.redis_url)
    db = Database.from_url(cluster.database_url, data_dir=cluster.root)
    try:
        yield Probe(SessionStore(db), cluster.fakes, sender, cluster.root)
    finally:
        await db.dispose()
        sender.close()


def tool_outputs(events: list[Event]) -> list[str]:
    """The ``output_head`` of each ``tool_result`` event, in order."""
    return [
        str(json.loads(e.payload_json)["output_head"]) for e in events if e.kind == "tool_result"
    ]


def replacements(events: list[Event]) -> int:
    """How many ``sandbox_replaced`` notices the events hold."""
    return sum(1 for e in events if e.kind == "notice" and "sandbox_replaced" in e.payload_json)
