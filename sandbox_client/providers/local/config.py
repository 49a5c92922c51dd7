"""Settings of the local (bubblewrap) sandbox provider."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from sandbox_client.providers.local.limits import JailLimits
from sandbox_client.transport import ClientOptions

NETWORK_POLICIES = ("none", "host")
FREEZER_CHOICES = ("auto", "cgroup2", "cgroup1", "signal")
ENFORCE_CHOICES = ("auto", "rlimit")


@dataclass(frozen=True)
class JailEgress:
    """How a jail reaches the egress gateway (docs/architecture.md §11).

    Attributes:
        port: the loopback port inside the jail where ``HTTP_PROXY`` points; the jail's server
            forwards it to the gateway's socket in the jail's run directory.
        ca_bundle: a host file with the system's CAs and the gateway's CA: every program's
            trust inside the jail.
        ca_cert: a host file with the gateway's CA alone (``NODE_EXTRA_CA_CERTS``).
        no_proxy: the names programs reach directly, not through the gateway
            (``NO_PROXY``): the jail's own loopback, less any name an egress rule gives
            (a rule for ``localhost`` means the host's, reached through the gateway).
    """

    ca_bundle: Path
    ca_cert: Path
    port: int = 3128
    no_proxy: tuple[str, ...] = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class LocalConfig:
    """How local sandboxes are made.

    Attributes:
        state_dir: where each sandbox gets a directory (its socket, log and handle);
            made absolute. Keep it short: a Unix socket path is at most 107 bytes.
        network: ``"none"`` (only a private loopback) or ``"host"`` (the host's network).
        env: the whole environment of a sandbox beyond ``PATH``, ``HOME``, ``LANG``: the
            only variables that enter it (settings decide; never credentials).
        freezer: ``"auto"`` (detect), or force ``"cgroup2"``, ``"cgroup1"``, ``"signal"``.
        max_output_bytes: per process and stream, bytes the server keeps (head + tail).
        keepalive_s: silence after which a streamed reply sends a keepalive event.
        drain_s: how long output is still read after a command's shell exited.
        start_timeout_s: the longest a jail may take to start answering.
        python: the interpreter that runs the server inside the jail (read-only bind).
        bwrap: the bubblewrap executable.
        ro_binds: more host directories made visible read-only at the same path.
        client: options of the clients ``connect`` returns.
        egress: the gateway's way into each jail (None: the jail reaches nothing, unless the
            network policy is ``host``).
        limits: what each sandbox may take (memory, processes, CPU, workspace size).
        enforce: ``"auto"`` (cgroups where writable, else resource limits) or ``"rlimit"``
            (resource limits only, as on a host without a writable cgroup).
        warm_pool: how many fresh jails the provider keeps ready for new sandboxes once its
            pool is started (``LocalProvider.pool``; 0: none, at most ``pool.MAX_SIZE``).
    """

    state_dir: Path
    network: str = "none"
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    freezer: str = "auto"
    max_output_bytes: int = 1024 * 1024
    keepalive_s: float = 5.0
    drain_s: float = 0.2
    start_timeout_s: float = 10.0
    python: str = field(default_factory=lambda: os.path.realpath(sys.executable))
    bwrap: str = "bwrap"
    ro_binds: tuple[str, ...] = ()
    client: ClientOptions = field(default_factory=ClientOptions)
    egress: JailEgress | None = None
    limits: JailLimits = field(default_factory=JailLimits)
    enforce: str = "auto"
    warm_pool: int = 0

    def __post_init__(self) -> None:
        # handles store socket paths: they must not depend on the working directory
        object.__setattr__(self, "state_dir", Path(os.path.abspath(self.state_dir)))
        if self.network not in NETWORK_POLICIES:
            raise ValueError(f"network must be one of {NETWORK_POLICIES}")
        if self.freezer not in FREEZER_CHOICES:
            raise ValueError(f"freezer must be one of {FREEZER_CHOICES}")
        if self.enforce not in ENFORCE_CHOICES:
            raise ValueError(f"enforce must be one of {ENFORCE_CHOICES}")
        for name in self.env:
            if not name or "=" in name or "\x00" in name:
                raise ValueError(f"invalid environment variable name {name!r}")
